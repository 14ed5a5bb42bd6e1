"""Topic-level configs: names, types, broker-wide defaults, validation, and the LogConfig they make.

Only configs BMQ honours are accepted; anything else is INVALID_CONFIG, so a user never believes a
setting took effect when it did not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from bmq.config import Config
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage import LogConfig


class ConfigType(IntEnum):
    """DescribeConfigs v3+ config_type values."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    LIST = 7


class ConfigSource(IntEnum):
    """DescribeConfigs config_source values."""

    TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ResourceType(IntEnum):
    TOPIC = 2
    BROKER = 4


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    broker_default: Callable[[Config], str]
    validate: Callable[[str], bool]
    doc: str


def _is_int(low: int, high: int = 2**63 - 1) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return low <= int(value) <= high
        except ValueError:
            return False

    return check


def _one_of(*choices: str) -> Callable[[str], bool]:
    return lambda value: value in choices


INT32_MAX = 2**31 - 1

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef("cleanup.policy", ConfigType.LIST, lambda c: "delete", _one_of("delete"),
                       "Only 'delete' (retention by time and size) is supported."),
        TopicConfigDef("compression.type", ConfigType.STRING, lambda c: "producer",
                       _one_of("producer"),
                       "Batches are stored as the producer compressed them."),
        TopicConfigDef("max.message.bytes", ConfigType.INT,
                       lambda c: str(c.message_max_bytes), _is_int(0, INT32_MAX),
                       "Largest record batch accepted, in bytes."),
        TopicConfigDef("message.timestamp.type", ConfigType.STRING,
                       lambda c: c.log_message_timestamp_type,
                       _one_of("CreateTime", "LogAppendTime"),
                       "CreateTime keeps producers' timestamps; LogAppendTime stamps the broker."),
        TopicConfigDef("retention.ms", ConfigType.LONG, lambda c: str(c.log_retention_ms),
                       _is_int(-1), "Age after which whole segments are deleted; -1 keeps all."),
        TopicConfigDef("retention.bytes", ConfigType.LONG, lambda c: str(c.log_retention_bytes),
                       _is_int(-1), "Size per partition above which old segments are deleted."),
        TopicConfigDef("segment.bytes", ConfigType.INT, lambda c: str(c.log_segment_bytes),
                       _is_int(4096, INT32_MAX), "Segment file size that triggers a roll."),
        TopicConfigDef("segment.ms", ConfigType.LONG, lambda c: str(c.log_roll_ms),
                       _is_int(1), "Segment age that triggers a roll."),
        TopicConfigDef("index.interval.bytes", ConfigType.INT,
                       lambda c: str(c.log_index_interval_bytes), _is_int(0, INT32_MAX),
                       "Bytes between offset index entries."),
        TopicConfigDef("min.insync.replicas", ConfigType.INT, lambda c: "1", _is_int(1, 1),
                       "Storage provides durability; BMQ keeps one logical replica."),
    )
}


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check names and values of configs set on a topic; None values mean 'unset'."""
    result: dict[str, str] = {}
    for name, value in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown or unsupported config {name}")
        if value is None:
            continue
        if not definition.validate(value):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for config {name}")
        result[name] = value
    return result


def effective_topic_configs(broker: Config,
                            overrides: Mapping[str, str]) -> dict[str, tuple[str, ConfigSource]]:
    """Every topic config with its value and where the value comes from."""
    return {
        name: (overrides[name], ConfigSource.TOPIC_CONFIG) if name in overrides
        else (d.broker_default(broker), ConfigSource.DEFAULT_CONFIG)
        for name, d in TOPIC_CONFIGS.items()
    }


def log_config(broker: Config, overrides: Mapping[str, str]) -> LogConfig:
    effective = effective_topic_configs(broker, overrides)
    values = {name: value for name, (value, _) in effective.items()}
    return LogConfig(
        segment_bytes=int(values["segment.bytes"]),
        segment_ms=int(values["segment.ms"]),
        retention_ms=int(values["retention.ms"]),
        retention_bytes=int(values["retention.bytes"]),
        index_interval_bytes=int(values["index.interval.bytes"]),
        max_message_bytes=int(values["max.message.bytes"]),
        message_timestamp_type=values["message.timestamp.type"],
    )
