"""Metadata v12+ by topic id (KIP-516), on `bmq serve` and on a proxy: a non-zero id asks for
that topic whatever the name says, as in Kafka. The Java consumer (4.x) sends an empty name
beside the id of a topic a broker-side regex assigned it; answered by name, that was
INVALID_TOPIC_EXCEPTION for ever and the consumer never fetched."""

from __future__ import annotations

import uuid

from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import MetadataRequest
from bmq.protocol.messages.metadata_request import MetadataRequestTopic
from bmq.protocol.primitives import ZERO_UUID
from tests.cluster.conftest import ClusterFactory, cluster_factory, zookeeper
from tests.conftest import BrokerProcess
from tests.groups.helpers import create_topic, unique
from tests.groups.wire import RawClient
from tests.proxy.conftest import Proxies, proxies

__all__ = ["cluster_factory", "proxies", "zookeeper"]


def check_asked_by_id(bootstrap: str, topic: str) -> None:
    with RawClient(bootstrap) as client:
        by_name = client.call(MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                              allow_auto_topic_creation=False), 12).topics[0]
        topic_id = by_name.topic_id
        assert by_name.error_code == ErrorCode.NONE and topic_id != ZERO_UUID
        missing = uuid.uuid4()
        asked = [MetadataRequestTopic(topic_id=topic_id, name=None),
                 MetadataRequestTopic(topic_id=topic_id, name=""),          # the Java consumer
                 MetadataRequestTopic(topic_id=topic_id, name="another-name"),
                 MetadataRequestTopic(topic_id=missing, name="")]
        answers = client.call(MetadataRequest(topics=asked, allow_auto_topic_creation=False),
                              12).topics
    assert [(a.error_code, a.name, a.topic_id, len(a.partitions)) for a in answers] == [
        (ErrorCode.NONE, topic, topic_id, 2)] * 3 + [
        (ErrorCode.UNKNOWN_TOPIC_ID, None, missing, 0)]


def test_a_topic_id_wins_over_the_name(module_broker: BrokerProcess) -> None:
    topic = unique("by-id")
    create_topic(module_broker.bootstrap, topic, 2)
    check_asked_by_id(module_broker.bootstrap, topic)


def test_a_topic_id_wins_over_the_name_at_a_proxy(cluster_factory: ClusterFactory,
                                                  proxies: Proxies) -> None:
    cluster = cluster_factory(brokers=1)
    proxy = proxies(cluster)
    topic = unique("by-id")
    create_topic(proxy.bootstrap, topic, 2)
    cluster.wait_writable(topic)
    check_asked_by_id(proxy.bootstrap, topic)
