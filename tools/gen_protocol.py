#!/usr/bin/env python3
"""Generate ``bmq/protocol/messages/`` from Kafka's message JSON specs.

The specs are the ``*.json`` files Apache Kafka ships (``clients/.../common/message``); we read
the copies bundled in the installed ``kafka`` (kafka-python) package.  For every spec with an
``apiKey`` (plus the ``data`` specs ``ConsumerProtocolSubscription``/``Assignment``) we emit one
module with a slotted dataclass per struct and straight-line ``read``/``write`` functions with
``if version ...`` conditionals, like Kafka's Java generator does.  ``__init__.py`` gets the
``REQUEST_TYPES``/``RESPONSE_TYPES`` registries and imports each module on first use.  BMQ's
own internal APIs (proxy <-> broker, api keys from 32000 up), the few Kafka APIs that
kafka-python's copy lacks (ConsumerGroupHeartbeat, ConsumerGroupDescribe), and the keys and
values of Kafka's internal topics that BMQ writes in Kafka's format (``coordinator-key`` specs,
whose api key is the record type written before the key, and ``data`` specs) are specs in the
same format under ``bmq/protocol/specs/``.

Usage::

    python tools/gen_protocol.py           # (re)write bmq/protocol/messages/
    python tools/gen_protocol.py --check   # exit 1 if the committed files are stale

The output is deterministic and formatted the way ``ruff format`` would format it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import keyword
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT_DIR = REPO / "bmq" / "protocol" / "messages"
INTERNAL_SPEC_DIR = REPO / "bmq" / "protocol" / "specs"
LINE = 100
INF = 0x7FFF  # versions are int16; "N+" means N..INF

# Types with a fixed width, by their struct format char (big-endian).
FIXED = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "uint32": ("I", 4),
    "float64": ("d", 8),
    "bool": ("?", 1),
}
VARIABLE = {"string", "bytes", "uuid", "records"}
PRIMITIVES = set(FIXED) | VARIABLE
PY_TYPES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "int",
    "uint16": "int",
    "uint32": "int",
    "float64": "float",
    "bool": "bool",
    "string": "str",
    "bytes": "bytes",
    "uuid": "UUID",
    "records": "RecordsInput",
}
ZERO = {
    "int": "0",
    "float": "0.0",
    "bool": "False",
    "str": '""',
    "bytes": 'b""',
    "UUID": "ZERO_UUID",
}

Range = tuple[int, int]


# =========================================================================== spec loading


def schema_dir() -> Path:
    """The JSON spec directory of the installed ``kafka`` package."""
    spec = importlib.util.find_spec("kafka")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the kafka (kafka-python) package is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    return root / "protocol" / "schemas" / "resources"


def strip_comments(text: str) -> str:
    """Remove ``//`` line comments (outside of JSON strings)."""
    out: list[str] = []
    i = 0
    n = len(text)
    in_str = False
    while i < n:
        ch = text[i]
        if in_str:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            out.append(ch)
        elif ch == "/" and text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def parse_range(s: str | None) -> Range | None:
    """``"3+"`` -> (3, INF), ``"0-12"`` -> (0, 12), ``"5"`` -> (5, 5), ``"none"`` -> None."""
    if s is None:
        return None
    s = s.strip()
    if s == "none" or not s:
        return None
    if s.endswith("+"):
        return (int(s[:-1]), INF)
    if "-" in s:
        a, b = s.split("-")
        return (int(a), int(b))
    return (int(s), int(s))


def intersect(a: Range | None, b: Range | None) -> Range | None:
    if a is None or b is None:
        return None
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else None


def hull(a: Range | None, b: Range | None) -> Range | None:
    if a is None:
        return b
    if b is None:
        return a
    return (min(a[0], b[0]), max(a[1], b[1]))


def snake(name: str) -> str:
    s = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", s).lower()
    return s + "_" if keyword.iskeyword(s) else s


@dataclass
class FieldSpec:
    name: str
    attr: str
    type: str  # raw JSON type, e.g. "int32", "[]string", "[]TopicData", "Cursor"
    versions: Range | None
    nullable: Range | None
    tagged: Range | None
    tag: int | None
    flexible: Range | bool | None  # field-level flexibleVersions override; True = inherit
    default: object
    about: str

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.elem not in PRIMITIVES

    def regular_range(self) -> Range | None:
        """Versions in which the field is a regular (non-tagged) field."""
        if self.tagged is None:
            return self.versions
        return intersect(self.versions, (0, self.tagged[0] - 1))

    def tagged_range(self) -> Range | None:
        return intersect(self.versions, self.tagged)

    def present(self, version: int) -> bool:
        return self.versions is not None and self.versions[0] <= version <= self.versions[1]

    def is_tagged_in(self, version: int) -> bool:
        r = self.tagged_range()
        return r is not None and r[0] <= version <= r[1]

    def is_nullable_in(self, version: int) -> bool:
        return self.nullable is not None and self.nullable[0] <= version <= self.nullable[1]


@dataclass
class StructSpec:
    name: str
    fields: list[FieldSpec]
    top: bool = False
    ctx: Range | None = None  # hull of the versions it is used with
    has_records: bool = False

    def fields_in(self, version: int) -> list[FieldSpec]:
        """Fields present in ``version`` (regular and tagged), in spec order."""
        return [f for f in self.fields if f.present(version)]


@dataclass
class MessageSpec:
    name: str
    module: str
    kind: str  # request | response | data | coordinator-key | header
    api_key: int | None
    valid: Range
    flexible: Range | None
    structs: dict[str, StructSpec] = field(default_factory=dict)  # emission order
    about: str = ""

    @property
    def top(self) -> StructSpec:
        return self.structs[self.name]

    @property
    def flexible_min(self) -> int | None:
        return None if self.flexible is None else self.flexible[0]


def _parse_fields(
    msg: MessageSpec, defs: dict[str, StructSpec], raw: list[dict[str, Any]]
) -> list[FieldSpec]:
    out: list[FieldSpec] = []
    for jf in raw:
        flex: Range | bool | None = True
        if "flexibleVersions" in jf:
            flex = parse_range(jf["flexibleVersions"])
        f = FieldSpec(
            name=jf["name"],
            attr=snake(jf["name"]),
            type=jf["type"],
            versions=parse_range(jf.get("versions")),
            nullable=parse_range(jf.get("nullableVersions")),
            tagged=parse_range(jf.get("taggedVersions")),
            tag=jf.get("tag"),
            flexible=flex,
            default=jf.get("default"),
            about=jf.get("about", ""),
        )
        if f.tagged is not None:
            assert f.tag is not None, (msg.name, f.name)
            assert f.tagged[1] == INF, (msg.name, f.name)
        if "fields" in jf:
            sname = f.elem
            assert sname not in PRIMITIVES, (msg.name, f.name)
            if sname in defs:
                raise ValueError(f"{msg.name}: struct {sname} defined twice")
            defs[sname] = StructSpec(sname, [])
            defs[sname].fields = _parse_fields(msg, defs, jf["fields"])
        out.append(f)
    return out


# Versions Kafka removed from a spec but still has to answer. Produce v0-2 left the spec in
# Kafka 4.0, yet brokers must list Produce v0 in ApiVersions for librdkafka (KAFKA-18659) and
# answer those versions with UNSUPPORTED_VERSION; the fields still carry their v0 ranges.
VALID_VERSIONS_OVERRIDES = {"ProduceRequest": "0-13", "ProduceResponse": "0-13"}


def load_message(path: Path) -> MessageSpec:
    spec = json.loads(strip_comments(path.read_text()))
    valid = parse_range(VALID_VERSIONS_OVERRIDES.get(spec["name"], spec["validVersions"]))
    assert valid is not None
    msg = MessageSpec(
        name=spec["name"],
        module=snake(spec["name"]),
        kind=spec["type"],
        api_key=spec.get("apiKey"),
        valid=valid,
        flexible=parse_range(spec.get("flexibleVersions")),
    )
    if msg.flexible is not None:
        assert msg.flexible[1] == INF
    defs: dict[str, StructSpec] = {}
    for cs in spec.get("commonStructs", []):
        defs[cs["name"]] = StructSpec(cs["name"], [])
        defs[cs["name"]].fields = _parse_fields(msg, defs, cs["fields"])
    top = StructSpec(msg.name, _parse_fields(msg, defs, spec["fields"]), top=True)
    if msg.name in defs:
        raise ValueError(f"{msg.name}: struct name clashes with the message name")
    defs[msg.name] = top

    # Usage ranges (fixpoint over the struct graph).
    def visit(s: StructSpec, ctx: Range) -> None:
        new = hull(s.ctx, ctx)
        if new == s.ctx:
            return
        s.ctx = new
        for f in s.fields:
            if f.is_struct:
                if f.elem not in defs:
                    raise ValueError(f"{msg.name}: unknown struct type {f.elem}")
                fctx = intersect(new, f.versions)
                if fctx is not None:
                    visit(defs[f.elem], fctx)

    visit(top, valid)

    # has_records (transitively), for Writer.buf reload decisions.
    def records_in(s: StructSpec, seen: set[str]) -> bool:
        if s.name in seen:
            return False
        seen.add(s.name)
        return any(
            f.elem == "records" or (f.is_struct and records_in(defs[f.elem], seen))
            for f in s.fields
        )

    for s in defs.values():
        s.has_records = records_in(s, set())

    # Emission order: dependencies first (post-order), starting with common structs.
    order: dict[str, StructSpec] = {}

    def emit(s: StructSpec) -> None:
        if s.name in order:
            return
        for f in s.fields:
            if f.is_struct and f.elem not in order:
                emit(defs[f.elem])
        order[s.name] = s

    for cs in spec.get("commonStructs", []):
        emit(defs[cs["name"]])
    emit(top)
    for s in defs.values():
        emit(s)
    msg.structs = order
    return msg


def spec_paths() -> list[Path]:
    d = schema_dir()
    # Kafka's specs, then BMQ's own (its internal APIs, and Kafka APIs kafka-python lacks).
    paths = sorted(d.glob("*.json")) + sorted(INTERNAL_SPEC_DIR.glob("*.json"))
    out = []
    for p in paths:
        if p.stem in ("RequestHeader", "ResponseHeader"):
            continue  # hand-written in bmq/protocol/headers.py
        out.append(p)
    return out


def load_all() -> list[MessageSpec]:
    msgs = []
    for p in spec_paths():
        m = load_message(p)
        if m.kind in ("request", "response") and m.api_key is None:
            continue
        if m.kind not in ("request", "response", "data", "coordinator-key"):
            continue
        msgs.append(m)
    return msgs


# =========================================================================== code emission


class Code:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def __call__(self, line: str = "") -> None:
        self.lines.append(("    " * self.level + line) if line else "")

    def call(self, prefix: str, args: list[str], suffix: str) -> None:
        """Emit ``prefix + args + suffix`` wrapped the way ruff format wraps a call."""
        ind = "    " * self.level
        one = f"{prefix}{', '.join(args)}{suffix}"
        if len(ind) + len(one) <= LINE:
            self(one)
            return
        inner = ", ".join(args)
        self(prefix)
        if len(ind) + 4 + len(inner) <= LINE:
            self.lines.append(ind + "    " + inner)
        else:
            for a in args:
                self.lines.append(ind + "    " + a + ",")
        self(suffix.lstrip())

    def assign(self, targets: list[str], rhs: str) -> None:
        """Emit ``a, b, c = rhs`` wrapped the way ruff format wraps it."""
        ind = "    " * self.level
        lhs = ", ".join(targets)
        head, _, args = rhs.partition("(")
        if len(ind) + len(lhs) + 3 + len(rhs) <= LINE:
            self(f"{lhs} = {rhs}")
        elif len(ind) + len(lhs) + 3 + len(head) + 1 <= LINE:
            self(f"{lhs} = {head}(")
            self.lines.append(ind + "    " + args[:-1])
            self(")")
        elif len(ind) + len(lhs) + 4 <= LINE and len(ind) + 4 + len(rhs) <= LINE:
            self(f"{lhs} = (")
            self.lines.append(ind + "    " + rhs)
            self(")")
        else:
            self("(")
            for t in targets:
                self.lines.append(ind + "    " + t + ",")
            self(f") = {rhs}")

    def wrap(self, prefix: str, inner: str, suffix: str) -> None:
        """Emit ``prefix + inner + suffix``, splitting inside the brackets if too long."""
        ind = "    " * self.level
        if len(ind) + len(prefix) + len(inner) + len(suffix) <= LINE:
            self(prefix + inner + suffix)
        else:
            self(prefix)
            self.lines.append(ind + "    " + inner)
            self(suffix)

    def indent(self) -> _Indent:
        return _Indent(self)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n" if self.lines else ""


class _Indent:
    def __init__(self, c: Code) -> None:
        self.c = c

    def __enter__(self) -> None:
        self.c.level += 1

    def __exit__(self, *a: object) -> None:
        self.c.level -= 1


def cond_expr(need: Range | None, ctx: Range) -> str | None:
    """Python condition on ``version`` for ``need`` given that ``version`` is within ``ctx``.

    Returns "" when always true, None when never true.
    """
    r = intersect(need, ctx)
    if r is None:
        return None
    lo_ok = r[0] <= ctx[0]
    hi_ok = r[1] >= ctx[1]
    if lo_ok and hi_ok:
        return ""
    if lo_ok:
        return f"version <= {r[1]}"
    if hi_ok:
        return f"version >= {r[0]}"
    if r[0] == r[1]:
        return f"version == {r[0]}"
    return f"{r[0]} <= version <= {r[1]}"


def doc_string(text: str) -> str:
    text = " ".join(text.split()).replace("\\", "\\\\")
    if not text:
        return ""
    if text.endswith('"'):
        text += " "
    return f'"""{text}"""'


class ModuleGen:
    def __init__(self, msg: MessageSpec) -> None:
        self.msg = msg
        self.structs_fmt: dict[str, str] = {}  # fmt -> name
        self.used: set[str] = set()
        self.defaults_needed: list[str] = []  # struct names needing _DEFAULT_<name>

    # ------------------------------------------------------------------ helpers
    def fmt(self, chars: str) -> str:
        name = "_S_" + chars.replace("?", "o")
        self.structs_fmt[chars] = name
        return name

    def use(self, name: str) -> str:
        self.used.add(name)
        return name

    def flex_of(self, f: FieldSpec) -> Range | None:
        if f.flexible is True:
            return self.msg.flexible
        assert not isinstance(f.flexible, bool)
        return f.flexible

    def py_elem(self, f: FieldSpec) -> str:
        e = f.elem
        if e in PRIMITIVES:
            return PY_TYPES[e]
        return e

    def annotation(self, f: FieldSpec) -> str:
        if f.elem == "records":
            self.use("RecordsInput")
            return "RecordsInput"
        if f.elem == "uuid":
            self.use("UUID")
        t = self.py_elem(f)
        if f.is_array:
            t = f"list[{t}]"
        if f.nullable is not None:
            t += " | None"
        return t

    def default_expr(self, f: FieldSpec) -> tuple[str, bool]:
        """(expression, is_factory) for the dataclass field default."""
        raw = f.default
        if f.elem == "records":
            return ("None" if f.nullable is not None else 'b""'), False
        if raw == "null":
            assert f.nullable is not None, (self.msg.name, f.name)
            return "None", False
        if f.is_array:
            assert raw in (None, ""), (self.msg.name, f.name, raw)
            return "list", True
        if f.is_struct:
            assert raw in (None, ""), (self.msg.name, f.name, raw)
            return f.elem, True
        py = PY_TYPES[f.elem]
        if raw is None or (raw == "" and py != "str"):
            if py == "UUID":
                self.use("ZERO_UUID")
            return ZERO[py], False
        if py == "bool":
            if isinstance(raw, bool):
                return repr(raw), False
            assert raw in ("true", "false"), raw
            return ("True" if raw == "true" else "False"), False
        if py == "int":
            return str(raw if isinstance(raw, int) else int(str(raw), 0)), False
        if py == "float":
            return repr(float(raw)), False  # type: ignore[arg-type]
        if py == "str":
            return json.dumps(raw), False
        raise ValueError(f"{self.msg.name}.{f.name}: unsupported default {raw!r}")

    def value_default(self, f: FieldSpec) -> str:
        """An expression producing the default value (a fresh one for mutables)."""
        expr, factory = self.default_expr(f)
        if factory:
            return "[]" if expr == "list" else f"{expr}()"
        return expr

    def compare_default(self, f: FieldSpec) -> str:
        """Expression to compare against when deciding whether a tagged field is written."""
        expr, factory = self.default_expr(f)
        if factory:
            if expr == "list":
                return "[]"
            if expr not in self.defaults_needed:
                self.defaults_needed.append(expr)
            return f"_DEFAULT_{expr}"
        return expr

    # ------------------------------------------------------------------ read
    def emit_read_scalar(
        self, c: Code, elem: str, target: str, compact: bool, nullable: str | bool
    ) -> None:
        """Read one string/bytes/records/uuid value into ``target``."""
        if elem == "uuid":
            c(f"{target} = {self.use('read_uuid')}(buf, pos)")
            c("pos += 16")
            return
        self.emit_read_length(c, compact, 2 if elem == "string" else 4)
        decode_error = self.use("DecodeError")
        if nullable:
            ncond = "_n == -1" if nullable is True else f"_n == -1 and {nullable}"
            c(f"if {ncond}:")
            with c.indent():
                c(f"{target} = None")
            c("else:")
            c.level += 1
        c("_m = buf[pos : pos + _n]")
        c("if len(_m) != _n:")
        with c.indent():
            c(f'raise {decode_error}("truncated or invalid {elem} length")')
        c("pos += _n")
        if elem == "string":
            c(f"{target} = _m.tobytes().decode()")
        elif elem == "bytes":
            c(f"{target} = _m.tobytes()")
        else:
            c(f"{target} = _m")
        if nullable:
            c.level -= 1

    def emit_read_length(self, c: Code, compact: bool, width: int) -> None:
        """Set ``_n`` to a classic (int16/int32) or compact (uvarint - 1) length."""
        if compact:
            c("_n = buf[pos]")
            c("pos += 1")
            c("if _n > 127:")
            with c.indent():
                c(f"_n, pos = {self.use('read_uvarint')}(buf, pos - 1)")
            c("_n -= 1")
        else:
            s = self.fmt("h" if width == 2 else "i")
            c(f"_n = {s}.unpack_from(buf, pos)[0]")
            c(f"pos += {width}")

    def emit_read_value(
        self, c: Code, f: FieldSpec, target: str, compact: bool, nullable: str | bool
    ) -> None:
        decode_error = self.use("DecodeError")
        if f.is_array:
            self.emit_read_length(c, compact, 4)
            if nullable:
                ncond = "_n == -1" if nullable is True else f"_n == -1 and {nullable}"
                c(f"if {ncond}:")
                with c.indent():
                    c(f"{target} = None")
                c("else:")
                c.level += 1
            c("if _n < 0 or _n > len(buf) - pos:")
            with c.indent():
                c(f'raise {decode_error}("invalid array length")')
            e = f.elem
            if e in FIXED:
                ch, width = FIXED[e]
                self.use("struct")
                c(f'{target} = list(struct.unpack_from(">%d{ch}" % _n, buf, pos))')
                c(f"pos += {width} * _n" if width > 1 else "pos += _n")
            elif e in PRIMITIVES:
                c(f"{target} = []")
                c("for _ in range(_n):")
                with c.indent():
                    ev = f"e_{f.attr}"
                    self.emit_read_scalar(c, e, ev, compact, False)
                    c(f"{target}.append({ev})")
            else:
                c("r.pos = pos")
                c.wrap(f"{target} = [", f"_read_{e}(r, version) for _ in range(_n)", "]")
                c("pos = r.pos")
            if nullable:
                c.level -= 1
        elif f.is_struct:
            if nullable:
                s = self.fmt("b")
                ncond = f"{s}.unpack_from(buf, pos)[0] < 0"
                c(f"if {ncond}:")
                with c.indent():
                    c("pos += 1")
                    c(f"{target} = None")
                c("else:")
                c.level += 1
                c("r.pos = pos + 1")
            else:
                c("r.pos = pos")
            c(f"{target} = _read_{f.elem}(r, version)")
            c("pos = r.pos")
            if nullable:
                c.level -= 1
        elif f.elem in FIXED:
            ch, width = FIXED[f.elem]
            c(f"{target} = {self.fmt(ch)}.unpack_from(buf, pos)[0]")
            c(f"pos += {width}")
        else:
            self.emit_read_scalar(c, f.elem, target, compact, nullable)

    def nullable_cond(self, f: FieldSpec, ctx: Range) -> str | bool:
        cond = cond_expr(f.nullable, ctx)
        if cond is None:
            return False
        return True if cond == "" else cond

    def emit_read_field(self, c: Code, f: FieldSpec, ctx: Range, tagged: bool) -> None:
        """Read a variable-size field (ctx = versions in which this code runs)."""
        target = f"f_{f.attr}"
        nullable = self.nullable_cond(f, ctx)
        flex = self.flex_of(f)
        if tagged:
            self.emit_read_value(c, f, target, True, nullable)
            return
        fc = cond_expr(flex, ctx)
        if fc is None or (not f.is_array and (f.is_struct or f.elem in FIXED)):
            self.emit_read_value(c, f, target, fc == "", nullable)
        elif fc == "":
            self.emit_read_value(c, f, target, True, nullable)
        else:
            c(f"if {fc}:")
            with c.indent():
                assert flex is not None
                sub = intersect(ctx, flex)
                assert sub is not None
                self.emit_read_value(c, f, target, True, self.nullable_cond(f, sub))
            c("else:")
            with c.indent():
                sub = intersect(ctx, (0, flex[0] - 1))
                assert sub is not None
                self.emit_read_value(c, f, target, False, self.nullable_cond(f, sub))

    def groups(self, s: StructSpec) -> Iterator[tuple[str, list[FieldSpec]]]:
        """Regular fields grouped into (condition, fields); fixed-size runs are merged."""
        assert s.ctx is not None
        cur: list[FieldSpec] = []
        cur_cond = ""
        for f in s.fields:
            cond = cond_expr(f.regular_range(), s.ctx)
            if cond is None:
                continue
            fixed = f.elem in FIXED and not f.is_array
            if fixed and cur and cond == cur_cond and self._fits_group([*cur, f]):
                cur.append(f)
                continue
            if cur:
                yield cur_cond, cur
                cur = []
            if fixed:
                cur = [f]
                cur_cond = cond
            else:
                yield cond, [f]
        if cur:
            yield cur_cond, cur

    @staticmethod
    def _fits_group(fs: list[FieldSpec]) -> bool:
        return len(fs) <= 32

    def gen_read(self, c: Code, s: StructSpec) -> None:
        assert s.ctx is not None
        ctx = s.ctx
        c.call(f"def _read_{s.name}(", ["r: Reader", "version: int"], f") -> {s.name}:")
        with c.indent():
            c("buf = r.buf")
            c("pos = r.pos")
            for f in s.fields:
                present = intersect(f.versions, ctx)
                if present is None:
                    continue
                ann = self.annotation(f)
                if cond_expr(f.regular_range(), ctx) == "":
                    c(f"f_{f.attr}: {ann}")
                elif self._lazy_struct(f):
                    # build the default struct only if the field was not read
                    c(f"f_{f.attr}: {ann} | None = None")
                else:
                    c(f"f_{f.attr}: {ann} = {self.value_default(f)}")
            for cond, fs in self.groups(s):
                if cond:
                    c(f"if {cond}:")
                    c.level += 1
                sub = ctx if not cond else intersect(ctx, fs[0].regular_range())
                assert sub is not None
                if fs[0].elem in FIXED and not fs[0].is_array:
                    fmt = "".join(FIXED[f.elem][0] for f in fs)
                    size = sum(FIXED[f.elem][1] for f in fs)
                    sname = self.fmt(fmt)
                    if len(fs) == 1:
                        c(f"f_{fs[0].attr} = {sname}.unpack_from(buf, pos)[0]")
                    else:
                        c.assign([f"f_{f.attr}" for f in fs], f"{sname}.unpack_from(buf, pos)")
                    c(f"pos += {size}")
                else:
                    self.emit_read_field(c, fs[0], sub, tagged=False)
                if cond:
                    c.level -= 1
            self.gen_read_tags(c, s)
            c("r.pos = pos")
            present = [f for f in s.fields if intersect(f.versions, ctx) is not None]
            args = []
            for f in present:
                value = f"f_{f.attr}"
                if cond_expr(f.regular_range(), ctx) != "" and self._lazy_struct(f):
                    value = f"{value} or {f.elem}()"
                if len(present) != len(s.fields):
                    # some fields are never present where this struct is used: keyword call
                    value = f"{f.attr}={value}"
                args.append(value)
            c.call(f"return {s.name}(", args, ")")

    @staticmethod
    def _lazy_struct(f: FieldSpec) -> bool:
        return f.is_struct and not f.is_array and f.nullable is None

    def gen_read_tags(self, c: Code, s: StructSpec) -> None:
        assert s.ctx is not None
        fcond = cond_expr(self.msg.flexible, s.ctx)
        if fcond is None:
            return
        if fcond:
            c(f"if {fcond}:")
            c.level += 1
        fctx = intersect(s.ctx, self.msg.flexible)
        assert fctx is not None
        tagged = [f for f in s.fields if cond_expr(f.tagged_range(), fctx) is not None]
        tagged.sort(key=lambda f: f.tag or 0)
        c("_n = buf[pos]")
        c("pos += 1")
        c("if _n:")
        with c.indent():
            if not tagged:
                c(f"pos = {self.use('skip_tagged_fields')}(buf, pos - 1)")
            else:
                rv = self.use("read_uvarint")
                de = self.use("DecodeError")
                c("if _n > 127:")
                with c.indent():
                    c(f"_n, pos = {rv}(buf, pos - 1)")
                c("for _ in range(_n):")
                with c.indent():
                    c(f"_tag, pos = {rv}(buf, pos)")
                    c(f"_size, pos = {rv}(buf, pos)")
                    c("_end = pos + _size")
                    c("if _end > len(buf):")
                    with c.indent():
                        c(f'raise {de}("truncated tagged field")')
                    first = True
                    for f in tagged:
                        tc = cond_expr(f.tagged_range(), fctx)
                        cond = f"_tag == {f.tag}" + (f" and {tc}" if tc else "")
                        c(f"{'if' if first else 'elif'} {cond}:")
                        first = False
                        with c.indent():
                            sub = intersect(fctx, f.tagged_range())
                            assert sub is not None
                            self.emit_read_field(c, f, sub, tagged=True)
                            c("if pos > _end:")
                            with c.indent():
                                c(f'raise {de}("tagged field overruns its size")')
                    c("pos = _end")
        if fcond:
            c.level -= 1

    # ------------------------------------------------------------------ write
    def emit_write_length(self, c: Code, expr: str, compact: bool, width: int, b: str) -> None:
        if compact:
            c(f"_l = {expr} + 1")
            c("if _l < 128:")
            with c.indent():
                c(f"{b}.append(_l)")
            c("else:")
            with c.indent():
                c(f"{b} += {self.use('encode_uvarint')}(_l)")
        else:
            c(f"{b} += {self.fmt('h' if width == 2 else 'i')}.pack({expr})")

    def emit_null(self, c: Code, compact: bool, width: int, b: str) -> None:
        if compact:
            c(f"{b}.append(0)")
        else:
            ff = "\\xff" * width
            c(f'{b} += b"{ff}"')

    def emit_write_scalar(
        self, c: Code, elem: str, value: str, compact: bool, w: str, b: str
    ) -> None:
        """Write a non-None string/bytes/uuid ``value``."""
        if elem == "uuid":
            c(f"{b} += {value}.bytes")
            return
        if elem == "string":
            c(f"_s = {value}.encode()")
            data = "_s"
        else:
            data = value
        self.emit_write_length(c, f"len({data})", compact, 2 if elem == "string" else 4, b)
        c(f"{b} += {data}")

    def emit_write_value(
        self, c: Code, f: FieldSpec, value: str, compact: bool, nullable: str | bool, w: str, b: str
    ) -> None:
        """Write field ``f`` whose value is the expression ``value`` (a simple name/attr)."""
        width = 2 if f.elem == "string" and not f.is_array else 4
        if f.elem == "records" and not f.is_array:
            c(f"{self.use('write_records')}({w}, {value}, {compact})")
            c(f"{b} = {w}.buf")
            return
        may_be_none = f.nullable is not None
        if f.is_struct and not f.is_array:
            if may_be_none:
                c(f"if {value} is None:")
                with c.indent():
                    if nullable is not True:
                        self.emit_not_nullable(c, f, nullable)
                    c(f'{b} += b"\\xff"')
                c("else:")
                c.level += 1
                c(f"{b}.append(1)")
            c.call(f"_write_{f.elem}(", [value, w, "version"], ")")
            if self.msg.structs[f.elem].has_records:
                c(f"{b} = {w}.buf")
            if may_be_none:
                c.level -= 1
            return
        if f.elem in FIXED and not f.is_array:
            ch, _ = FIXED[f.elem]
            c(f"{b} += {self.fmt(ch)}.pack({value})")
            return
        if may_be_none or f.is_array:
            # bind to a local for None-narrowing / repeated use
            var = f"v_{f.attr}"
            c(f"{var} = {value}")
            value = var
        if may_be_none and f.elem != "uuid":
            c(f"if {value} is None:")
            with c.indent():
                if nullable is not True:
                    self.emit_not_nullable(c, f, nullable)
                self.emit_null(c, compact, width, b)
            c("else:")
            c.level += 1
        if f.is_array:
            self.emit_write_length(c, f"len({value})", compact, 4, b)
            e = f.elem
            if e in FIXED:
                ch, _ = FIXED[e]
                self.use("struct")
                c(f'{b} += struct.pack(">%d{ch}" % len({value}), *{value})')
            elif e in PRIMITIVES:
                ev = f"e_{f.attr}"
                c(f"for {ev} in {value}:")
                with c.indent():
                    self.emit_write_scalar(c, e, ev, compact, w, b)
            else:
                ev = f"e_{f.attr}"
                c(f"for {ev} in {value}:")
                with c.indent():
                    c.call(f"_write_{e}(", [ev, w, "version"], ")")
                if self.msg.structs[e].has_records:
                    c(f"{b} = {w}.buf")
        else:
            self.emit_write_scalar(c, f.elem, value, compact, w, b)
        if may_be_none and f.elem != "uuid":
            c.level -= 1

    def emit_not_nullable(self, c: Code, f: FieldSpec, nullable: str | bool) -> None:
        msg = f'"{self.msg.name}: {f.name} is not nullable in this version"'
        if nullable is False:
            c(f"raise ValueError({msg})")
        else:
            c(f"if not ({nullable}):")
            with c.indent():
                c(f"raise ValueError({msg})")

    def emit_write_field(
        self, c: Code, f: FieldSpec, ctx: Range, tagged: bool, w: str = "w", b: str = "b"
    ) -> None:
        value = f"o.{f.attr}"
        nullable = self.nullable_cond(f, ctx)
        if tagged:
            self.emit_write_value(c, f, value, True, nullable, w, b)
            return
        flex = self.flex_of(f)
        fc = cond_expr(flex, ctx)
        if fc is None or fc == "" or (f.is_struct and not f.is_array):
            self.emit_write_value(c, f, value, fc == "", nullable, w, b)
        else:
            assert flex is not None
            c(f"if {fc}:")
            with c.indent():
                sub = intersect(ctx, flex)
                assert sub is not None
                self.emit_write_value(c, f, value, True, self.nullable_cond(f, sub), w, b)
            c("else:")
            with c.indent():
                sub = intersect(ctx, (0, flex[0] - 1))
                assert sub is not None
                self.emit_write_value(c, f, value, False, self.nullable_cond(f, sub), w, b)

    def gen_write(self, c: Code, s: StructSpec) -> None:
        assert s.ctx is not None
        ctx = s.ctx
        c.call(f"def _write_{s.name}(", ["o: " + s.name, "w: Writer", "version: int"], ") -> None:")
        with c.indent():
            c("b = w.buf")
            for cond, fs in self.groups(s):
                if cond:
                    c(f"if {cond}:")
                    c.level += 1
                sub = ctx if not cond else intersect(ctx, fs[0].regular_range())
                assert sub is not None
                if fs[0].elem in FIXED and not fs[0].is_array:
                    fmt = "".join(FIXED[f.elem][0] for f in fs)
                    sname = self.fmt(fmt)
                    c.call(f"b += {sname}.pack(", [f"o.{f.attr}" for f in fs], ")")
                else:
                    self.emit_write_field(c, fs[0], sub, tagged=False)
                if cond:
                    c.level -= 1
            self.gen_write_tags(c, s)

    def _simple_struct_default(self, f: FieldSpec) -> list[tuple[str, str]] | None:
        """(attr, default literal) pairs if ``f`` is a non-null struct of scalar fields."""
        if not self._lazy_struct(f):
            return None
        out = []
        for sf in self.msg.structs[f.elem].fields:
            if sf.is_array or sf.is_struct or sf.elem in ("records", "uuid", "float64"):
                return None
            expr, factory = self.default_expr(sf)
            if factory:
                return None
            out.append((sf.attr, expr))
        return out if 0 < len(out) <= 4 else None

    def gen_write_tags(self, c: Code, s: StructSpec) -> None:
        assert s.ctx is not None
        fcond = cond_expr(self.msg.flexible, s.ctx)
        if fcond is None:
            return
        if fcond:
            c(f"if {fcond}:")
            c.level += 1
        fctx = intersect(s.ctx, self.msg.flexible)
        assert fctx is not None
        tagged = [f for f in s.fields if cond_expr(f.tagged_range(), fctx) is not None]
        tagged.sort(key=lambda f: f.tag or 0)
        if not tagged:
            c("b.append(0)")
        else:
            names = []
            for i, f in enumerate(tagged):
                tc = cond_expr(f.tagged_range(), fctx)
                simple = self._simple_struct_default(f)
                if simple is not None:
                    # cheaper than dataclass __eq__ against a default instance
                    c(f"_v{i} = o.{f.attr}")
                    test = " or ".join(f"_v{i}.{a} != {d}" for a, d in simple)
                    if tc:
                        test = f"{tc} and ({test})" if len(simple) > 1 else f"{tc} and {test}"
                    c(f"_t{i} = {test}")
                else:
                    d = self.compare_default(f)
                    test = f"o.{f.attr} is not None" if d == "None" else f"o.{f.attr} != {d}"
                    c(f"_t{i} = {tc + ' and ' if tc else ''}{test}")
                names.append(f"_t{i}")
            c(f"b.append({' + '.join(names)})")
            enc = self.use("encode_uvarint")
            for i, f in enumerate(tagged):
                c(f"if _t{i}:")
                with c.indent():
                    c("_tw = Writer()")
                    c("_tb = _tw.buf")
                    sub = intersect(fctx, f.tagged_range())
                    assert sub is not None
                    self.emit_write_field(c, f, sub, tagged=True, w="_tw", b="_tb")
                    c("_d = _tw.getvalue()")
                    assert f.tag is not None and f.tag < 128
                    c(f'b += b"\\x{f.tag:02x}"')
                    c(f"b += {enc}(len(_d))")
                    c("b += _d")
        if fcond:
            c.level -= 1

    # ------------------------------------------------------------------ classes
    def gen_class(self, c: Code, s: StructSpec) -> None:
        msg = self.msg
        c("@dataclass(slots=True)")
        c(f"class {s.name}:")
        with c.indent():
            lo, hi = msg.valid
            if s.top:
                ver = f"{lo}" if lo == hi else f"{lo}-{hi}"
                flex = "never flexible" if msg.flexible is None else f"flexible {msg.flexible[0]}+"
                key = f" (api key {msg.api_key})" if msg.api_key is not None else ""
                c(f'"""Kafka {msg.name}{key}: versions {ver}, {flex}."""')
                c()
                if msg.api_key is not None:
                    c(f"API_KEY: ClassVar[int] = {msg.api_key}")
                c(f"MIN_VERSION: ClassVar[int] = {lo}")
                c(f"MAX_VERSION: ClassVar[int] = {hi}")
                c(f"FLEXIBLE_MIN_VERSION: ClassVar[int | None] = {msg.flexible_min}")
                self.use("ClassVar")
            else:
                c(f'"""{s.name}, a nested struct of {msg.name}."""')
            for f in s.fields:
                c()
                ann = self.annotation(f)
                expr, factory = self.default_expr(f)
                if factory:
                    self.use("field")
                    c.call(f"{f.attr}: {ann} = field(", [f"default_factory={expr}"], ")")
                else:
                    c(f"{f.attr}: {ann} = {expr}")
                doc = doc_string(f.about)
                if doc:
                    c(doc)
            c()
            c("@classmethod")
            c.call("def read(", ["cls", "r: Reader", "version: int"], f") -> {s.name}:")
            with c.indent():
                c(f'"""Decode a {s.name} of ``version`` from ``r`` (advances ``r.pos``)."""')
                self.emit_version_check(c)
                c("try:")
                with c.indent():
                    c(f"return _read_{s.name}(r, version)")
                c(f"except {self.use('DECODE_ERRORS')} as e:")
                with c.indent():
                    c.call(
                        f"raise {self.use('DecodeError')}(",
                        [f'f"malformed {s.name} v{{version}}: {{e!r}}"'],
                        ") from e",
                    )
            c()
            c("def write(self, w: Writer, version: int) -> None:")
            with c.indent():
                c(f'"""Encode this {s.name} as ``version`` into ``w``."""')
                self.emit_version_check(c)
                c(f"_write_{s.name}(self, w, version)")

    def emit_version_check(self, c: Code) -> None:
        lo, hi = self.msg.valid
        c(f"if not {lo} <= version <= {hi}:")
        with c.indent():
            c.call(
                f"raise {self.use('UnsupportedVersionError')}(",
                [f'f"{self.msg.name} v{{version}} is not supported ({lo}-{hi})"'],
                ")",
            )

    def generate(self) -> str:
        msg = self.msg
        self.use("Reader")
        self.use("Writer")
        self.use("dataclass")
        body = Code()
        structs = [s for s in msg.structs.values() if s.ctx is not None]
        for s in structs:
            body()
            body()
            self.gen_class(body, s)
        funcs = Code()
        for s in structs:
            funcs()
            funcs()
            self.gen_read(funcs, s)
            funcs()
            funcs()
            self.gen_write(funcs, s)
        defaults = Code()
        if self.defaults_needed:
            defaults()
            defaults()
            for name in self.defaults_needed:
                defaults(f"_DEFAULT_{name} = {name}()")

        head = Code()
        head(f'"""Kafka {msg.name} message codec.')
        head()
        head(f"Generated by tools/gen_protocol.py from {msg.name}.json; do not edit.")
        head('"""')
        head()
        head("from __future__ import annotations")
        head()
        if "struct" in self.used or self.structs_fmt:
            head("import struct")
        dc = ["dataclass"] + (["field"] if "field" in self.used else [])
        head(f"from dataclasses import {', '.join(dc)}")
        if "ClassVar" in self.used:
            head("from typing import ClassVar")
        if "UUID" in self.used:
            head("from uuid import UUID")
        head()
        prim = sorted(
            (
                self.used
                & {
                    "DECODE_ERRORS",
                    "ZERO_UUID",
                    "DecodeError",
                    "Reader",
                    "RecordsInput",
                    "UnsupportedVersionError",
                    "Writer",
                    "encode_uvarint",
                    "read_uuid",
                    "read_uvarint",
                    "skip_tagged_fields",
                    "write_records",
                }
            ),
            key=_isort_key,
        )
        head("from bmq.protocol.primitives import (")
        for p in prim:
            head(f"    {p},")
        head(")")
        if self.structs_fmt:
            head()
            for fmt in sorted(self.structs_fmt, key=lambda x: self.structs_fmt[x]):
                head(f'{self.structs_fmt[fmt]} = struct.Struct(">{fmt}")')
        return head.text() + body.text() + defaults.text() + funcs.text()


def _isort_key(name: str) -> tuple[int, str]:
    # isort "force-sort-within-sections" default: CONSTANTS, then Classes, then functions.
    if name.isupper():
        return (0, name)
    if name[0].isupper():
        return (1, name)
    return (2, name)


def gen_init(msgs: list[MessageSpec]) -> str:
    """The package: every class by name, imported on first use (PEP 562 ``__getattr__``).

    Importing all 100+ modules costs a role far more start-up time than anything else it
    imports (most of it compiling, where no bytecode cache may be written), and a broker serves
    only about half of the APIs. The static imports are there for type checkers alone.
    """
    c = Code()
    c('"""Kafka message codecs, one module per Kafka message JSON spec.')
    c()
    c("Every class is importable from here; its module is imported on first use, so a process")
    c("pays only for the messages it handles. Generated by tools/gen_protocol.py; do not edit.")
    c('"""')
    c()
    c("from __future__ import annotations")
    c()
    c("import importlib")
    c("from collections.abc import Iterator, Mapping")
    c("from typing import TYPE_CHECKING, Any")
    c()
    c("if TYPE_CHECKING:")
    for m in sorted(msgs, key=lambda m: m.module):
        line = f"    from bmq.protocol.messages.{m.module} import {m.name}"
        if len(line) <= LINE:
            c(line)
        else:
            c(f"    from bmq.protocol.messages.{m.module} import (")
            c(f"        {m.name},")
            c("    )")
    c()
    c("# class name -> its module")
    c("_MODULES: dict[str, str] = {")
    for m in sorted(msgs, key=lambda m: m.name):
        c(f'    "{m.name}": "{m.module}",')
    c("}")
    c()
    c()
    c("def __getattr__(name: str) -> Any:")
    c("    module = _MODULES.get(name)")
    c("    if module is None:")
    c('        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")')
    c('    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)')
    c("    globals()[name] = value")
    c("    return value")
    c()
    c()
    c("class _ByApiKey(Mapping[int, type[Any]]):")
    c('    """api key -> message class, importing the class on first lookup."""')
    c()
    c("    def __init__(self, names: dict[int, str]) -> None:")
    c("        self._names = names")
    c()
    c("    def __getitem__(self, key: int) -> type[Any]:")
    c("        cls: type[Any] = __getattr__(self._names[key])")
    c("        return cls")
    c()
    c("    def __iter__(self) -> Iterator[int]:")
    c("        return iter(self._names)")
    c()
    c("    def __len__(self) -> int:")
    c("        return len(self._names)")
    c()
    c()
    req = sorted((m for m in msgs if m.kind == "request"), key=lambda m: m.api_key or 0)
    resp = sorted((m for m in msgs if m.kind == "response"), key=lambda m: m.api_key or 0)
    c("# api key -> request class")
    c("REQUEST_TYPES: Mapping[int, type[Any]] = _ByApiKey(")
    c("    {")
    for m in req:
        c(f'        {m.api_key}: "{m.name}",')
    c("    }")
    c(")")
    c()
    c("# api key -> response class")
    c("RESPONSE_TYPES: Mapping[int, type[Any]] = _ByApiKey(")
    c("    {")
    for m in resp:
        c(f'        {m.api_key}: "{m.name}",')
    c("    }")
    c(")")
    c()
    c("# api key -> first flexible version of the request (None: never flexible), for request")
    c("# headers of any api key without importing its message")
    c("REQUEST_FLEXIBLE_MIN_VERSIONS: dict[int, int | None] = {")
    for m in req:
        c(f"    {m.api_key}: {m.flexible_min},")
    c("}")
    c()
    c("# request class name -> (api key, lowest version, highest version), so a server can list")
    c("# and route the APIs it serves without importing their messages before first use")
    c("REQUEST_APIS: dict[str, tuple[int, int, int]] = {")
    for m in sorted(req, key=lambda m: m.name):
        c(f'    "{m.name}": ({m.api_key}, {m.valid[0]}, {m.valid[1]}),')
    c("}")
    c()
    c("__all__ = [")
    names = ["REQUEST_APIS", "REQUEST_FLEXIBLE_MIN_VERSIONS", "REQUEST_TYPES", "RESPONSE_TYPES",
             *sorted(m.name for m in msgs)]
    for n in names:
        c(f'    "{n}",')
    c("]")
    return c.text()


def generate() -> dict[str, str]:
    """Relative file name -> content of every generated file."""
    msgs = load_all()
    out = {"__init__.py": gen_init(msgs)}
    for m in msgs:
        out[f"{m.module}.py"] = ModuleGen(m).generate()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only check the files are current")
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    args = ap.parse_args(argv)
    files = generate()
    out: Path = args.out
    stale = []
    existing = {p.name for p in out.glob("*.py")} if out.exists() else set()
    for name, text in files.items():
        p = out / name
        if not p.exists() or p.read_text() != text:
            stale.append(name)
            if not args.check:
                out.mkdir(parents=True, exist_ok=True)
                p.write_text(text)
    extra = sorted(existing - set(files))
    for name in extra:
        stale.append(name)
        if not args.check:
            (out / name).unlink()
    if args.check:
        if stale:
            print("stale generated files: " + ", ".join(sorted(stale)), file=sys.stderr)
            return 1
        return 0
    print(f"wrote {len(files)} files to {out} ({len(stale)} changed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
