"""Old clients' consumer groups and committed offsets (issue #36): OffsetCommit v0-1 and
OffsetFetch v0 (kafka-python pinned to 0.8.1 / 0.8.2), JoinGroup/SyncGroup v0 (librdkafka told
it talks to 0.9.0), and what today's clients then see of those commits."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.helpers import create_topic, produce_all


def _kafka_python_commit(bootstrap: str, group: str, topic: str, offset: int,
                         api_version: tuple[int, int, int]) -> int | None:
    """Commit ``offset`` for partition 0 with kafka-python at ``api_version``; return what the
    same client then reads back as committed."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             api_version=api_version, enable_auto_commit=False)
    partition = KafkaPartition(topic, 0)
    consumer.assign([partition])
    consumer.commit({partition: OffsetAndMetadata(offset, "", -1)})
    committed: int | None = consumer.committed(partition)
    consumer.close()
    return committed


def _committed_seen_today(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [partition] = consumer.committed([TopicPartition(topic, 0)], timeout=15)
        return int(partition.offset)
    finally:
        consumer.close()


@pytest.mark.parametrize(("api_version", "offset_commit"), [((0, 8, 2), 1), ((0, 8, 1), 0)])
def test_old_offset_commits(module_broker: Any, topic: str, api_version: tuple[int, int, int],
                            offset_commit: int) -> None:
    """OffsetCommit v1 / v0 (and OffsetFetch v1 / v0) of kafka-python: the offset round-trips,
    and today's client finds it (stored once, in __consumer_offsets)."""
    create_topic(module_broker.bootstrap, topic)
    group = f"old-{offset_commit}-{uuid.uuid4().hex[:6]}"
    assert _kafka_python_commit(module_broker.bootstrap, group, topic, 42, api_version) == 42
    assert _committed_seen_today(module_broker.bootstrap, group, topic) == 42


def _subscribed_read(consumer: Consumer, topic: str, count: int, commit: bool) -> list[Any]:
    """The first ``count`` messages a consumer subscribed to ``topic`` gets (committing the
    last if asked), then the consumer closed."""
    consumer.subscribe([topic])
    messages: list[Any] = []
    deadline = time.monotonic() + 60
    while len(messages) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            messages.append(message)
    if commit and messages:
        consumer.commit(messages[-1], asynchronous=False)
    consumer.close()
    return messages


@pytest.mark.slow
def test_old_librdkafka_group_hands_over_to_today(module_broker: Any, topic: str) -> None:
    """A 0.9.0-era consumer (JoinGroup/SyncGroup/Heartbeat v0) joins, consumes and commits; a
    v2 consumer of the same group goes on from its commit."""
    create_topic(module_broker.bootstrap, topic)
    produce_all(module_broker.bootstrap, topic, [{"value": b"m%d" % i} for i in range(100)])
    group = f"old-group-{uuid.uuid4().hex[:6]}"
    old = Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": group,
                    "api.version.request": False, "broker.version.fallback": "0.9.0",
                    "auto.offset.reset": "earliest", "enable.auto.commit": False})
    first = _subscribed_read(old, topic, 60, commit=True)
    assert [m.value() for m in first] == [b"m%d" % i for i in range(60)]
    assert _committed_seen_today(module_broker.bootstrap, group, topic) == 60
    today = Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest"})
    rest = [m.offset() for m in _subscribed_read(today, topic, 40, commit=False)]
    assert rest == list(range(60, 100))


@pytest.mark.slow
def test_kafka_python_0_10_1_group(module_broker: Any, topic: str) -> None:
    """kafka-python pinned to 0.10.1 subscribes in a group (JoinGroup v1, SyncGroup, Heartbeat
    and LeaveGroup v0, OffsetCommit v2, OffsetFetch v1), consumes and commits; today's client
    finds the commit."""
    from kafka import KafkaConsumer

    create_topic(module_broker.bootstrap, topic)
    produce_all(module_broker.bootstrap, topic, [{"value": b"m%d" % i} for i in range(30)])
    group = f"kafka-python-{uuid.uuid4().hex[:6]}"
    consumer = KafkaConsumer(topic, bootstrap_servers=module_broker.bootstrap, group_id=group,
                             api_version=(0, 10, 1), auto_offset_reset="earliest",
                             enable_auto_commit=False)
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < 30 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values += [record.value for record in records]
    consumer.commit()
    consumer.close()
    assert values == [b"m%d" % i for i in range(30)]
    assert _committed_seen_today(module_broker.bootstrap, group, topic) == 30


def _commit_v1_at(consumer: Any, topic: str, offset: int, commit_timestamp: int) -> None:
    """OffsetCommit v1 from kafka-python's own request class with a per-partition commit
    timestamp, which its consumer API leaves at -1 (the broker's time)."""
    from kafka.protocol.consumer import OffsetCommitRequest

    topic_type = OffsetCommitRequest.OffsetCommitRequestTopic
    request = OffsetCommitRequest(
        max_version=1, group_id=consumer.config["group_id"], generation_id_or_member_epoch=-1,
        member_id="", topics=[topic_type(name=topic, partitions=[
            topic_type.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset, commit_timestamp=commit_timestamp,
                committed_metadata="")])])
    future = consumer._manager.send(request, node_id=consumer._coordinator.coordinator_id)
    response = consumer._net.run(consumer._manager.wait_for, future, None)
    assert [p.error_code for t in response.topics for p in t.partitions] == [0]


@pytest.mark.broker(env={"BMQ_OFFSETS_RETENTION_MINUTES": 1,
                         "BMQ_OFFSETS_RETENTION_CHECK_INTERVAL_MS": 200})
def test_offset_commit_v1_timestamp_starts_retention(broker: Any, topic: str) -> None:
    """OffsetCommit v1's commit timestamp is the offset's commit time, as in Kafka 2.x: an
    offset a standalone kafka-python (0.8.2) consumer commits with a time older than
    offsets.retention.minutes expires at the next retention check; one committed at the
    broker's time (-1) stays."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPartition
    from kafka.structs import OffsetAndMetadata

    create_topic(broker.bootstrap, topic)
    groups = {"dated": f"dated-{uuid.uuid4().hex[:6]}", "now": f"now-{uuid.uuid4().hex[:6]}"}
    for name, group in groups.items():
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                                 api_version=(0, 8, 2), enable_auto_commit=False)
        partition = KafkaPartition(topic, 0)
        consumer.assign([partition])
        consumer.commit({partition: OffsetAndMetadata(7, "", -1)})   # finds the coordinator
        if name == "dated":
            two_minutes_ago = int(time.time() * 1000) - 120_000
            _commit_v1_at(consumer, topic, 42, two_minutes_ago)
        else:
            consumer.commit({partition: OffsetAndMetadata(42, "", -1)})
        consumer.close()
    deadline = time.monotonic() + 15
    while _committed_seen_today(broker.bootstrap, groups["dated"], topic) == 42:
        assert time.monotonic() < deadline, "the offset committed two minutes ago was kept"
        time.sleep(0.3)
    assert _committed_seen_today(broker.bootstrap, groups["now"], topic) == 42
