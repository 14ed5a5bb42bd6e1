"""The filter language of views: RocketMQ's SQL-92 subset over record headers.

    expression := term (OR term)*
    term       := factor (AND factor)*
    factor     := NOT factor | '(' expression ')' | TRUE | FALSE | NAME predicate
    predicate  := ('=' | '<>') constant | ('<' | '<=' | '>' | '>=') number
                | [NOT] BETWEEN number AND number | [NOT] IN '(' string (',' string)* ')'
                | IS [NOT] NULL

A NAME is a header key (letters, digits, ``_``, ``$`` and ``.``, as RocketMQ's property
names); ``TAG`` means the header ``bmq.tag``. Keywords are case-insensitive. Constants are
numbers (``42``, ``-1.5``) and strings in single quotes (``'it''s'``). As in SQL, a header a
record lacks (or has with a null value) is NULL: comparing it is unknown, and a record is kept
only when the whole expression is true. Numeric comparisons read the header's value as a
decimal number (unknown if it is not one); ``=`` and ``<>`` with a string compare bytes.

``compile_filter`` checks an expression (``FilterError`` says what is wrong and where) and
turns it into the program the C evaluator runs (``bmq.readpath._viewfilter``): a tree in
prefix order, each node an opcode byte then its operands, with header keys as slot numbers.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from bmq.protocol.record_codec import decompress
from bmq.readpath._viewfilter import filter_batches

TAG_HEADER = "bmq.tag"

# Opcodes of the program (the same numbers in _viewfilter.c).
OP_TRUE, OP_FALSE, OP_AND, OP_OR, OP_NOT = 0, 1, 2, 3, 4
OP_IS_NULL, OP_STR_EQ, OP_NUM_CMP, OP_BETWEEN, OP_IN = 5, 6, 7, 8, 9
# Numeric comparisons (``<>`` is NOT of ``=``).
_NUM_OPS = {"=": 0, "<": 1, "<=": 2, ">": 3, ">=": 4}
MAX_HEADERS = 255
MAX_LENGTH = 16 << 10
MAX_DEPTH = 64            # NOTs and parentheses inside each other

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<name>[A-Za-z_$][A-Za-z0-9_$.]*)
  | (?P<op><>|<=|>=|=|<|>|\(|\)|,)
""", re.VERBOSE)
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE"}


class FilterError(ValueError):
    """A malformed filter; the message says where (1-based character position)."""


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str        # number, string, name, keyword, op, end
    text: str
    at: int          # 0-based position in the expression


@dataclass(frozen=True, slots=True)
class CompiledFilter:
    expression: str
    program: bytes
    headers: tuple[bytes, ...]     # the header keys slots refer to


def _tokens(text: str) -> list[_Token]:
    tokens = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            what = "unterminated string" if text[pos] == "'" else f"unexpected {text[pos]!r}"
            raise FilterError(f"{what} at position {pos + 1}")
        kind = match.lastgroup
        assert kind is not None
        if kind != "space":
            value = match.group()
            if kind == "name" and value.upper() in _KEYWORDS:
                kind, value = "keyword", value.upper()
            tokens.append(_Token(kind, value, pos))
        pos = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.depth = 0
        self.headers: dict[str, int] = {}

    # ------------------------------------------------------------------ tokens
    def peek(self) -> _Token:
        return self.tokens[self.at]

    def take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def accept(self, text: str) -> bool:
        token = self.peek()
        if token.kind in ("keyword", "op") and token.text == text:
            self.at += 1
            return True
        return False

    def fail(self, expected: str) -> FilterError:
        token = self.peek()
        found = "the end" if token.kind == "end" else repr(token.text)
        return FilterError(f"expected {expected} at position {token.at + 1}, found {found}")

    def expect(self, text: str) -> None:
        if not self.accept(text):
            raise self.fail(repr(text) if len(text) == 1 else text)

    def number(self) -> bytes:
        token = self.take()
        if token.kind != "number":
            self.at -= 1
            raise self.fail("a number")
        return struct.pack("<d", float(token.text))

    def string(self) -> bytes:
        token = self.take()
        if token.kind != "string":
            self.at -= 1
            raise self.fail("a string in single quotes")
        value = token.text[1:-1].replace("''", "'").encode()
        return struct.pack("<I", len(value)) + value

    def slot(self, name: str) -> bytes:
        key = TAG_HEADER if name.upper() == "TAG" else name
        if key not in self.headers:
            if len(self.headers) == MAX_HEADERS:
                raise self.fail(f"at most {MAX_HEADERS} header names")
            self.headers[key] = len(self.headers)
        return bytes([self.headers[key]])

    # ------------------------------------------------------------------ grammar
    def expression(self) -> bytes:
        terms = [self.term()]
        while self.accept("OR"):
            terms.append(self.term())
        return terms[0] if len(terms) == 1 else _group(OP_OR, terms)

    def term(self) -> bytes:
        factors = [self.factor()]
        while self.accept("AND"):
            factors.append(self.factor())
        return factors[0] if len(factors) == 1 else _group(OP_AND, factors)

    def factor(self) -> bytes:
        if self.peek().text in ("NOT", "("):
            if self.depth == MAX_DEPTH:
                raise FilterError(f"nested more than {MAX_DEPTH} deep at position "
                                  f"{self.peek().at + 1}")
            self.depth += 1
            try:
                return self.nested()
            finally:
                self.depth -= 1
        if self.accept("TRUE"):
            return bytes([OP_TRUE])
        if self.accept("FALSE"):
            return bytes([OP_FALSE])
        token = self.peek()
        if token.kind != "name":
            raise self.fail("a header name, NOT, TRUE, FALSE or '('")
        self.at += 1
        return self.predicate(self.slot(token.text))

    def nested(self) -> bytes:
        if self.accept("NOT"):
            return bytes([OP_NOT]) + self.factor()
        self.expect("(")
        inner = self.expression()
        self.expect(")")
        return inner

    def predicate(self, slot: bytes) -> bytes:
        token = self.peek()
        if self.accept("IS"):
            negated = self.accept("NOT")
            self.expect("NULL")
            return _negated(negated, bytes([OP_IS_NULL]) + slot)
        negated = self.accept("NOT")
        if self.accept("BETWEEN"):
            low = self.number()
            self.expect("AND")
            return _negated(negated, bytes([OP_BETWEEN]) + slot + low + self.number())
        if self.accept("IN"):
            self.expect("(")
            values = [self.string()]
            while self.accept(","):
                values.append(self.string())
            self.expect(")")
            return _negated(negated, bytes([OP_IN]) + slot + struct.pack("<H", len(values))
                            + b"".join(values))
        if negated:
            raise self.fail("BETWEEN or IN after NOT")
        if token.kind == "op" and token.text in ("=", "<>"):
            self.at += 1
            if self.peek().kind == "string":
                return _negated(token.text == "<>", bytes([OP_STR_EQ]) + slot + self.string())
            compare = bytes([OP_NUM_CMP]) + slot + bytes([_NUM_OPS["="]]) + self.number()
            return _negated(token.text == "<>", compare)
        if token.kind == "op" and token.text in _NUM_OPS:
            self.at += 1
            return bytes([OP_NUM_CMP]) + slot + bytes([_NUM_OPS[token.text]]) + self.number()
        raise self.fail("=, <>, <, <=, >, >=, BETWEEN, IN or IS")


def _group(op: int, children: list[bytes]) -> bytes:
    return bytes([op]) + struct.pack("<H", len(children)) + b"".join(children)


def _negated(negated: bool, node: bytes) -> bytes:
    return bytes([OP_NOT]) + node if negated else node


def compile_filter(expression: str) -> CompiledFilter:
    """Check ``expression`` and compile it; raises FilterError saying where it is malformed."""
    if len(expression) > MAX_LENGTH:
        raise FilterError(f"a filter is at most {MAX_LENGTH} characters")
    parser = _Parser(expression)
    if parser.peek().kind == "end":
        raise FilterError("empty filter")
    program = parser.expression()
    if parser.peek().kind != "end":
        raise parser.fail("AND, OR or the end")
    return CompiledFilter(expression, program,
                          tuple(key.encode() for key in parser.headers))


def apply_filter(compiled: CompiledFilter, data: bytes | memoryview) -> bytes:
    """The whole batches of ``data`` with only the records ``compiled`` matches, each batch
    kept (empty if none matches) with its offsets: the C evaluator's rewrite."""
    return filter_batches(data, compiled.program, compiled.headers, decompress)
