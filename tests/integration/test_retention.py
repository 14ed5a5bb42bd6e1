"""Segments roll at segment.bytes; retention (bytes and time) deletes whole old segments."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from .helpers import (
    admin,
    consume,
    create_topic,
    produce_all,
    topic_configs,
    wait_until,
    watermarks,
)

RETENTION_CHECK_INTERVAL_MS = 200
# Retention must take effect within a few check intervals (generous for a loaded CI machine).
RETENTION_DEADLINE_S = 3.0
# The correctness tests below wait longer so they still check *what* is deleted even when
# the timing test fails.
PATIENT_S = 20.0

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.broker(env={"BMQ_LOG_RETENTION_CHECK_INTERVAL_MS": RETENTION_CHECK_INTERVAL_MS}),
]

SEGMENT_BYTES = 8192
VALUE_SIZE = 1000
RECORDS = 400  # ~400 KB: about 50 segments of 8 KiB


def _fill(broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1,
                 config={"segment.bytes": str(SEGMENT_BYTES)})
    values = [os.urandom(VALUE_SIZE - 8) + f"{i:08d}".encode() for i in range(RECORDS)]
    # Small producer batches (about 2 KB each) so the log can roll at batch boundaries.
    produce_all(broker.bootstrap, topic, [{"value": v} for v in values],
                batch_size=2500, linger_ms=1, compression_type="none")
    assert watermarks(broker.bootstrap, topic) == (0, RECORDS)
    return values


def _set_topic_config(broker, topic, **configs):
    client = admin(broker.bootstrap)
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry(k.replace("_", "."), str(v), incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    client.incremental_alter_configs([resource])[resource].result(15)


def test_retention_bytes_deletes_old_segments(broker, topic):
    values = _fill(broker, topic)
    # Nothing is deleted while retention is unlimited.
    assert watermarks(broker.bootstrap, topic) == (0, RECORDS)

    retention_bytes = 50_000
    _set_topic_config(broker, topic, retention_bytes=retention_bytes)
    assert topic_configs(broker.bootstrap, topic)["retention.bytes"] == str(retention_bytes)
    low, high = wait_until(
        lambda: (lambda m: m if m[0] > 0 else None)(watermarks(broker.bootstrap, topic)),
        timeout=PATIENT_S, message="log start offset moves after retention.bytes is lowered")
    assert high == RECORDS, "retention must never remove the latest records"
    kept_bytes = (high - low) * VALUE_SIZE
    # Whole segments go, oldest first, while what remains is still >= retention.bytes;
    # at most about one segment (plus batch overhead) more than retention.bytes is kept.
    assert kept_bytes >= retention_bytes * 0.8, f"deleted too much: kept {high - low} records"
    assert kept_bytes <= retention_bytes + 3 * SEGMENT_BYTES, \
        f"kept {high - low} records (~{kept_bytes} B) with retention.bytes={retention_bytes}; " \
        f"segments did not roll at segment.bytes={SEGMENT_BYTES}?"

    # What is left reads back exactly, starting at the new log start offset.
    got = consume(broker.bootstrap, topic, [0], expected=high - low)[0]
    assert [m.offset for m in got] == list(range(low, high))
    assert [m.value for m in got] == values[low:high]

    # The log keeps working: new records continue the offsets.
    produce_all(broker.bootstrap, topic, [{"value": b"new"}])
    assert watermarks(broker.bootstrap, topic)[1] == RECORDS + 1

    # The deletion is durable across a restart.
    broker.restart()
    low_after, high_after = watermarks(broker.bootstrap, topic)
    assert low_after >= low
    assert high_after == RECORDS + 1


def test_retention_ms_deletes_expired_segments(broker, topic):
    _fill(broker, topic)
    # Records carry "now" timestamps; with retention.ms=1 every closed segment is expired.
    _set_topic_config(broker, topic, retention_ms=1)
    low, high = wait_until(
        lambda: (lambda m: m if m[0] >= RECORDS - 20 else None)(
            watermarks(broker.bootstrap, topic)),
        timeout=PATIENT_S, message="expired segments deleted")
    assert high == RECORDS
    # Consumers positioned before the log start are reset to it (auto.offset.reset=earliest).
    got = consume(broker.bootstrap, topic, [0], start=0, timeout=30)[0]
    assert [m.offset for m in got] == list(range(low, high))


def test_retention_check_interval_is_honoured(broker, topic):
    """log.retention.check.interval.ms=200: a lowered retention.bytes applies within seconds."""
    _fill(broker, topic)
    _set_topic_config(broker, topic, retention_bytes=50_000)
    started = time.monotonic()
    deadline = started + PATIENT_S
    while time.monotonic() < deadline and watermarks(broker.bootstrap, topic)[0] == 0:
        time.sleep(0.05)
    took = time.monotonic() - started
    assert watermarks(broker.bootstrap, topic)[0] > 0, f"retention never applied in {PATIENT_S}s"
    assert took < RETENTION_DEADLINE_S, (
        f"retention applied only after {took:.1f}s with "
        f"BMQ_LOG_RETENTION_CHECK_INTERVAL_MS={RETENTION_CHECK_INTERVAL_MS}")


def test_broker_wide_log_defaults_apply_to_topics(broker_factory, topic):
    """BMQ_LOG_SEGMENT_BYTES / BMQ_LOG_RETENTION_MS are the defaults of topics without their
    own segment.bytes / retention.ms."""
    broker = broker_factory(env={
        "BMQ_LOG_SEGMENT_BYTES": SEGMENT_BYTES,
        "BMQ_LOG_RETENTION_MS": 2000,
        "BMQ_LOG_RETENTION_CHECK_INTERVAL_MS": RETENTION_CHECK_INTERVAL_MS,
    })
    create_topic(broker.bootstrap, topic, partitions=1)
    configs = topic_configs(broker.bootstrap, topic)
    assert configs["segment.bytes"] == str(SEGMENT_BYTES)
    assert configs["retention.ms"] == "2000"
    produce_all(broker.bootstrap, topic, [{"value": os.urandom(VALUE_SIZE)} for _ in range(100)],
                batch_size=2500, linger_ms=1)
    _, high = wait_until(
        lambda: (lambda m: m if m[0] >= 80 else None)(watermarks(broker.bootstrap, topic)),
        timeout=PATIENT_S, message="segments older than BMQ_LOG_RETENTION_MS deleted")
    assert high == 100


def test_segment_ms_rolls_by_time(broker, topic):
    """segment.ms closes the active segment once it is older than that, so retention can then
    remove it even though it is far below segment.bytes."""
    create_topic(broker.bootstrap, topic, partitions=1, config={"segment.ms": "500"})
    produce_all(broker.bootstrap, topic, [{"value": b"first"}], linger_ms=0)
    time.sleep(1.2)
    produce_all(broker.bootstrap, topic, [{"value": b"second"}], linger_ms=0)
    # Only a closed segment can go: with retention.bytes=1 the first one must.
    _set_topic_config(broker, topic, retention_bytes=1)
    low, high = wait_until(
        lambda: (lambda m: m if m[0] >= 1 else None)(watermarks(broker.bootstrap, topic)),
        timeout=PATIENT_S, message="time-rolled segment deleted by retention.bytes")
    assert (low, high) == (1, 2)
    got = consume(broker.bootstrap, topic, [0], expected=1)[0]
    assert [m.value for m in got] == [b"second"]
