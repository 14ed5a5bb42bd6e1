"""Protocol semantics checked with exact requests: acks=0, fetch ranges and waiting,
ListOffsets errors, and idempotent-producer sequence handling across restarts."""

from __future__ import annotations

import struct
import time

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient

from . import kwire
from .helpers import admin, create_topic, watermarks
from .kwire import KafkaWire, Record, build_record_batch

pytestmark = pytest.mark.timeout(60)

EARLIEST, LATEST = -2, -1


def records(n, tag="r"):
    return [Record(f"{tag}{i}".encode(), f"value-{tag}-{i}".encode()) for i in range(n)]


def test_acks_0_gets_no_response_but_is_written(module_broker, topic):
    create_topic(module_broker.bootstrap, topic, partitions=1)
    with KafkaWire(module_broker.bootstrap) as wire:
        pv = wire.version_for(kwire.PRODUCE)
        mv = wire.version_for(kwire.METADATA)
        wire.send_raw(kwire.request_frame(
            kwire.PRODUCE, pv, 101,
            kwire.produce_body(pv, topic, 0, build_record_batch(records(3)), acks=0)))
        wire.send_raw(kwire.request_frame(kwire.METADATA, mv, 102,
                                          kwire.metadata_body(mv, [topic])))
        frame = wire.recv_frame()
        assert struct.unpack_from(">i", frame)[0] == 102, "acks=0 produce was answered"
        deadline = time.monotonic() + 5
        while wire.list_offset(topic, 0, LATEST) != (0, 3) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert wire.list_offset(topic, 0, LATEST) == (0, 3)


def test_fetch_offset_out_of_range(module_broker, topic):
    create_topic(module_broker.bootstrap, topic, partitions=1)
    with KafkaWire(module_broker.bootstrap) as wire:
        assert wire.produce(topic, 0, build_record_batch(records(10))).error_code == 0
        at_end = wire.fetch(topic, 0, 10)
        assert at_end.error_code == 0 and at_end.high_watermark == 10
        assert not at_end.records
        assert wire.fetch(topic, 0, 11).error_code == kwire.OFFSET_OUT_OF_RANGE
        assert wire.fetch(topic, 0, 10_000).error_code == kwire.OFFSET_OUT_OF_RANGE
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    try:
        admin.delete_records({TopicPartition(topic, 0): 4})
        # Beyond the high watermark is refused by DeleteRecords as well.
        with pytest.raises(Exception) as excinfo:
            admin.delete_records({TopicPartition(topic, 0): 11})
        assert "OffsetOutOfRange" in type(excinfo.value).__name__, excinfo.value
    finally:
        admin.close()
    with KafkaWire(module_broker.bootstrap) as wire:
        assert wire.fetch(topic, 0, 3).error_code == kwire.OFFSET_OUT_OF_RANGE
        fetched = wire.fetch(topic, 0, 4)
        assert fetched.error_code == 0
        assert fetched.log_start_offset in (None, 4)
        offsets = [o for b in kwire.parse_record_batches(fetched.records or b"")
                   for o, _ in b.records or []]
        assert [o for o in offsets if o >= 4] == list(range(4, 10))


def test_list_offsets_unknown_topic_or_partition(module_broker, topic, unique_topic):
    create_topic(module_broker.bootstrap, topic, partitions=1)
    with KafkaWire(module_broker.bootstrap) as wire:
        assert wire.list_offset(unique_topic("missing"), 0, LATEST)[0] == \
            kwire.UNKNOWN_TOPIC_OR_PARTITION
        assert wire.list_offset(topic, 3, LATEST)[0] == kwire.UNKNOWN_TOPIC_OR_PARTITION
        assert wire.list_offset(topic, 0, EARLIEST) == (0, 0)
        assert wire.list_offset(topic, 0, LATEST) == (0, 0)
        fetched = wire.fetch(unique_topic("missing"), 0, 0)
        assert fetched.error_code == kwire.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_min_bytes_and_max_wait(module_broker, topic):
    create_topic(module_broker.bootstrap, topic, partitions=1)
    with KafkaWire(module_broker.bootstrap) as wire:
        assert wire.produce(topic, 0, build_record_batch(records(1))).error_code == 0
        # Data available and min_bytes satisfied: answered at once despite a long max wait.
        t0 = time.monotonic()
        fetched = wire.fetch(topic, 0, 0, max_wait_ms=5000, min_bytes=1)
        assert time.monotonic() - t0 < 1.0
        assert kwire.parse_record_batches(fetched.records or b"")
        # Not enough bytes for min_bytes: the broker waits max_wait, then returns what it has.
        t0 = time.monotonic()
        fetched = wire.fetch(topic, 0, 0, max_wait_ms=800, min_bytes=1_000_000)
        waited = time.monotonic() - t0
        assert 0.6 <= waited < 3.0, f"waited {waited:.2f}s for max_wait_ms=800"
        assert kwire.parse_record_batches(fetched.records or b""), "data withheld"
        # Nothing new and max_wait 0: immediate empty answer.
        t0 = time.monotonic()
        fetched = wire.fetch(topic, 0, 1, max_wait_ms=0)
        assert time.monotonic() - t0 < 1.0
        assert fetched.error_code == 0 and not fetched.records


def test_init_producer_id_idempotent_and_transactional(module_broker):
    with KafkaWire(module_broker.bootstrap) as wire:
        first = wire.init_producer_id()
        second = wire.init_producer_id()
        assert first[0] == 0 and second[0] == 0
        assert first[1] >= 0 and second[1] >= 0
        assert first[1] != second[1], "two idempotent producers were given the same id"
        # A transactional id keeps its producer id; each InitProducerId bumps the epoch.
        error, pid, epoch = wire.init_producer_id("my-transactional-id")
        assert (error, epoch) == (0, 0) and pid >= 0
        assert wire.init_producer_id("my-transactional-id") == (0, pid, 1)


def _idem_batch(pid, epoch, seq, n, tag):
    return build_record_batch(records(n, tag), producer_id=pid, producer_epoch=epoch,
                              base_sequence=seq)


def test_idempotent_sequences_duplicates_and_gaps(broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1)
    with KafkaWire(broker.bootstrap) as wire:
        error, pid, epoch = wire.init_producer_id()
        assert error == 0
        first = _idem_batch(pid, epoch, 0, 5, "a")
        res = wire.produce(topic, 0, first)
        assert (res.error_code, res.base_offset) == (0, 0)
        # A retried batch (same producer, epoch, sequence) is acknowledged, not re-appended.
        dup = wire.produce(topic, 0, first)
        assert dup.error_code in (0, kwire.DUPLICATE_SEQUENCE_NUMBER)
        if dup.error_code == 0:
            assert dup.base_offset == 0
        assert wire.list_offset(topic, 0, LATEST) == (0, 5)
        # A gap in the sequence is refused and nothing is written.
        gap = wire.produce(topic, 0, _idem_batch(pid, epoch, 10, 2, "gap"))
        assert gap.error_code == kwire.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert wire.list_offset(topic, 0, LATEST) == (0, 5)
        second = _idem_batch(pid, epoch, 5, 5, "b")
        assert wire.produce(topic, 0, second).base_offset == 5

    # The broker remembers producer state across a clean restart...
    broker.restart()
    with KafkaWire(broker.bootstrap) as wire:
        dup = wire.produce(topic, 0, second)
        assert dup.error_code in (0, kwire.DUPLICATE_SEQUENCE_NUMBER), dup
        if dup.error_code == 0:
            assert dup.base_offset == 5
        assert wire.list_offset(topic, 0, LATEST) == (0, 10)
        third = _idem_batch(pid, epoch, 10, 3, "c")
        assert (wire.produce(topic, 0, third).error_code,) == (0,)
        new_pid = wire.init_producer_id()[1]
        assert new_pid != pid, "producer id reused after restart"

    # ...and across kill -9 (state rebuilt from the log).
    broker.kill()
    broker.start()
    with KafkaWire(broker.bootstrap) as wire:
        dup = wire.produce(topic, 0, third)
        assert dup.error_code in (0, kwire.DUPLICATE_SEQUENCE_NUMBER), dup
        if dup.error_code == 0:
            assert dup.base_offset == 10
        assert wire.list_offset(topic, 0, LATEST) == (0, 13)
        nxt = wire.produce(topic, 0, _idem_batch(pid, epoch, 13, 1, "d"))
        assert (nxt.error_code, nxt.base_offset) == (0, 13)
        assert wire.init_producer_id()[1] not in (pid, new_pid)
    assert watermarks(broker.bootstrap, topic) == (0, 14)


def test_fetch_returns_first_batch_even_if_larger_than_limits(module_broker, topic):
    """KIP-74: a batch bigger than max_bytes / partition_max_bytes is still returned whole when
    it is the first one, so consumers always make progress."""
    create_topic(module_broker.bootstrap, topic, partitions=1)
    big = build_record_batch([Record(b"big", b"x" * 50_000)])
    small = build_record_batch(records(3))
    with KafkaWire(module_broker.bootstrap) as wire:
        assert wire.produce(topic, 0, big).error_code == 0
        assert wire.produce(topic, 0, small).error_code == 0
        fetched = wire.fetch(topic, 0, 0, max_bytes=1000, partition_max_bytes=1000)
        assert fetched.error_code == 0
        batches = kwire.parse_record_batches(fetched.records or b"")
        assert batches and batches[0].base_offset == 0 and batches[0].crc_ok()
        assert batches[0].records[0][1].value == b"x" * 50_000
        # Limits that fit everything return both batches.
        fetched = wire.fetch(topic, 0, 0)
        assert [b.base_offset for b in kwire.parse_record_batches(fetched.records or b"")] \
            == [0, 1]


def test_topic_config_changes_apply_without_restart(module_broker, topic):
    create_topic(module_broker.bootstrap, topic, partitions=1)
    batch = build_record_batch([Record(None, b"y" * 10_000)])
    with KafkaWire(module_broker.bootstrap) as wire:
        assert wire.produce(topic, 0, batch).error_code == 0
        client = admin(module_broker.bootstrap)
        resource = ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry("max.message.bytes", "5000",
                        incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("message.timestamp.type", "LogAppendTime",
                        incremental_operation=AlterConfigOpType.SET)])
        client.incremental_alter_configs([resource])[resource].result(15)
        assert wire.produce(topic, 0, batch).error_code == kwire.MESSAGE_TOO_LARGE
        old = build_record_batch([Record(None, b"old clock")], base_timestamp=1000)
        before = int(time.time() * 1000)
        assert wire.produce(topic, 0, old).error_code == 0
        fetched = wire.fetch(topic, 0, 1)
        (stamped,) = [b for b in kwire.parse_record_batches(fetched.records or b"")
                      if b.base_offset == 1]
        assert stamped.attributes & 0x08, "LogAppendTime flag not set on the stored batch"
        assert stamped.max_timestamp >= before - 1000, stamped.max_timestamp
