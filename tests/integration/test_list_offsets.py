"""ListOffsets as seen through the clients: watermarks, offsets for times, DeleteRecords."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition as CKTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KPTopicPartition
from kafka.admin import KafkaAdminClient

from .helpers import consume, consumer, create_topic, produce_all

pytestmark = pytest.mark.timeout(90)

# Ten records per partition with timestamps 1000, 2000, ..., 10000 (CreateTime).
TIMESTAMPS = [1000 * (i + 1) for i in range(10)]


def _fill(broker, topic, partitions=2):
    # The timestamps are from 1970: keep time-based retention from deleting them mid-test.
    create_topic(broker.bootstrap, topic, partitions=partitions, config={"retention.ms": "-1"})
    items = [{"value": f"p{p}-{i}".encode(), "partition": p, "timestamp": ts}
             for p in range(partitions) for i, ts in enumerate(TIMESTAMPS)]
    produce_all(broker.bootstrap, topic, items, linger_ms=0)


def test_confluent_watermarks_and_offsets_for_times(module_broker, topic):
    _fill(module_broker, topic)
    c = consumer(module_broker.bootstrap)
    try:
        for p in range(2):
            assert c.get_watermark_offsets(CKTopicPartition(topic, p), timeout=10,
                                           cached=False) == (0, 10)
        query = [CKTopicPartition(topic, 0, 2500),   # first record with ts >= 2500 is offset 2
                 CKTopicPartition(topic, 1, 1000),   # exact match: offset 0
                 CKTopicPartition(topic, 0, 0)]      # before everything: earliest
        result = c.offsets_for_times(query[:2], timeout=10)
        assert [(r.partition, r.offset) for r in result] == [(0, 2), (1, 0)]
        assert [r.error for r in result] == [None, None]
        (r,) = c.offsets_for_times([CKTopicPartition(topic, 1, 10_000)], timeout=10)
        assert r.offset == 9
        # Later than every record: no offset (-1, i.e. "end").
        (r,) = c.offsets_for_times([CKTopicPartition(topic, 0, 10_001)], timeout=10)
        assert r.offset == -1
        (r,) = c.offsets_for_times([query[2]], timeout=10)
        assert r.offset == 0
    finally:
        c.close()

    # Reading from the offset found for a timestamp gives that record.
    got = consume(module_broker.bootstrap, topic, [0], start=2, expected=8)[0]
    assert (got[0].offset, got[0].timestamp, got[0].value) == (2, 3000, b"p0-2")


def test_kafka_python_offsets_and_delete_records(module_broker, topic):
    _fill(module_broker, topic)
    tp0, tp1 = KPTopicPartition(topic, 0), KPTopicPartition(topic, 1)
    kc = KafkaConsumer(bootstrap_servers=module_broker.bootstrap, group_id=None,
                       enable_auto_commit=False, request_timeout_ms=15000)
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap, request_timeout_ms=15000)
    try:
        assert kc.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert kc.end_offsets([tp0, tp1]) == {tp0: 10, tp1: 10}
        found = kc.offsets_for_times({tp0: 4500, tp1: 10_000})
        assert (found[tp0].offset, found[tp0].timestamp) == (4, 5000)
        assert (found[tp1].offset, found[tp1].timestamp) == (9, 10_000)
        assert kc.offsets_for_times({tp0: 99_999})[tp0] is None

        # DeleteRecords moves the earliest offset; the latest stays.
        result = admin.delete_records({tp0: 6})
        assert result[tp0]["low_watermark"] == 6
        assert kc.beginning_offsets([tp0, tp1]) == {tp0: 6, tp1: 0}
        assert kc.end_offsets([tp0]) == {tp0: 10}
        # A timestamp inside the deleted range now resolves to the new earliest record.
        found = kc.offsets_for_times({tp0: 1500})
        assert found[tp0].offset == 6
        # Deleting up to the high watermark (-1 means "high watermark") empties the partition.
        result = admin.delete_records({tp1: -1})
        assert result[tp1]["low_watermark"] == 10
        assert kc.beginning_offsets([tp1]) == {tp1: 10}
    finally:
        kc.close()
        admin.close()

    c = consumer(module_broker.bootstrap)
    try:
        assert c.get_watermark_offsets(CKTopicPartition(topic, 0), timeout=10,
                                       cached=False) == (6, 10)
        assert c.get_watermark_offsets(CKTopicPartition(topic, 1), timeout=10,
                                       cached=False) == (10, 10)
    finally:
        c.close()
    # Consuming "from the beginning" starts at the new earliest offset.
    got = consume(module_broker.bootstrap, topic, [0], expected=4)[0]
    assert [(m.offset, m.value) for m in got] == [(i, f"p0-{i}".encode()) for i in range(6, 10)]
