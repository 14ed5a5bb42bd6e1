"""kafka-topics.sh and kafka-configs.sh (Kafka 4.4's TopicCommand and ConfigCommand) against
`bmq serve`: what an operator creates, lists, describes, alters and deletes, and the errors Kafka
gives for what cannot be done."""

from __future__ import annotations

import re

import pytest

from tests.conftest import make_topic_name
from tests.kafka_tools.tools import KafkaTools


def described_partitions(text: str) -> dict[int, str]:
    """kafka-topics --describe's partition lines: partition -> leader."""
    return {int(p): leader for p, leader in
            re.findall(r"Partition: (\d+)\tLeader: (\d+)", text)}


def dynamic_configs(text: str) -> dict[str, str]:
    """kafka-configs --describe's lines `  name=value sensitive=... synonyms={...}`."""
    return dict(re.findall(r"^  ([\w.]+)=(\S*) sensitive=", text, re.MULTILINE))


def test_a_topic_is_created_described_altered_and_deleted(kafka: KafkaTools) -> None:
    topic = make_topic_name("orders")
    created = kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "3",
                    "--replication-factor", "1", "--config", "retention.ms=3600000")
    assert f"Created topic {topic}." in created.out
    assert topic in kafka("kafka-topics", "--list").out.split()

    described = kafka("kafka-topics", "--describe", "--topic", topic).out
    assert re.search(rf"Topic: {topic}\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 1"
                     r"\tConfigs: retention.ms=3600000", described), described
    assert described_partitions(described) == {0: "0", 1: "0", 2: "0"}

    kafka("kafka-topics", "--alter", "--topic", topic, "--partitions", "5")
    assert sorted(described_partitions(
        kafka("kafka-topics", "--describe", "--topic", topic).out)) == [0, 1, 2, 3, 4]

    kafka("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
          "--add-config", "cleanup.policy=compact,max.message.bytes=20000",
          "--delete-config", "retention.ms")
    configs = kafka("kafka-configs", "--describe", "--entity-type", "topics",
                    "--entity-name", topic).out
    assert dynamic_configs(configs) == {"cleanup.policy": "compact",
                                        "max.message.bytes": "20000"}, configs
    # Every config with its default, and the broker setting it comes from.
    every = kafka("kafka-configs", "--describe", "--entity-type", "topics",
                  "--entity-name", topic, "--all").out
    assert "retention.ms=604800000 sensitive=false " \
           "synonyms={DEFAULT_CONFIG:log.retention.ms=604800000}" in every, every

    kafka("kafka-topics", "--delete", "--topic", topic)
    assert topic not in kafka("kafka-topics", "--list").out.split()


@pytest.mark.slow
def test_what_cannot_be_done_gets_kafkas_errors(kafka: KafkaTools) -> None:
    topic = make_topic_name("errors")
    kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "2")
    again = kafka("kafka-topics", "--create", "--topic", topic, check=False)
    assert again.code == 1 and f"Topic '{topic}' already exists." in again.out
    kafka("kafka-topics", "--create", "--topic", topic, "--if-not-exists")
    fewer = kafka("kafka-topics", "--alter", "--topic", topic, "--partitions", "1", check=False)
    assert fewer.code == 1 and "InvalidPartitionsException" in fewer.err
    missing = kafka("kafka-topics", "--describe", "--topic", "no-such-topic", check=False)
    assert missing.code == 1 and "does not exist" in missing.out
    bad_name = kafka("kafka-topics", "--create", "--topic", "bad name", check=False)
    assert bad_name.code == 1 and "InvalidTopicException" in bad_name.err
    bad_value = kafka("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name",
                      topic, "--add-config", "retention.ms=soon", check=False)
    assert bad_value.code == 1 and "InvalidConfigurationException" in bad_value.err
    unknown = kafka("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name",
                    topic, "--add-config", "no.such.config=1", check=False)
    assert unknown.code == 1 and "Unknown topic config name: no.such.config" in unknown.err


@pytest.mark.slow
def test_listing_and_describing_filters(kafka: KafkaTools) -> None:
    prefix = make_topic_name("filter")
    for suffix in ("a", "b"):
        kafka("kafka-topics", "--create", "--topic", f"{prefix}.{suffix}", "--partitions", "1")
    listed = kafka("kafka-topics", "--list").out.split()
    assert "__consumer_offsets" in listed
    assert "__consumer_offsets" not in kafka("kafka-topics", "--list",
                                             "--exclude-internal").out.split()
    # A regular expression names several topics at once, as in Kafka.
    described = kafka("kafka-topics", "--describe", "--topic", f"{prefix}\\..*").out
    assert described.count("PartitionCount: 1") == 2
    # Storage replicates: no partition is ever under-replicated or unavailable.
    assert kafka("kafka-topics", "--describe", "--under-replicated-partitions").out == ""
    assert kafka("kafka-topics", "--describe", "--unavailable-partitions").out == ""
    kafka("kafka-topics", "--delete", "--topic", f"{prefix}\\..*")
    assert not [t for t in kafka("kafka-topics", "--list").out.split() if t.startswith(prefix)]


@pytest.mark.slow
def test_broker_group_and_quota_configs(kafka: KafkaTools) -> None:
    kafka("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-default",
          "--add-config", "log.cleaner.threads=2")
    cluster = kafka("kafka-configs", "--describe", "--entity-type", "brokers",
                    "--entity-default").out
    assert "log.cleaner.threads=2 sensitive=false " \
           "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2}" in cluster, cluster
    kafka("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-default",
          "--delete-config", "log.cleaner.threads")
    assert "log.cleaner.threads" not in kafka("kafka-configs", "--describe", "--entity-type",
                                              "brokers", "--entity-default").out

    group = make_topic_name("group")
    kafka("kafka-configs", "--alter", "--entity-type", "groups", "--entity-name", group,
          "--add-config", "consumer.session.timeout.ms=50000,share.auto.offset.reset=earliest")
    assert dynamic_configs(kafka("kafka-configs", "--describe", "--entity-type", "groups",
                                 "--entity-name", group).out) == {
        "consumer.session.timeout.ms": "50000", "share.auto.offset.reset": "earliest"}

    kafka("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", "alice",
          "--add-config", "producer_byte_rate=1048576")
    assert "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0" in \
        kafka("kafka-configs", "--describe", "--entity-type", "users",
              "--entity-name", "alice").out
