"""Authorized operations (KIP-430) as admin clients ask for them: BMQ has no authorizer, so like
Kafka without one it reports every operation a topic, group or cluster supports, and nothing
when the client did not ask (librdkafka's suite, 0081, checks exactly these sets)."""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupState, TopicCollection
from confluent_kafka.admin import AclOperation
from kafka.admin import KafkaAdminClient

from .helpers import admin, consumer, create_topic, produce_all, wait_until

pytestmark = pytest.mark.timeout(120)

A = AclOperation
TOPIC = {A.READ, A.WRITE, A.CREATE, A.DESCRIBE, A.DELETE, A.ALTER, A.DESCRIBE_CONFIGS,
         A.ALTER_CONFIGS}
CLUSTER = {A.CREATE, A.CLUSTER_ACTION, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS, A.IDEMPOTENT_WRITE,
           A.ALTER, A.DESCRIBE}
GROUP = {A.READ, A.DESCRIBE, A.DELETE, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS}


def test_confluent_admin_reports_every_operation_when_asked(module_broker, topic):
    """confluent-kafka (librdkafka) asks through Metadata v10 for topics and the cluster, and
    through DescribeGroups for groups."""
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    client = admin(bootstrap)

    asked = client.describe_topics(TopicCollection([topic]),
                                   include_authorized_operations=True)[topic].result(15)
    assert set(asked.authorized_operations) == TOPIC
    assert len(asked.partitions) == 2
    plain = client.describe_topics(TopicCollection([topic]))[topic].result(15)
    assert plain.authorized_operations is None

    cluster = client.describe_cluster(include_authorized_operations=True).result(15)
    assert set(cluster.authorized_operations) == CLUSTER
    assert client.describe_cluster().result(15).authorized_operations is None

    group = "ops-" + topic
    produce_all(bootstrap, topic, [{"value": b"v"}])
    c = consumer(bootstrap, group_id=group, auto_offset_reset="earliest")
    try:
        c.subscribe([topic])
        wait_until(lambda: c.poll(0.5) is not None, 30, message="no record consumed")
        described = client.describe_consumer_groups(
            [group], include_authorized_operations=True)[group].result(15)
        assert described.state == ConsumerGroupState.STABLE
        assert set(described.authorized_operations) == GROUP
    finally:
        c.close()


def test_kafka_python_describe_cluster_reports_cluster_operations(module_broker):
    """kafka-python's describe_cluster asks through DescribeCluster (KIP-700)."""
    client = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    try:
        described = client.describe_cluster()
    finally:
        client.close()
    assert set(described["authorized_operations"]) == {op.name for op in CLUSTER}
