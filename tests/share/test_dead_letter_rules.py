"""KIP-1191's guard on dead-letter topics, with confluent-kafka's ShareConsumer rejecting
records: a topic takes a share group's dead letters only with its topic config
``errors.deadletterqueue.group.enable=true`` and a name that starts with the broker's
``errors.deadletterqueue.topic.name.prefix`` (``dlq.``). As in Kafka, the rules are checked at
each write, and records whose dead letter a rule refuses are archived without one."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import AcknowledgeType
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from tests.integration.helpers import watermarks
from tests.metrics.scrape import scrape, value
from tests.share.helpers import (
    SHARE_ENV,
    create_dead_letter_topic,
    create_topic,
    produce,
    set_group_configs,
    unique,
)
from tests.share.test_clients import EARLIEST, _dead_letters, share_consumer

ENABLE = "errors.deadletterqueue.group.enable"


def _reject(bootstrap: str, group: str, topic: str, offsets: set[int]) -> None:
    """Reject ``offsets`` (acknowledged with ShareAcknowledge, which answers once their dead
    letters are written or refused) and check that none of them comes back."""
    consumer = share_consumer(bootstrap, group, topic)
    try:
        rejected: set[int] = set()
        deadline = time.monotonic() + 30
        while rejected != offsets and time.monotonic() < deadline:
            for m in consumer.poll(0.3):
                assert m.offset() in offsets and m.offset() not in rejected, m.offset()
                consumer.acknowledge(m, AcknowledgeType.REJECT)
                rejected.add(m.offset())
            consumer.commit_sync()
        assert rejected == offsets
        assert [m for _ in range(4) for m in consumer.poll(0.3)] == []
    finally:
        consumer.close()


def _source(bootstrap: str, group: str, dead_letter_topic: str, records: int) -> str:
    topic = unique("src")
    create_topic(bootstrap, topic, 1)
    set_group_configs(bootstrap, group, {
        **EARLIEST, "errors.deadletterqueue.topic.name": dead_letter_topic})
    produce(bootstrap, topic, records)
    return topic


def _topics(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    return set(admin.list_topics(timeout=10).topics)


def _enable(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(ENABLE, "true", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)


def test_a_topic_without_the_topic_config_gets_no_dead_letters(share_broker: Any) -> None:
    """Records rejected while the topic lacks the config are archived without a letter (not
    held to be written later); once the topic config is set, the next rejected record's
    letter is written."""
    bootstrap, group = share_broker.bootstrap, unique("g")
    dead = f"dlq.{unique('off')}"
    create_dead_letter_topic(bootstrap, dead, enabled=False)
    topic = _source(bootstrap, group, dead, 2)
    _reject(bootstrap, group, topic, {0, 1})
    assert watermarks(bootstrap, dead) == (0, 0)
    samples = scrape(share_broker.metrics_port)
    assert value(samples, "bmq_share_dead_letters_total", group=group, reason="rejected") == 0
    _enable(bootstrap, dead)
    produce(bootstrap, topic, 1, start=2)
    _reject(bootstrap, group, topic, {2})
    assert [m.value() for m in _dead_letters(bootstrap, dead, 1)] == [b"v2"]
    assert watermarks(bootstrap, dead) == (0, 1)


def test_a_name_without_the_prefix_gets_no_dead_letters(share_broker: Any) -> None:
    """A dead-letter topic named without ``dlq.`` is neither created nor written to, and the
    rejected records are archived; an existing one with the config is refused too."""
    bootstrap = share_broker.bootstrap
    missing, group = unique("orders-dead"), unique("g")
    topic = _source(bootstrap, group, missing, 2)
    _reject(bootstrap, group, topic, {0, 1})
    assert missing not in _topics(bootstrap)
    existing, group = unique("orders-dead"), unique("g")
    create_dead_letter_topic(bootstrap, existing)
    topic = _source(bootstrap, group, existing, 1)
    _reject(bootstrap, group, topic, {0})
    assert watermarks(bootstrap, existing) == (0, 0)


def test_a_dead_letter_topic_created_by_the_broker_has_the_config(share_broker: Any) -> None:
    bootstrap, group = share_broker.bootstrap, unique("g")
    dead = f"dlq.{unique('auto')}"
    topic = _source(bootstrap, group, dead, 1)
    _reject(bootstrap, group, topic, {0})
    assert [m.value() for m in _dead_letters(bootstrap, dead, 1)] == [b"v0"]
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, dead)
    described = admin.describe_configs([resource])[resource].result(15)
    assert (described[ENABLE].value, described[ENABLE].source) == \
        ("true", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


def test_the_broker_prefix_setting(broker_factory: Any) -> None:
    """``errors.deadletterqueue.topic.name.prefix`` set to ``dead.``: a ``dead.`` topic takes
    the letters, a ``dlq.`` one no longer does."""
    broker = broker_factory(env={**SHARE_ENV,
                                 "BMQ_ERRORS_DEADLETTERQUEUE_TOPIC_NAME_PREFIX": "dead."})
    bootstrap = broker.bootstrap
    ours, group = f"dead.{unique('p')}", unique("g")
    topic = _source(bootstrap, group, ours, 1)
    _reject(bootstrap, group, topic, {0})
    assert [m.value() for m in _dead_letters(bootstrap, ours, 1)] == [b"v0"]
    default, group = f"dlq.{unique('p')}", unique("g")
    topic = _source(bootstrap, group, default, 1)
    _reject(bootstrap, group, topic, {0})
    assert default not in _topics(bootstrap)
