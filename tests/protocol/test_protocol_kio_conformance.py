"""Conformance of the generated codecs against kio, an independent Kafka protocol library.

For every message and version both sides implement, random kio entities are encoded by kio;
the bytes must decode with our code to the same values, and our encoding of those values must
be byte-for-byte identical to kio's.  Requests and responses are both checked in both
directions (decode kio's bytes, encode to kio's bytes).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_kio_support import (
    entity_strategy,
    kio_class,
    kio_encode,
    messages,
    our_module,
    to_ours,
)

from bmq.protocol.messages import KAFKA4_MIN_VERSIONS
from bmq.protocol.primitives import Reader, Writer

# APIs the brief asks to cover explicitly; every other API is covered too when kio has it.
REQUIRED_APIS = {
    "ApiVersions",
    "Metadata",
    "Produce",
    "Fetch",
    "ListOffsets",
    "CreateTopics",
    "DeleteTopics",
    "CreatePartitions",
    "DescribeConfigs",
    "AlterConfigs",
    "IncrementalAlterConfigs",
    "DeleteRecords",
    "DescribeCluster",
    "InitProducerId",
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "OffsetCommit",
    "OffsetFetch",
    "DescribeGroups",
    "ListGroups",
    "DeleteGroups",
    "OffsetDelete",
    "OffsetForLeaderEpoch",
    "SaslHandshake",
    "SaslAuthenticate",
}
# Hot-path messages get more examples.
HOT = {"ProduceRequest", "ProduceResponse", "FetchRequest", "FetchResponse", "MetadataResponse"}


def _cases() -> list[Any]:
    cases = []
    for name, msg in sorted(messages().items()):
        for version in range(msg.valid[0], msg.valid[1] + 1):
            if kio_class(msg, version) is not None:
                cases.append(pytest.param(name, version, id=f"{name}-v{version}"))
    return cases


CASES = _cases()


def test_required_apis_are_covered() -> None:
    covered = {c.values[0] for c in CASES}
    for api in REQUIRED_APIS:
        for kind in ("Request", "Response"):
            assert api + kind in covered, api + kind
    # every version of every required API is in the intersection
    for api in REQUIRED_APIS:
        for kind in ("Request", "Response"):
            msg = messages()[api + kind]
            versions = {c.values[1] for c in CASES if c.values[0] == api + kind}
            missing = set(range(msg.valid[0], msg.valid[1] + 1)) - versions
            # Only versions our generator revives beyond the spec may lack a kio counterpart.
            assert missing <= BEYOND_KIO.get(api + kind, set()), api + kind


# Versions Kafka 4 removed from its specs, which BMQ serves for old clients (issue #36; Produce
# v0-2 too, which Kafka 4 still lists, KAFKA-18659): kio follows Kafka 4's specs, so
# test_legacy_versions.py checks their wire layouts against kafka-python's own old structs.
BEYOND_KIO = {
    request.removesuffix("Request") + kind: set(range(0, kafka4_min))
    for request, kafka4_min in {**KAFKA4_MIN_VERSIONS, "ProduceRequest": 3}.items()
    for kind in ("Request", "Response")
}


def _check(name: str, version: int, entity: Any) -> None:
    msg = messages()[name]
    kcls = kio_class(msg, version)
    assert kcls is not None
    kio_bytes = kio_encode(kcls, entity)
    expected = to_ours(msg, name, entity, version)
    cls = getattr(our_module(msg), name)

    # kio bytes -> our decoder
    r = Reader(bytearray(kio_bytes))
    decoded = cls.read(r, version)
    assert r.pos == len(kio_bytes)
    assert decoded == expected

    # same values -> our encoder -> identical bytes
    w = Writer()
    expected.write(w, version)
    assert w.getvalue() == kio_bytes
    assert w.size == len(kio_bytes)

    # and re-encoding what we decoded is stable
    w2 = Writer()
    decoded.write(w2, version)
    assert w2.getvalue() == kio_bytes


@pytest.mark.parametrize(("name", "version"), CASES)
def test_conformance(name: str, version: int) -> None:
    msg = messages()[name]
    kcls = kio_class(msg, version)
    assert kcls is not None
    strategy = entity_strategy(kcls)

    @settings(
        max_examples=40 if name in HOT else 10,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        _check(name, version, data.draw(strategy))

    run()
