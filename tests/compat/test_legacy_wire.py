"""Message sets v0/v1 on the wire, built by kafka-python's own legacy codec (an implementation
independent of BMQ's): Produce v0-2 of good and bad message sets, Fetch v0-3 read back, and
the switch that refuses old clients as Kafka 4 does (bmq.legacy.clients.enable=false)."""

from __future__ import annotations

import gzip
import struct
import time
import zlib
from typing import Any

import pytest
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

from tests.integration import kwire
from tests.integration.helpers import admin, consume, create_topic, produce_all, topic_configs
from tests.integration.kwire import Disconnected, KafkaWire

INVALID_RECORD = 87
UNSUPPORTED_VERSION = 35
UNSUPPORTED_COMPRESSION_TYPE = 76
GZIP = 1


def message_set(magic: int, count: int = 4, codec: int = 0, first_ts: int = 1_700_000_000_000
                ) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=first_ts + i if magic else None, key=f"k{i}".encode(),
                       value=f"value {i}".encode())
    return bytes(builder.build())


def read_message_set(data: bytes) -> list[tuple[int, int | None, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every message, wrappers opened (kafka-python)."""
    out = []
    position = 0
    while len(data) - position >= 12:
        size = struct.unpack_from(">i", data, position + 8)[0] + 12
        if position + size > len(data):
            break
        batch = LegacyRecordBatch(memoryview(data)[position:position + size],
                                  data[position + 16])
        assert batch.validate_crc()
        out += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
        position += size
    return out


@pytest.fixture(scope="module")
def legacy_off(module_broker_factory: Any) -> Any:
    return module_broker_factory(config={"bmq.legacy.clients.enable": False})


@pytest.mark.parametrize(("produce_version", "magic", "codec"),
                         [(0, 0, 0), (1, 0, GZIP), (2, 1, 0), (2, 1, GZIP)])
def test_produce_and_fetch_every_old_version(module_broker: Any, topic: str,
                                             produce_version: int, magic: int,
                                             codec: int) -> None:
    create_topic(module_broker.bootstrap, topic)
    with KafkaWire(module_broker.bootstrap) as wire:
        for round_ in range(2):
            result = wire.produce(topic, 0, message_set(magic, codec=codec),
                                  version=produce_version)
            assert (result.error_code, result.base_offset) == (0, 4 * round_)
        for fetch_version in range(4):
            body = kwire.fetch_body(fetch_version, topic, 0, 2)
            fetched = kwire.parse_fetch_response(
                fetch_version, wire.request(kwire.FETCH, fetch_version, body))[(topic, 0)]
            assert (fetched.error_code, fetched.high_watermark) == (0, 8)
            messages = read_message_set(fetched.records or b"")
            assert [m[0] for m in messages] == list(range(2, 8)), fetch_version
            assert [(m[2], m[3]) for m in messages] == [
                (f"k{i % 4}".encode(), f"value {i % 4}".encode()) for i in range(2, 8)]
            timestamps = [m[1] for m in messages]
            if fetch_version >= 2 and magic == 1:
                assert timestamps == [1_700_000_000_000 + i % 4 for i in range(2, 8)]
            elif fetch_version >= 2:
                assert timestamps == [-1] * 6      # magic 0 had none
    # Today's client reads the same records from the v2 batches they are stored as.
    got = consume(module_broker.bootstrap, topic, expected=8)[0]
    assert [(m.offset, m.key) for m in got] == [(i, f"k{i % 4}".encode()) for i in range(8)]


def _bad_crc(data: bytes) -> bytes:
    bad = bytearray(data)
    bad[-1] ^= 0x01
    return bytes(bad)


def _truncated_wrapper(data: bytes) -> bytes:
    """A gzip wrapper whose compressed value lost its last 8 bytes (sizes and CRC fixed up, so
    only the inner data is short)."""
    body = bytearray(data[12:])
    value_at = 4 + 1 + 1 + (8 if body[4] == 1 else 0) + 4     # crc, magic, attributes, ts, key
    (length,) = struct.unpack_from(">i", body, value_at)
    value = bytes(body[value_at + 4:value_at + 4 + length - 8])
    return _message(bytes(body[4:value_at]) + struct.pack(">i", len(value)) + value)


def _message(fields: bytes) -> bytes:
    """A message at offset 0 of ``fields`` (magic to value), with its size and CRC-32."""
    body = struct.pack(">I", zlib.crc32(fields)) + fields
    return struct.pack(">qi", 0, len(body)) + body


def _nested(data: bytes) -> bytes:
    """A gzip wrapper holding another gzip wrapper (``data``)."""
    value = gzip.compress(data)
    return _message(struct.pack(">bbqi", 1, GZIP, 1_700_000_000_000, -1)
                    + struct.pack(">i", len(value)) + value)


@pytest.mark.parametrize(("damage", "error"), [
    ("bad-crc", kwire.CORRUPT_MESSAGE), ("truncated-wrapper", kwire.CORRUPT_MESSAGE),
    ("nested-compression", INVALID_RECORD), ("truncated-set", kwire.CORRUPT_MESSAGE)])
def test_bad_message_sets_are_refused_and_not_written(module_broker: Any, topic: str,
                                                      damage: str, error: int) -> None:
    create_topic(module_broker.bootstrap, topic)
    good = message_set(1, count=3)
    bad = {"bad-crc": lambda: _bad_crc(message_set(1)),
           "truncated-wrapper": lambda: _truncated_wrapper(message_set(1, codec=GZIP)),
           "nested-compression": lambda: _nested(message_set(1, codec=GZIP)),
           "truncated-set": lambda: good + message_set(1)[:-5]}[damage]()
    with KafkaWire(module_broker.bootstrap) as wire:
        assert wire.produce(topic, 0, bad, version=2).error_code == error
        assert wire.list_offset(topic, 0, -1) == (0, 0), "something was written"
        assert wire.produce(topic, 0, good, version=2).error_code == 0
        assert wire.list_offset(topic, 0, -1) == (0, 3)


def test_switch_off_refuses_old_clients_as_kafka_4(legacy_off: Any, topic: str) -> None:
    create_topic(legacy_off.bootstrap, topic)
    with KafkaWire(legacy_off.bootstrap) as wire:
        versions = wire.api_versions()
        assert versions[kwire.FETCH][0] == 4
        assert versions[kwire.LIST_OFFSETS][0] == 1
        assert versions[kwire.PRODUCE][0] == 0      # listed for librdkafka (KAFKA-18659) ...
        result = wire.produce(topic, 0, message_set(1), version=2)
        assert result.error_code == UNSUPPORTED_VERSION     # ... and refused
        # A version Kafka 4 does not serve: the connection closes, as there.
        with pytest.raises(Disconnected):
            wire.request(kwire.FETCH, 3, kwire.fetch_body(3, topic, 0, 0))


def test_topic_configs_apply_to_old_messages(module_broker: Any, unique_topic: Any) -> None:
    """message.timestamp.type=LogAppendTime stamps converted messages with the broker's time,
    which an old fetch reads with the LogAppendTime attribute; a compacted topic refuses a
    keyless v0 message (INVALID_RECORD) as it does a keyless v2 record."""
    stamped, compacted = unique_topic("append-time"), unique_topic("compacted")
    create_topic(module_broker.bootstrap, stamped,
                 config={"message.timestamp.type": "LogAppendTime"})
    create_topic(module_broker.bootstrap, compacted, config={"cleanup.policy": "compact"})
    with KafkaWire(module_broker.bootstrap) as wire:
        before = int(time.time() * 1000)
        assert wire.produce(stamped, 0, message_set(1), version=2).error_code == 0
        after = int(time.time() * 1000)
        body = kwire.fetch_body(3, stamped, 0, 0)
        fetched = kwire.parse_fetch_response(3, wire.request(kwire.FETCH, 3, body))[(stamped, 0)]
        data = fetched.records or b""
        assert data[17] & 0x08, "the LogAppendTime attribute"      # the first message's
        timestamps = {m[1] for m in read_message_set(data)}
        assert len(timestamps) == 1 and before <= timestamps.pop() <= after
        keyless = LegacyRecordBatchBuilder(magic=0, compression_type=0, batch_size=1 << 20)
        keyless.append(0, timestamp=None, key=None, value=b"no key")
        result = wire.produce(compacted, 0, bytes(keyless.build()), version=0)
        assert result.error_code == INVALID_RECORD
        assert wire.list_offset(compacted, 0, -1) == (0, 0)


def test_old_fetch_reads_past_transaction_markers(module_broker: Any, topic: str) -> None:
    """A commit marker has nothing an old client can read: a fetch at its offset (with room for
    that batch alone) gets the records after it, never an empty answer it would repeat."""
    from confluent_kafka import Producer

    create_topic(module_broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": module_broker.bootstrap,
                         "transactional.id": f"legacy-{topic}"})
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, key=b"t%d" % i, value=b"in a transaction", partition=0)
    producer.commit_transaction(15)
    with KafkaWire(module_broker.bootstrap) as wire:
        assert wire.produce(topic, 0, message_set(1, count=2), version=2).base_offset == 4
        for fetch_version in (1, 3):
            body = kwire.fetch_body(fetch_version, topic, 0, 3, partition_max_bytes=80)
            fetched = kwire.parse_fetch_response(
                fetch_version, wire.request(kwire.FETCH, fetch_version, body))[(topic, 0)]
            assert [m[0] for m in read_message_set(fetched.records or b"")] == [4, 5]
            everything = kwire.fetch_body(fetch_version, topic, 0, 0)
            fetched = kwire.parse_fetch_response(
                fetch_version, wire.request(kwire.FETCH, fetch_version, everything))[(topic, 0)]
            assert [m[0] for m in read_message_set(fetched.records or b"")] == [0, 1, 2, 4, 5]


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_alter_configs_of_every_described_config(module_broker: Any, topic: str) -> None:
    """AlterConfigs (the legacy, whole-set one old admin tools send) of every config
    DescribeConfigs shows, with message.format.version changed as librdkafka's 0092 test does:
    accepted, and the topic stays a plain topic (BMQ's empty markers are not set)."""
    from confluent_kafka.admin import ConfigResource

    create_topic(module_broker.bootstrap, topic)
    client = admin(module_broker.bootstrap)
    resource = ConfigResource("topic", topic)
    described = client.describe_configs([resource])[resource].result(15)
    replacement = ConfigResource("topic", topic, set_config={
        name: entry.value for name, entry in described.items() if entry.value is not None})
    replacement.set_config("message.format.version", "0.10.0.0")
    client.alter_configs([replacement])[replacement].result(15)
    configs = topic_configs(module_broker.bootstrap, topic)
    assert configs["message.format.version"] == "0.10.0.0"
    with KafkaWire(module_broker.bootstrap) as wire:
        assert wire.produce(topic, 0, message_set(1), version=2).error_code == 0


def test_zstd_batches_are_unsupported_for_old_fetches(module_broker: Any, topic: str) -> None:
    """Message formats v0/v1 have no zstd: an old fetch of zstd batches gets Kafka's
    UNSUPPORTED_COMPRESSION_TYPE, a v2 fetch the records."""
    create_topic(module_broker.bootstrap, topic)
    produce_all(module_broker.bootstrap, topic, [{"value": b"z" * 100}] * 5,
                compression_type="zstd")
    with KafkaWire(module_broker.bootstrap) as wire:
        body = kwire.fetch_body(3, topic, 0, 0)
        fetched = kwire.parse_fetch_response(3, wire.request(kwire.FETCH, 3, body))[(topic, 0)]
        assert fetched.error_code == UNSUPPORTED_COMPRESSION_TYPE
    assert len(consume(module_broker.bootstrap, topic, expected=5)[0]) == 5
