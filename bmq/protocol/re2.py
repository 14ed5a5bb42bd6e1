"""Regular expressions that Kafka's requests carry in RE2 syntax (Kafka matches them with RE2J):
a KIP-848 subscription's topic regex, a ListTransactions transactional-id pattern (KIP-1152).
Python's ``re`` reads the common part of that syntax alike; RE2's quoting ``\\Q...\\E``, which
Java's ``Pattern.quote`` writes, it does not know, so it is turned into escaped text here."""

from __future__ import annotations

import re


def _unquoted(pattern: str) -> str:
    """``pattern`` with each ``\\Q...\\E`` (or ``\\Q...`` to the end) as escaped literal text;
    other escapes, ``\\\\Q`` among them, are kept as they are."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("\\Q", i):
            end = pattern.find("\\E", i + 2)
            literal = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
            out.append(re.escape(literal))
            i = len(pattern) if end < 0 else end + 2
        elif pattern[i] == "\\":
            out.append(pattern[i:i + 2])
            i += 2
        else:
            out.append(pattern[i])
            i += 1
    return "".join(out)


def compile_re2(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled; callers match whole names (``fullmatch``), as Kafka does. Raises
    re.error for a pattern that is not valid."""
    return re.compile(_unquoted(pattern))
