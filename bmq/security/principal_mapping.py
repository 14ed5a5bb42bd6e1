"""Kafka's ``ssl.principal.mapping.rules``: the name a client certificate's subject maps to.

The setting is a comma-separated list of rules, tried in order on the subject's distinguished
name (RFC 2253, as ``bmq.security.tls`` writes it); the first rule that applies gives the
principal's name:

* ``DEFAULT`` applies to every name and keeps it as it is (the setting's default);
* ``RULE:pattern/replacement/`` applies when the Java-style regular expression ``pattern``
  matches the *whole* name, which it then rewrites with ``replacement`` (``$1`` is the first
  group; a group number past the pattern's groups is literal text, as in Kafka); ``/L`` or
  ``/U`` after it lower- or upper-cases the result.

A name no rule applies to has no principal: Kafka fails the connection's authentication, and so
does BMQ (the connection is closed at its first request). Rules that do not parse stop the role
from starting, with the rule named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_RULES = "DEFAULT"
# One rule (Kafka's grammar): DEFAULT, or RULE:pattern/replacement/ with an optional L or U,
# where a pattern or replacement may hold '/' escaped as '\/'.
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class PrincipalMappingError(ValueError):
    """``ssl.principal.mapping.rules`` that do not parse."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None     # None: DEFAULT
    replacement: str = ""
    case: str = ""                      # "L", "U" or ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        mapped = self.pattern.sub(self.replacement, name)
        if self.case == "L":
            return mapped.lower()
        if self.case == "U":
            return mapped.upper()
        return mapped


class PrincipalMapper:
    """The parsed rules of one listener."""

    def __init__(self, rules: str = DEFAULT_RULES) -> None:
        """Raises ``PrincipalMappingError`` for a rule that does not parse."""
        parsed = [_parse(text) for text in _split(rules)]
        self._rules = [rule for rule in parsed if rule is not None]

    def name(self, distinguished_name: str) -> str | None:
        """The principal's name for a subject, None when no rule applies."""
        for rule in self._rules:
            mapped = rule.apply(distinguished_name)
            if mapped is not None:
                return mapped
        return None


def _split(rules: str) -> list[str]:
    return [match.group(1) for match in _SPLITTER.finditer(rules.strip() or DEFAULT_RULES)
            if match.group(0)]


def _parse(text: str) -> _Rule | None:
    match = _PARSER.match(text)
    if match is None or match.end() != len(text):
        unmatched = text[match.end():] if match else text
        raise PrincipalMappingError(f"ssl.principal.mapping.rules: invalid rule {text!r}, "
                                    f"unmatched {unmatched!r}")
    if match.group(1):
        return _Rule(None)
    if match.group(2) is None:
        if text.strip():
            raise PrincipalMappingError(f"ssl.principal.mapping.rules: invalid rule {text!r}")
        return None   # an empty rule is ignored, as in Kafka
    try:
        pattern = re.compile(_java_pattern(match.group(2)))
    except re.error as error:
        raise PrincipalMappingError(f"ssl.principal.mapping.rules: rule {text!r}: bad pattern: "
                                    f"{error}") from None
    return _Rule(pattern, _python_replacement(match.group(3), pattern.groups), match.group(4))


def _java_pattern(pattern: str) -> str:
    r"""The rule's pattern for Python's ``re``: ``\/`` (an escaped slash in the rule) is a
    slash; the rest of the common regular-expression syntax reads the same."""
    return pattern.replace("\\/", "/")


def _python_replacement(replacement: str, groups: int) -> str:
    r"""Java's replacement syntax for ``re.sub``: ``$N`` is group N (``$0`` the whole match;
    digits join the number while it names a group; a first digit past the pattern's groups is
    literal text, as Kafka's rules make it), ``\x`` is the character x."""
    out: list[str] = []
    index = 0
    while index < len(replacement):
        char = replacement[index]
        if char == "\\" and index + 1 < len(replacement):
            out.append(_literal(replacement[index + 1]))
            index += 2
            continue
        reference = _BACK_REFERENCE.match(replacement, index)
        if reference is not None:
            digits = reference.group(1)
            if int(digits[0]) > groups:
                out.append(_literal("$") + digits)   # no such group: literal, as in Kafka
            else:
                # Java's rule: the first digit names a group, each next digit joins it while
                # the number still names one.
                number, used = int(digits[0]), 1
                while used < len(digits) and number * 10 + int(digits[used]) <= groups:
                    number, used = number * 10 + int(digits[used]), used + 1
                out.append(f"\\g<{number}>" + digits[used:])
            index = reference.end()
            continue
        out.append(_literal(char))
        index += 1
    return "".join(out)


def _literal(char: str) -> str:
    return "\\\\" if char == "\\" else char
