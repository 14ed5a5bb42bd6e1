"""Kafka's message JSON specs, loaded into a model: messages, their structs and fields, each
with the version ranges it is present, nullable, tagged and flexible in."""

from __future__ import annotations

import importlib.util
import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol_gen.wire_types import PRIMITIVES

REPO = Path(__file__).resolve().parents[2]
INTERNAL_SPEC_DIR = REPO / "bmq" / "protocol" / "specs"
INF = 0x7FFF  # versions are int16; "N+" means N..INF

Range = tuple[int, int]


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
    kafka4_min: int  # the lowest version Kafka 4 serves (valid[0] is Kafka 3.9's)
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


# Versions Kafka 4.0 removed from its specs (KIP-896), with Kafka 3.9's lowest version of each:
# BMQ still serves old clients (issue #36), so the codec reads and writes them. The specs kept
# every field's ranges from version 0 (only validVersions moved), so widening them is enough.
# Kafka 4's own lowest version is recorded too (``MessageSpec.kafka4_min``): a broker with
# bmq.legacy.clients.enable off serves from there, as Kafka 4 does.
KAFKA_3_9_MIN_VERSIONS = {
    "AlterReplicaLogDirs": 0, "CreateAcls": 0, "CreateTopics": 0, "DeleteAcls": 0,
    "DeleteTopics": 0, "DescribeAcls": 0, "DescribeConfigs": 0, "DescribeLogDirs": 0,
    "Fetch": 0, "ListOffsets": 0, "OffsetCommit": 0, "OffsetFetch": 0,
    "OffsetForLeaderEpoch": 0, "Produce": 0, "WriteTxnMarkers": 0,
}
# Produce is the exception among them: Kafka 4 still lists v0 in ApiVersions for librdkafka
# (KAFKA-18659) and answers v0-2 with UNSUPPORTED_VERSION, so its Kafka 4 range starts at 0.
KAFKA_4_LISTS_FROM_ZERO = ("Produce",)


def _api_name(message_name: str) -> str:
    return message_name.removesuffix("Request").removesuffix("Response")


def load_message(path: Path) -> MessageSpec:
    spec = json.loads(strip_comments(path.read_text()))
    kafka4 = parse_range(spec["validVersions"])
    assert kafka4 is not None
    api = _api_name(spec["name"])
    legacy_min = KAFKA_3_9_MIN_VERSIONS.get(api) if spec["type"] in ("request", "response") \
        else None
    valid = kafka4 if legacy_min is None else (legacy_min, kafka4[1])
    msg = MessageSpec(
        name=spec["name"],
        module=snake(spec["name"]),
        kind=spec["type"],
        api_key=spec.get("apiKey"),
        valid=valid,
        kafka4_min=0 if api in KAFKA_4_LISTS_FROM_ZERO else kafka4[0],
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
