"""Broker settings from a TOML file and BMQ_* environment variables, as clients see them."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from . import kwire
from .helpers import admin, consume, produce_all, producer, wait_until

pytestmark = pytest.mark.timeout(60)


def test_toml_num_partitions_applies_to_auto_created_topics(broker_factory, unique_topic):
    broker = broker_factory(config={"num_partitions": 3})
    topic = unique_topic("auto")
    # A producer's metadata request auto-creates the topic with the configured default.
    produce_all(broker.bootstrap, topic, [{"value": b"x", "partition": 2}])
    md = admin(broker.bootstrap).list_topics(topic, timeout=10)
    assert len(md.topics[topic].partitions) == 3
    got = consume(broker.bootstrap, topic, [2], expected=1)[2]
    assert got[0].value == b"x"


def test_environment_overrides_toml(broker_factory, unique_topic):
    broker = broker_factory(config={"num_partitions": 3}, env={"BMQ_NUM_PARTITIONS": 5})
    topic = unique_topic("auto")
    with kwire.KafkaWire(broker.bootstrap) as wire:
        topics = wire.metadata([topic], allow_auto_create=True)
        # Kafka may answer LEADER_NOT_AVAILABLE (5) while the new topic is being set up.
        assert topics[topic][0] in (0, 5)
        wait_until(lambda: wire.metadata([topic])[topic] == (0, 5), 10,
                   message="auto-created topic has BMQ_NUM_PARTITIONS=5 partitions")


def test_auto_create_disabled(broker_factory, unique_topic):
    broker = broker_factory(env={"BMQ_AUTO_CREATE_TOPICS_ENABLE": "false"})
    topic = unique_topic("nope")
    with kwire.KafkaWire(broker.bootstrap) as wire:
        topics = wire.metadata([topic], allow_auto_create=True)
        assert topics[topic][0] == kwire.UNKNOWN_TOPIC_OR_PARTITION
    md = admin(broker.bootstrap).list_topics(timeout=10)
    assert topic not in md.topics

    # A producer cannot deliver to the missing topic.
    errors = []
    p = producer(broker.bootstrap, message_timeout_ms=3000, linger_ms=0)
    p.produce(topic, value=b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MSG_TIMED_OUT,
                                KafkaError._UNKNOWN_TOPIC)
    assert topic not in admin(broker.bootstrap).list_topics(timeout=10).topics
