"""Metadata names a topic created through another broker a moment ago, before this broker's
cached view of ZooKeeper has it. Answered UNKNOWN_TOPIC_OR_PARTITION, the topic counted as
having no partition for a consumer group's leader (librdkafka), which assigned nothing and
never rebalanced: the fault runs' scheduled workload whose group delivered nothing.

Broker 2 is frozen (SIGSTOP) while broker 1 creates the topic and a Metadata request waits in
broker 2's socket; resumed, broker 2 reads the request before its ZooKeeper watcher has
brought the topic into its cache."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import MetadataRequest
from bmq.protocol.messages.metadata_request import MetadataRequestTopic
from tests.cluster.conftest import ClusterFactory
from tests.conftest import make_topic_name
from tests.groups.wire import RawClient

PARTITIONS = 3
VERSION = 12


def test_a_topic_created_elsewhere_is_named_before_the_cache_has_it(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2)
    topic = make_topic_name("fresh")
    late = cluster.brokers[2]
    with RawClient(late.bootstrap) as client:
        late.pause()
        try:
            admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
            asked = client.send(MetadataRequest(
                topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
                VERSION)
        finally:
            late.resume()
        response = client.receive(MetadataRequest.API_KEY, VERSION, asked)
    [answer] = response.topics
    assert answer.error_code == ErrorCode.NONE, ErrorCode(answer.error_code).name
    assert sorted(p.partition_index for p in answer.partitions) == list(range(PARTITIONS))
