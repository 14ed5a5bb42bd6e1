"""What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: resources and entries."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from bmq.broker.broker import Broker
from bmq.broker.topic_config import TOPIC_CONFIGS, ConfigSource, ConfigType, ResourceType
from bmq.metadata.topics import TopicInfo
from bmq.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str
    source: ConfigSource
    type: ConfigType
    read_only: bool
    documentation: str


def _kafka_name(field_name: str) -> str:
    return field_name.replace("_", ".")


def broker_entries(broker: Broker) -> list[ConfigEntry]:
    """The broker's own settings, read-only: they come from flags, env and the TOML file."""
    entries = []
    for f in dataclasses.fields(broker.config):
        value = getattr(broker.config, f.name)
        kind = {bool: ConfigType.BOOLEAN, int: ConfigType.LONG}.get(type(value), ConfigType.STRING)
        text = str(value).lower() if isinstance(value, bool) else str(value)
        source = (ConfigSource.DEFAULT_CONFIG if f.default == value
                  else ConfigSource.STATIC_BROKER_CONFIG)
        entries.append(ConfigEntry(_kafka_name(f.name), text, source, kind, True,
                                   f"BMQ setting {f.name} (BMQ_{f.name.upper()})"))
    return entries


def topic_entries(broker: Broker, info: TopicInfo) -> list[ConfigEntry]:
    entries = []
    for name, definition in TOPIC_CONFIGS.items():
        if name in info.configs:
            value, source = info.configs[name], ConfigSource.TOPIC_CONFIG
        else:
            value, source = definition.broker_default(broker.config), ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, definition.type, False, definition.doc))
    return entries


async def find_topic(broker: Broker, resource_type: int, resource_name: str) -> TopicInfo:
    """The topic an alter request targets; broker resources are static in BMQ."""
    if resource_type == ResourceType.BROKER:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         "Broker configs are static in BMQ: set them in the TOML file, "
                         "BMQ_* variables or flags and restart.")
    if resource_type != ResourceType.TOPIC:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")
    info = await broker.lookup_topic(resource_name)
    if info is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"Topic {resource_name} does not exist")
    return info
