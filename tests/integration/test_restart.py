"""Clean restarts (SIGTERM) keep data, offsets, topic configs and log start offsets."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_END
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient

from .helpers import (
    admin,
    consume,
    consumer,
    create_topic,
    produce_all,
    producer,
    topic_configs,
    wait_until,
    watermarks,
)

pytestmark = pytest.mark.timeout(120)


def _all_records(broker, topic, partitions, expected):
    got = consume(broker.bootstrap, topic, range(partitions), expected=expected)
    return {(m.partition, m.offset): (m.key, m.value, m.headers) for msgs in got.values()
            for m in msgs}


def test_restart_keeps_data_offsets_and_configs(broker, unique_topic):
    topic = unique_topic("data")
    create_topic(broker.bootstrap, topic, partitions=2,
                 config={"retention.ms": "123456789", "segment.bytes": "65536",
                         "max.message.bytes": "500000"})
    items = [{"key": f"k{i}".encode(), "value": f"value-{i}".encode() * 10,
              "partition": i % 2, "headers": [("i", str(i).encode())]} for i in range(600)]
    produce_all(broker.bootstrap, topic, items)
    before = _all_records(broker, topic, 2, 600)

    broker.restart()

    after = _all_records(broker, topic, 2, 600)
    assert after == before
    assert watermarks(broker.bootstrap, topic, 0) == (0, 300)
    assert watermarks(broker.bootstrap, topic, 1) == (0, 300)
    configs = topic_configs(broker.bootstrap, topic)
    assert configs["retention.ms"] == "123456789"
    assert configs["segment.bytes"] == "65536"
    assert configs["max.message.bytes"] == "500000"

    # New records continue the offsets of each partition.
    log = produce_all(broker.bootstrap, topic,
                      [{"value": f"more-{i}".encode(), "partition": i % 2} for i in range(10)])
    offsets = sorted((p, o) for _, _, p, o in log.ok)
    assert offsets == sorted([(0, 300 + i) for i in range(5)] + [(1, 300 + i) for i in range(5)])
    final = _all_records(broker, topic, 2, 610)
    assert {k: v for k, v in final.items() if k[1] < 300} == before
    assert final[(0, 304)][1] == b"more-8"


def test_restart_keeps_altered_configs_deletions_and_log_start(broker, unique_topic):
    kept, deleted = unique_topic("kept"), unique_topic("deleted")
    create_topic(broker.bootstrap, kept, partitions=1)
    create_topic(broker.bootstrap, deleted, partitions=1)
    produce_all(broker.bootstrap, kept, [{"value": str(i).encode()} for i in range(20)],
                linger_ms=0)

    client = admin(broker.bootstrap)
    resource = ConfigResource("topic", kept, incremental_configs=[
        ConfigEntry("retention.bytes", "10000000",
                    incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    client.incremental_alter_configs([resource])[resource].result(15)
    client.delete_topics([deleted], operation_timeout=15)[deleted].result(15)
    kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        kadmin.delete_records({TopicPartition(kept, 0): 5})
    finally:
        kadmin.close()
    assert watermarks(broker.bootstrap, kept) == (5, 20)

    broker.restart()

    configs = topic_configs(broker.bootstrap, kept)
    assert configs["retention.bytes"] == "10000000"
    assert configs["segment.ms"] == "3600000"
    topics = client.list_topics(timeout=10).topics
    assert kept in topics
    assert deleted not in topics
    assert watermarks(broker.bootstrap, kept) == (5, 20)
    got = consume(broker.bootstrap, kept, [0], expected=15)[0]
    assert [m.value for m in got] == [str(i).encode() for i in range(5, 20)]


def test_restart_twice_and_empty_topic(broker, unique_topic):
    """An empty topic survives restarts, and the second restart sees the first's writes."""
    empty, busy = unique_topic("empty"), unique_topic("busy")
    create_topic(broker.bootstrap, empty, partitions=3)
    create_topic(broker.bootstrap, busy, partitions=1)
    produce_all(broker.bootstrap, busy, [{"value": b"a"}])
    broker.restart()
    produce_all(broker.bootstrap, busy, [{"value": b"b"}])
    broker.restart()
    assert len(admin(broker.bootstrap).list_topics(timeout=10).topics[empty].partitions) == 3
    for p in range(3):
        assert watermarks(broker.bootstrap, empty, p) == (0, 0)
    got = consume(broker.bootstrap, busy, [0], expected=2)[0]
    assert [(m.offset, m.value) for m in got] == [(0, b"a"), (1, b"b")]


def test_sigterm_with_connected_clients_exits_promptly(broker, topic):
    """Long-polling consumers and an idle producer do not hold up a clean shutdown."""
    create_topic(broker.bootstrap, topic, partitions=2)
    produce_all(broker.bootstrap, topic, [{"value": b"before", "partition": 0}])
    consumers = []
    p = producer(broker.bootstrap)
    try:
        for part in range(2):
            c = consumer(broker.bootstrap, fetch_wait_max_ms=5000, enable_partition_eof=False)
            c.assign([CKTopicPartition(topic, part, OFFSET_END)])
            c.poll(0.5)
            consumers.append(c)
        p.produce(topic, value=b"x", partition=1)
        p.flush(10)
        time.sleep(0.5)
        t0 = time.monotonic()
        broker.stop()  # asserts exit code 0
        took = time.monotonic() - t0
        assert took < 10, f"SIGTERM took {took:.1f}s with clients connected"
    finally:
        for c in consumers:
            c.close()
    broker.start()
    got = consume(broker.bootstrap, topic, [0, 1], expected=2)
    assert [m.value for m in got[0]] == [b"before"]
    assert [m.value for m in got[1]] == [b"x"]


def test_added_partitions_survive_restart(broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1)
    client = admin(broker.bootstrap)
    client.create_partitions([NewPartitions(topic, 3)])[topic].result(15)
    wait_until(lambda: len(client.list_topics(topic, timeout=5).topics[topic].partitions) == 3,
               10, message="3 partitions")
    produce_all(broker.bootstrap, topic, [{"value": f"p{p}".encode(), "partition": p}
                                          for p in range(3)])
    broker.restart()
    assert len(client.list_topics(topic, timeout=10).topics[topic].partitions) == 3
    got = consume(broker.bootstrap, topic, range(3), expected=3)
    assert {p: [m.value for m in msgs] for p, msgs in got.items()} == \
        {p: [f"p{p}".encode()] for p in range(3)}
