"""Topic configs: Kafka's validation, the LogConfig they make, and where a value comes from."""

import pytest

from bmq.broker.topic_config import (
    TOPIC_CONFIGS,
    ConfigSource,
    describe_topic_config,
    log_config,
    validate_topic_configs,
)
from bmq.config import Config
from bmq.protocol.errors import ErrorCode, KafkaError


@pytest.mark.parametrize(("name", "value"), [
    ("cleanup.policy", "compact,delete"), ("compression.type", "zstd"),
    ("compression.gzip.level", "-1"), ("min.cleanable.dirty.ratio", "0.9"),
    ("leader.replication.throttled.replicas", "0:1,1:2"), ("message.format.version", "0.10.0.0"),
    ("local.retention.ms", "-2"), ("preallocate", "TRUE"),
])
def test_kafka_values_are_accepted(name: str, value: str) -> None:
    assert validate_topic_configs({name: value}) == {name: value}


@pytest.mark.parametrize(("name", "value"), [
    ("cleanup.policy", ""), ("cleanup.policy", "compact,shred"), ("compression.lz4.level", "18"),
    ("min.cleanable.dirty.ratio", "1.5"), ("follower.replication.throttled.replicas", "x"),
    ("message.format.version", "new"), ("local.retention.bytes", "-3"), ("no.such", "1"),
])
def test_values_kafka_refuses_are_invalid_config(name: str, value: str) -> None:
    with pytest.raises(KafkaError) as refused:
        validate_topic_configs({name: value})
    assert refused.value.code == ErrorCode.INVALID_CONFIG


def test_compaction_keeps_everything_unless_delete_is_asked_too() -> None:
    broker = Config(log_retention_ms=1000, log_retention_bytes=10)
    compact = log_config(broker, {"cleanup.policy": "compact"})
    assert compact.compact and (compact.retention_ms, compact.retention_bytes) == (-1, -1)
    both = log_config(broker, {"cleanup.policy": "compact,delete"})
    assert both.compact and (both.retention_ms, both.retention_bytes) == (1000, 10)
    assert not log_config(broker, {}).compact


def test_compression_settings_reach_the_log_config() -> None:
    config = log_config(Config(), {"compression.type": "gzip", "compression.gzip.level": "9",
                                   "compression.zstd.level": "5"})
    assert (config.compression_type, config.compression_level) == ("gzip", 9)
    assert log_config(Config(compression_type="lz4"), {}).compression_type == "lz4"
    assert log_config(Config(), {}).compression_type == "producer"


def test_sources_as_kafka_reports_them() -> None:
    retention = TOPIC_CONFIGS["retention.ms"]
    default = describe_topic_config(Config(), retention, {})
    assert default.source == ConfigSource.DEFAULT_CONFIG and default.value == "604800000"
    static = describe_topic_config(Config(log_retention_ms=5), retention, {})
    assert static.source == ConfigSource.STATIC_BROKER_CONFIG and static.value == "5"
    topic = describe_topic_config(Config(log_retention_ms=5), retention, {"retention.ms": "7"})
    assert topic.value == "7"
    assert [(n, v, s) for n, v, s in topic.synonyms] == [
        ("retention.ms", "7", ConfigSource.TOPIC_CONFIG),
        ("log.retention.ms", "5", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG)]
    stored = describe_topic_config(Config(), TOPIC_CONFIGS["delete.retention.ms"], {})
    assert stored.value == "86400000"
    assert stored.synonyms == [("log.cleaner.delete.retention.ms", "86400000",
                                ConfigSource.DEFAULT_CONFIG)]
