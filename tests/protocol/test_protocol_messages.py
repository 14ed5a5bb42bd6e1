"""Generated message codecs: registry, versions, tagged fields, malformed input, zero copy."""

from __future__ import annotations

import contextlib
import importlib.util
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_kio_support import (
    entity_strategy,
    kio_class,
    kio_encode,
    load_generator,
    messages,
    our_module,
)

import bmq.protocol.messages as registry
from bmq.protocol.messages import (
    REQUEST_TYPES,
    RESPONSE_TYPES,
    ApiVersionsResponse,
    FetchResponse,
    MetadataRequest,
    ProduceRequest,
    ProduceResponse,
)
from bmq.protocol.messages.api_versions_response import ApiVersion
from bmq.protocol.messages.fetch_response import (
    EpochEndOffset,
    FetchableTopicResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.primitives import (
    ZERO_UUID,
    DecodeError,
    Reader,
    UnsupportedVersionError,
    Writer,
    encode_uvarint,
)

ALL = sorted(messages().values(), key=lambda m: m.name)
ALL_CASES = [(m.name, v) for m in ALL for v in range(m.valid[0], m.valid[1] + 1)
             if kio_class(m, v) is not None]
MB = 1 << 20


def cls_of(name: str) -> Any:
    return getattr(our_module(messages()[name]), name)


def encode(obj: Any, version: int) -> bytes:
    w = Writer()
    obj.write(w, version)
    return w.getvalue()


# --------------------------------------------------------------------------- generation


def test_generated_code_is_up_to_date() -> None:
    gen = load_generator("cli")
    files = gen.generate()
    out_dir = gen.OUT_DIR
    on_disk = {p.name for p in out_dir.glob("*.py")}
    assert on_disk == set(files), "run: python tools/gen_protocol.py"
    stale = [name for name, text in files.items() if (out_dir / name).read_text() != text]
    assert not stale, f"stale generated files {stale}; run: python tools/gen_protocol.py"


def test_generator_reads_specs_from_installed_kafka_package() -> None:
    spec = importlib.util.find_spec("kafka")
    assert spec is not None and spec.submodule_search_locations
    kafka_dir = str(next(iter(spec.submodule_search_locations)))
    assert str(load_generator("spec").schema_dir()).startswith(kafka_dir)
    assert len(ALL) == len(REQUEST_TYPES) + len(RESPONSE_TYPES) + len(DATA)


# The specs that are no request or response: the consumer protocol's data (kafka-python's) and
# the internal topics' keys and values (BMQ's copies of Kafka's).
DATA = {"ConsumerProtocolAssignment", "ConsumerProtocolSubscription", "ConsumerGroupMetadataKey",
        "EndTxnMarker", "GroupMetadataKey", "GroupMetadataValue", "OffsetCommitKey",
        "ShareSnapshotKey", "ShareUpdateKey", "TransactionLogKey", "TransactionLogValue"}


def test_data_specs() -> None:
    assert {m.name for m in ALL if m.kind not in ("request", "response")} == DATA


# --------------------------------------------------------------------------- registry


def test_registry() -> None:
    assert set(REQUEST_TYPES) == set(RESPONSE_TYPES)
    assert len(REQUEST_TYPES) >= 50
    for key, req in REQUEST_TYPES.items():
        resp = RESPONSE_TYPES[key]
        assert req.API_KEY == resp.API_KEY == key
        assert req.__name__.endswith("Request") and resp.__name__.endswith("Response")
        assert req.__name__[:-7] == resp.__name__[:-8]
        assert getattr(registry, req.__name__) is req
        assert getattr(registry, resp.__name__) is resp
        assert (req.MIN_VERSION, req.MAX_VERSION) == (resp.MIN_VERSION, resp.MAX_VERSION)
    assert REQUEST_TYPES[0] is ProduceRequest
    assert (ProduceRequest.MIN_VERSION, ProduceRequest.MAX_VERSION) == (0, 13)
    assert ProduceRequest.FLEXIBLE_MIN_VERSION == 9
    assert registry.ConsumerProtocolSubscription.FLEXIBLE_MIN_VERSION is None
    assert REQUEST_TYPES[17].FLEXIBLE_MIN_VERSION is None  # SaslHandshake


def test_field_names_types_and_defaults() -> None:
    req = ProduceRequest()
    assert req.transactional_id is None and req.acks == 0 and req.topic_data == []
    assert ProduceRequest().topic_data is not req.topic_data  # fresh list per instance
    p = PartitionData()
    assert (p.last_stable_offset, p.log_start_offset, p.preferred_read_replica) == (-1, -1, -1)
    assert p.diverging_epoch == EpochEndOffset(-1, -1)
    assert p.current_leader == LeaderIdAndEpoch(-1, -1)
    assert p.records is None and p.aborted_transactions == []  # nullable, default not null
    assert FetchableTopicResponse().topic_id == ZERO_UUID
    assert ApiVersionsResponse().finalized_features_epoch == -1
    assert ApiVersionsResponse().zk_migration_ready is False
    assert MetadataRequest().allow_auto_topic_creation is True
    assert registry.CreateTopicsRequest().timeout_ms == 60000
    assert registry.FetchRequest().max_bytes == 0x7FFFFFFF
    assert registry.DescribeTopicPartitionsRequest().cursor is None
    assert registry.InitProducerIdRequest().enable2_pc is False
    assert NodeEndpoint().rack is None


# --------------------------------------------------------------------------- versions


@pytest.mark.parametrize("name", [m.name for m in ALL])
def test_unsupported_versions(name: str) -> None:
    cls = cls_of(name)
    obj = cls()
    for bad in (cls.MIN_VERSION - 1, cls.MAX_VERSION + 1, -1, 1000):
        with pytest.raises(UnsupportedVersionError):
            obj.write(Writer(), bad)
        with pytest.raises(UnsupportedVersionError):
            cls.read(Reader(b"\x00" * 64), bad)
    for version in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
        data = encode(obj, version)
        r = Reader(data)
        assert cls.read(r, version) == obj
        assert r.remaining() == 0


def test_nested_structs_check_versions_too() -> None:
    with pytest.raises(UnsupportedVersionError):
        TopicProduceData().write(Writer(), 14)
    with pytest.raises(UnsupportedVersionError):
        PartitionData.read(Reader(b""), 99)


def test_null_in_a_non_nullable_version_is_rejected() -> None:
    req = MetadataRequest(topics=None)  # Topics is nullable from v1 only
    assert MetadataRequest.read(Reader(encode(req, 1)), 1).topics is None
    with pytest.raises(ValueError):
        encode(req, 0)


def test_fields_absent_from_a_version_keep_defaults() -> None:
    t = TopicProduceData(name="orders", topic_id=uuid.uuid4(), partition_data=[])
    old = TopicProduceData.read(Reader(encode(t, 12)), 12)
    assert old.name == "orders" and old.topic_id == ZERO_UUID
    new = TopicProduceData.read(Reader(encode(t, 13)), 13)
    assert new.name == "" and new.topic_id == t.topic_id


# --------------------------------------------------------------------------- tagged fields


def test_tagged_fields_written_only_when_not_default() -> None:
    base = PartitionData(partition_index=1, high_watermark=10, records=b"")
    plain = encode(base, 12)
    assert plain[-1] == 0  # empty tagged section
    base.diverging_epoch = EpochEndOffset(epoch=3, end_offset=7)
    base.current_leader = LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)  # default: omitted
    tagged = encode(base, 12)
    assert len(tagged) == len(plain) + 2 + 4 + 8 + 1
    back = PartitionData.read(Reader(tagged), 12)
    assert back == base
    # v11 has no tagged fields at all
    assert PartitionData.read(Reader(encode(base, 11)), 11).diverging_epoch == EpochEndOffset()

    resp = FetchResponse(node_endpoints=[NodeEndpoint(node_id=1, host="h", port=9092)])
    assert FetchResponse.read(Reader(encode(resp, 16)), 16) == resp
    assert FetchResponse.read(Reader(encode(resp, 15)), 15).node_endpoints == []


def test_api_versions_response_tagged_fields() -> None:
    resp = ApiVersionsResponse(api_keys=[ApiVersion(0, 3, 13)], finalized_features_epoch=-1)
    data = encode(resp, 3)
    assert data[-1] == 0
    resp.finalized_features_epoch = 5
    resp.zk_migration_ready = True
    assert ApiVersionsResponse.read(Reader(encode(resp, 3)), 3) == resp


def _tags(fields: list[tuple[int, bytes]]) -> bytes:
    out = bytearray(encode_uvarint(len(fields)))
    for tag, value in fields:
        out += encode_uvarint(tag) + encode_uvarint(len(value)) + value
    return bytes(out)


@pytest.mark.parametrize(
    "name", [m.name for m in ALL if m.flexible is not None and m.kind != "data"]
)
def test_unknown_tagged_fields_are_skipped(name: str) -> None:
    cls = cls_of(name)
    obj = cls()
    version = cls.MAX_VERSION
    data = encode(obj, version)
    assert data[-1] == 0  # the top-level tagged section of a default instance is empty
    unknown = _tags([(1000, b"x" * 300), (2000, b""), (70000, b"\x01\x02")])
    r = Reader(data[:-1] + unknown)
    assert cls.read(r, version) == obj
    assert r.remaining() == 0


def test_unknown_tags_inside_nested_structs() -> None:
    req = ProduceRequest(
        acks=1, topic_data=[TopicProduceData("t", partition_data=[PartitionProduceData(0, b"r")])]
    )
    data = encode(req, 9)
    # ... index int32, records compact (len+1 = 2, 'r'), tags 0 | topic tags 0 | top tags 0
    assert data.endswith(b"\x00\x00\x00\x00\x02r\x00\x00\x00")
    patched = data[:-3] + _tags([(7, b"zz")]) + _tags([(9, b"")]) + b"\x00"
    assert ProduceRequest.read(Reader(patched), 9) == req
    # a known tag whose value overruns its declared size is malformed
    resp = PartitionData(records=b"")
    bad = encode(resp, 12)[:-1] + _tags([(0, b"\x00\x00\x00\x01")])  # EpochEndOffset needs 13
    with pytest.raises(DecodeError):
        PartitionData.read(Reader(bad), 12)


# --------------------------------------------------------------------------- malformed input


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(case=st.sampled_from(ALL_CASES), data=st.data())
def test_truncation_and_corruption_raise_decode_error(case: tuple[str, int], data: Any) -> None:
    name, version = case
    msg = messages()[name]
    kcls = kio_class(msg, version)
    assert kcls is not None
    encoded = kio_encode(kcls, data.draw(entity_strategy(kcls)))
    cls = cls_of(name)
    obj = cls.read(Reader(encoded), version)
    for cut in range(len(encoded)):
        with pytest.raises(DecodeError):
            cls.read(Reader(encoded[:cut]), version)
    # flipping bytes either still decodes or raises DecodeError, nothing else
    if encoded:
        for _ in range(5):
            i = data.draw(st.integers(0, len(encoded) - 1))
            b = data.draw(st.integers(0, 255))
            corrupt = bytearray(encoded)
            corrupt[i] = b
            with contextlib.suppress(DecodeError):
                cls.read(Reader(corrupt), version)
    assert obj == cls.read(Reader(encoded), version)


@settings(max_examples=400, deadline=None, database=None)
@given(case=st.sampled_from(ALL_CASES), garbage=st.binary(max_size=200))
def test_garbage_raises_only_decode_error(case: tuple[str, int], garbage: bytes) -> None:
    name, version = case
    with contextlib.suppress(DecodeError):
        cls_of(name).read(Reader(garbage), version)


def test_huge_lengths_are_rejected_without_allocating() -> None:
    # ProduceRequest v3: transactional_id null, acks, timeout, topics count 2**31-1
    data = b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\x7f\xff\xff\xff"
    with pytest.raises(DecodeError):
        ProduceRequest.read(Reader(data), 3)
    # v9 compact array count that is a 5-byte varint
    data = b"\x00" + b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\xff\xff\xff\xff\x07"
    with pytest.raises(DecodeError):
        ProduceRequest.read(Reader(data), 9)


# --------------------------------------------------------------------------- zero copy / speed


def _produce_request(n: int, size: int) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(
                name="events",
                partition_data=[
                    PartitionProduceData(i, b"REC%03d" % i + bytes(size - 6)) for i in range(n)
                ],
            )
        ],
    )


def _best(fn: Any, rounds: int = 30) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("version", [3, 8, 9, 12])
def test_produce_decode_is_zero_copy_and_fast(version: int) -> None:
    frame = bytearray(encode(_produce_request(8, MB), version))
    req = ProduceRequest.read(Reader(frame), version)
    parts = req.topic_data[0].partition_data
    assert len(parts) == 8
    for i, p in enumerate(parts):
        rec = p.records
        assert isinstance(rec, memoryview)
        assert rec.obj is frame  # a view into the input, not a copy
        assert len(rec) == MB and bytes(rec[:6]) == b"REC%03d" % i
        # modify the input buffer, observe it through the decoded records
        start = frame.index(b"REC%03d" % i)
        frame[start] = 0xEE
        assert rec[0] == 0xEE
        rec[1] = 0xAB  # and the broker can rewrite in place through it
        assert frame[start + 1] == 0xAB
    elapsed = _best(lambda: ProduceRequest.read(Reader(frame), version))
    assert elapsed < 0.005, f"decoding 8 x 1 MB took {elapsed * 1e6:.0f} us"


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_fetch_encode_does_not_copy_records(version: int) -> None:
    batches = [memoryview(bytearray([i]) * MB) for i in range(8)]
    resp = FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic="events",
                topic_id=uuid.uuid4(),
                partitions=[
                    PartitionData(partition_index=i, high_watermark=100, records=batches[i])
                    for i in range(8)
                ],
            )
        ]
    )
    w = Writer()
    resp.write(w, version)
    parts = w.parts()
    for b in batches:
        assert sum(p is b for p in parts) == 1  # the very same buffer object: not copied
    assert sum(len(p) for p in parts if not isinstance(p, memoryview)) < 1000
    assert w.size == sum(len(p) for p in parts)
    back = FetchResponse.read(Reader(w.getvalue()), version)
    assert [bytes(p.records[:1]) for p in back.responses[0].partitions] == [  # type: ignore[index]
        bytes([i]) for i in range(8)
    ]

    def run() -> None:
        resp.write(Writer(), version)

    elapsed = _best(run)
    assert elapsed < 0.005, f"encoding 8 x 1 MB took {elapsed * 1e6:.0f} us"


def test_records_list_is_one_field() -> None:
    chunks = [b"a" * 10, bytearray(b"b" * 5000), memoryview(b"c" * 3)]
    p = PartitionData(partition_index=0, records=chunks)
    for version in (11, 12):
        back = PartitionData.read(Reader(encode(p, version)), version)
        assert back.records == b"a" * 10 + b"b" * 5000 + b"c" * 3


def test_produce_response_round_trip() -> None:
    from bmq.protocol.messages.produce_response import (
        PartitionProduceResponse,
        TopicProduceResponse,
    )

    resp = ProduceResponse(
        responses=[
            TopicProduceResponse(
                name="t",
                partition_responses=[PartitionProduceResponse(index=0, base_offset=42)],
            )
        ],
        throttle_time_ms=0,
    )
    for version in range(3, 14):
        back = ProduceResponse.read(Reader(encode(resp, version)), version)
        assert back.responses[0].partition_responses[0].base_offset == 42
