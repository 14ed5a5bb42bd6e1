"""RE2 patterns of Kafka requests (subscription regexes, ListTransactions' transactional-id
pattern) compiled for Python: RE2's \\Q...\\E quoting, which Java's Pattern.quote writes."""

from __future__ import annotations

import re

import pytest

from bmq.coordinators.groups.consumer_group import compile_regex
from bmq.protocol.re2 import compile_re2


@pytest.mark.parametrize(("pattern", "matched", "unmatched"), [
    ("\\Qorders.eu\\E", "orders.eu", "ordersXeu"),
    ("\\Qa+b\\E-.*", "a+b-1", "aab-1"),
    ("\\Qopen to the end.", "open to the end.", "open to the endX"),
    ("x\\\\Qy", "x\\Qy", "xQy"),          # an escaped backslash, then a plain Q
    ("\\d+\\Q.\\E\\d+", "12.34", "12x34"),
])
def test_quoted_text_is_literal(pattern: str, matched: str, unmatched: str) -> None:
    for compiled in (compile_re2(pattern), compile_regex(pattern)):
        assert compiled.fullmatch(matched) and not compiled.fullmatch(unmatched)


def test_an_invalid_pattern_raises() -> None:
    with pytest.raises(re.error):
        compile_re2("(orders")
