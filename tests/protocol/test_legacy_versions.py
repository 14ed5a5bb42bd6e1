"""The versions Kafka 4 removed from its specs and BMQ serves for old clients (issue #36), checked
against kafka-python's own hand-written structs of them (kafka.protocol.old), an implementation
independent of the specs our codec is generated from: bytes kafka-python encodes decode with
our codec and encode back to the same bytes."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import kafka.protocol.old as old_protocol
import pytest
from kafka.protocol.old import types

from bmq.protocol.messages import KAFKA4_MIN_VERSIONS, REQUEST_TYPES, RESPONSE_TYPES
from bmq.protocol.primitives import Reader, Writer

# Produce v0-2 too: Kafka 4 lists them (KAFKA-18659) but its spec starts at v3.
_REVIVED = {**KAFKA4_MIN_VERSIONS, "ProduceRequest": 3}


def _old_structs() -> dict[str, type[Any]]:
    found = {}
    for module in pkgutil.iter_modules(old_protocol.__path__):
        loaded = importlib.import_module(f"{old_protocol.__name__}.{module.name}")
        found.update({name: value for name, value in vars(loaded).items()
                      if isinstance(value, type) and "_v" in name})
    return found


# kafka-python's structs that disagree with Kafka's spec (not served by BMQ either).
_WRONG_THERE = {"DescribeLogDirsRequest_v0"}    # partitions: int32 there, []int32 in Kafka's
OLD = {name: struct for name, struct in _old_structs().items() if name not in _WRONG_THERE}
CASES = [(request.removesuffix("Request") + kind, version)
         for request, first_kafka4 in sorted(_REVIVED.items())
         for kind in ("Request", "Response") for version in range(first_kafka4)
         if f"{request.removesuffix('Request')}{kind}_v{version}" in OLD]


def sample(kind: Any) -> Any:
    """A value of every field: distinct small numbers, one-element arrays."""
    if isinstance(kind, types.Schema):
        return tuple(sample(field) for field in kind.fields)
    if isinstance(kind, types.Array):
        return [sample(kind.array_of)]
    if isinstance(kind, types.String):
        return "s"
    values = {types.Int8: 1, types.Int16: 2, types.Int32: 3, types.Int64: 4,
              types.Bytes: b"bytes", types.Boolean: True}
    return values[kind if isinstance(kind, type) else type(kind)]


def test_every_revived_api_is_checked() -> None:
    checked = {name for name, _ in CASES}
    for request in ("Produce", "Fetch", "ListOffsets", "OffsetCommit", "OffsetFetch",
                    "CreateTopics", "DeleteTopics", "DescribeConfigs", "CreateAcls",
                    "DescribeAcls", "DeleteAcls"):
        assert {request + "Request", request + "Response"} <= checked, request


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_same_bytes_as_kafka_python(name: str, version: int) -> None:
    struct = OLD[f"{name}_v{version}"]
    wire = struct.SCHEMA.encode(sample(struct.SCHEMA))
    ours = (REQUEST_TYPES if name.endswith("Request") else RESPONSE_TYPES)[struct.API_KEY]
    reader = Reader(memoryview(bytearray(wire)))
    decoded = ours.read(reader, version)
    assert reader.pos == len(wire), "bytes left undecoded"
    writer = Writer()
    decoded.write(writer, version)
    assert bytes(writer.getvalue()) == wire
