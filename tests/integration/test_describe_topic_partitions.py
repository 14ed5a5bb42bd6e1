"""DescribeTopicPartitions (KIP-966) through kafka-python's admin client: pages of partitions
with a cursor, as the Java admin client's describeTopics reads them from Kafka 3.7 on."""

from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient

from .helpers import create_topic

pytestmark = pytest.mark.timeout(120)

UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (no authorizer)
TOPIC_OPERATIONS = sum(1 << code for code in (3, 4, 5, 6, 7, 8, 10, 11))


def _page(admin: KafkaAdminClient, topics: list[str], limit: int,
          cursor: dict | None = None) -> tuple[list[tuple[str, int, list[int]]], dict | None]:
    answer = admin.describe_topic_partitions(topics, response_partition_limit=limit,
                                             cursor=cursor)
    rows = [(t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
            for t in answer["topics"]]
    return rows, answer["next_cursor"]


def test_pages_follow_the_cursor_in_topic_order(module_broker, unique_topic):
    a, b = unique_topic("dtp-a"), unique_topic("dtp-b")
    missing = unique_topic("dtp-c-missing")
    create_topic(module_broker.bootstrap, a, partitions=3)
    create_topic(module_broker.bootstrap, b, partitions=2)
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    try:
        asked = [missing, b, a]  # answered in name order, whatever order they are asked in
        rows, cursor = _page(admin, asked, 2)
        assert rows == [(a, 0, [0, 1])]
        assert cursor == {"topic_name": a, "partition_index": 2}
        rows, cursor = _page(admin, asked, 2, cursor)
        assert rows == [(a, 0, [2]), (b, 0, [0])]
        assert cursor == {"topic_name": b, "partition_index": 1}
        rows, cursor = _page(admin, asked, 2, cursor)
        assert rows == [(b, 0, [1]), (missing, UNKNOWN_TOPIC_OR_PARTITION, [])]
        assert cursor is None

        whole = admin.describe_topic_partitions([a])["topics"][0]
        assert whole["topic_authorized_operations"] == TOPIC_OPERATIONS
        assert [(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
                for p in whole["partitions"]] == [(i, 0, [0], [0]) for i in range(3)]
        assert str(whole["topic_id"]) == admin.describe_topics([a])[0]["topic_id"]

        # A cursor on a topic that was not asked for makes the request invalid, as in Kafka.
        rows, _ = _page(admin, [a], 10, {"topic_name": b, "partition_index": 0})
        assert rows == [(a, INVALID_REQUEST, [])]
    finally:
        admin.close()
