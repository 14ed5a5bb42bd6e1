"""What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: resources and entries."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from bmq.broker.broker import Broker
from bmq.broker.handlers.base import RequestContext
from bmq.broker.topic_config import (
    TOPIC_CONFIGS,
    ConfigSource,
    ConfigType,
    ResourceType,
    describe_topic_config,
)
from bmq.config import (
    DESCRIBED_ALIASES,
    KAFKA_ALIASES,
    Config,
    accepted_names,
    described_value,
    env_name,
    kafka_name,
)
from bmq.metadata.acls import CLUSTER_NAME, Operation
from bmq.metadata.acls import ResourceType as AclResource
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
    # (name, value, source), the one in force first: what DescribeConfigs v1+ lists as synonyms.
    synonyms: list[tuple[str, str, ConfigSource]]


def _broker_entry(config: Config, defaults: Config, field_name: str, shown: str) -> ConfigEntry:
    value = getattr(config, field_name)
    kind = {bool: ConfigType.BOOLEAN, int: ConfigType.LONG}.get(type(value), ConfigType.STRING)
    text, default = described_value(config, field_name), described_value(defaults, field_name)
    synonyms = []
    # By value, so listeners set through BMQ's listen shorthand count as set too.
    if text != default:
        synonyms.append((shown, text, ConfigSource.STATIC_BROKER_CONFIG))
    if default != "":  # Kafka lists no default synonym for a config without a default
        synonyms.append((shown, default, ConfigSource.DEFAULT_CONFIG))
    source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
    names = ", ".join(f"{n} ({env_name(n)})" for n in accepted_names(field_name))
    return ConfigEntry(shown, text, source, kind, True,
                       f"BMQ broker setting, read-only here; set as {names} or a flag.", synonyms)


def broker_entries(broker: Broker) -> list[ConfigEntry]:
    """The broker's settings under Kafka's names where Kafka has one (BMQ's own names for the
    rest), read-only: they come from flags, the environment and the TOML file."""
    config, defaults = broker.config, Config()
    entries = [_broker_entry(config, defaults, f.name, kafka_name(f.name))
               for f in dataclasses.fields(config)]
    entries += [_broker_entry(config, defaults, KAFKA_ALIASES[alias], alias)
                for alias in DESCRIBED_ALIASES]
    return entries


def topic_entries(broker: Broker, info: TopicInfo) -> list[ConfigEntry]:
    entries = []
    for name, definition in TOPIC_CONFIGS.items():
        described = describe_topic_config(broker.config, definition, info.configs)
        entries.append(ConfigEntry(name, described.value, described.source, definition.type,
                                   False, definition.doc, described.synonyms))
    return entries


async def find_topic(ctx: RequestContext, resource_type: int,
                     resource_name: str) -> TopicInfo:
    """The topic an alter request targets (ALTER_CONFIGS on it, or on the cluster for a
    broker); broker resources are static in BMQ."""
    broker = ctx.broker
    if resource_type == ResourceType.BROKER:
        ctx.require(Operation.ALTER_CONFIGS, AclResource.CLUSTER, CLUSTER_NAME)
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         "Broker configs are static in BMQ: set them in the TOML file, "
                         "BMQ_* variables or flags and restart.")
    if resource_type != ResourceType.TOPIC:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")
    ctx.require(Operation.ALTER_CONFIGS, AclResource.TOPIC, resource_name)
    info = await broker.lookup_topic(resource_name)
    if info is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"Topic {resource_name} does not exist")
    return info
