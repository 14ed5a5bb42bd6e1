"""What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: resources and entries."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from bmq.broker.broker import Broker
from bmq.broker.dynamic_config import DOCUMENTATION as DYNAMIC_DOCUMENTATION
from bmq.broker.dynamic_config import DYNAMIC_CONFIGS, check_change
from bmq.broker.group_config import GROUP_CONFIGS, check_group_configs, group_config_defaults
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
from bmq.metadata.broker_configs import CLUSTER_DEFAULT
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


# Read-only, on brokers: the controller the broker follows (ClusterMembership).
CONTROLLER_CONFIG = "bmq.controller"


def broker_entries(broker: Broker, resource: str) -> list[ConfigEntry]:
    """The broker's settings under Kafka's names where Kafka has one (BMQ's own names for the
    rest), read-only: they come from flags, the environment and the TOML file; over them the
    dynamic configs set for this broker or the cluster (dynamic_config.py). ``resource`` is
    this broker's id, or CLUSTER_DEFAULT: then, as Kafka describes the cluster-wide default,
    only the configs set there, with that source (a broker's own value is no synonym of it)."""
    config, defaults = broker.config, Config()
    entries = [_broker_entry(config, defaults, f.name, kafka_name(f.name))
               for f in dataclasses.fields(config)]
    entries += [_broker_entry(config, defaults, KAFKA_ALIASES[alias], alias)
                for alias in DESCRIBED_ALIASES]
    if resource != CLUSTER_DEFAULT:
        entries.append(ConfigEntry(
            CONTROLLER_CONFIG, broker.membership.controller_description(),
            ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigType.STRING, True,
            "BMQ: the controller this broker follows (a bmq controller is no Kafka node: "
            "Metadata and DescribeCluster cannot name it).", []))
    store = broker.dynamic_configs
    if store is None:
        return [] if resource == CLUSTER_DEFAULT else entries
    layers = [(store.of(CLUSTER_DEFAULT), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    if resource != CLUSTER_DEFAULT:
        layers.insert(0, (store.of(resource), ConfigSource.DYNAMIC_BROKER_CONFIG))
    by_name = {entry.name: entry for entry in entries}
    for name, (_mode, kind) in DYNAMIC_CONFIGS.items():
        dynamic = [(name, values[name], source) for values, source in layers if name in values]
        static = by_name.get(name)
        if not dynamic and static is None:
            continue
        synonyms = dynamic + (static.synonyms if static is not None else [])
        _, value, source = synonyms[0] if synonyms else (name, "", ConfigSource.DEFAULT_CONFIG)
        by_name[name] = ConfigEntry(name, value, source, kind, False,
                                    DYNAMIC_DOCUMENTATION, synonyms)
    if resource == CLUSTER_DEFAULT:
        return [entry for entry in by_name.values()
                if entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    return list(by_name.values())


def topic_entries(broker: Broker, info: TopicInfo) -> list[ConfigEntry]:
    entries = []
    for name, definition in TOPIC_CONFIGS.items():
        described = describe_topic_config(broker.config, definition, info.configs)
        entries.append(ConfigEntry(name, described.value, described.source, definition.type,
                                   False, definition.doc, described.synonyms))
    return entries


# Read-only, on topics with scheduled delivery: records held per partition ("0:12,1:0").
PENDING_CONFIG = "bmq.delay.pending"


async def pending_entry(broker: Broker, info: TopicInfo) -> ConfigEntry:
    """Scheduled records not delivered yet, per partition (its owner's count: live here,
    else as it last wrote it on storage)."""
    counts = await asyncio.get_running_loop().run_in_executor(
        None, broker.timers.pending, info.name, info.partitions)
    value = ",".join(f"{index}:{count}" for index, count in sorted(counts.items()))
    return ConfigEntry(PENDING_CONFIG, value, ConfigSource.DYNAMIC_BROKER_CONFIG,
                       ConfigType.STRING, True, "BMQ: scheduled records held, per partition "
                       "(partition:count), not delivered yet.", [])


# Read-only, on topics with scheduled delivery: records held per partition this broker owns,
# by due time ("0:1/0/2/0/5,1:..."): due within the first of DUE_AHEAD_MS (or overdue),
# between each and the next, and later.
PENDING_DUE_CONFIG = "bmq.delay.pending.due"
DUE_AHEAD_MS = [60_000, 600_000, 3_600_000, 86_400_000]


async def pending_due_entry(broker: Broker, info: TopicInfo) -> ConfigEntry:
    counts = await broker.timers.pending_by_due(info.name, info.partitions, DUE_AHEAD_MS)
    value = ",".join(f"{index}:{'/'.join(map(str, by_due))}"
                     for index, by_due in sorted(counts.items()))
    return ConfigEntry(PENDING_DUE_CONFIG, value, ConfigSource.DYNAMIC_BROKER_CONFIG,
                       ConfigType.STRING, True, "BMQ: scheduled records held, per partition "
                       "this broker owns, by due time (partition:within 1 min/1-10 min/10 "
                       "min-1 h/1 h-1 day/later).", [])


def group_entries(broker: Broker, group: str) -> list[ConfigEntry]:
    """Every group config, the group's own value (GROUP_CONFIG) or the default."""
    store = broker.group_configs
    own = store.of(group) if store is not None else {}
    defaults = group_config_defaults(broker.config)
    entries = []
    for name, definition in GROUP_CONFIGS.items():
        default = [(name, defaults[name], ConfigSource.DEFAULT_CONFIG)]
        synonyms = ([(name, own[name], ConfigSource.GROUP_CONFIG)] if name in own else []) \
            + default
        _, value, source = synonyms[0]
        entries.append(ConfigEntry(name, value, source, definition.type, False,
                                   definition.doc, synonyms))
    return entries


async def alter_group_configs(ctx: RequestContext, group: str,
                              edit: Callable[[dict[str, str]], None],
                              validate_only: bool) -> None:
    """Change one group's configs by ``edit`` (ALTER_CONFIGS on the group), checked as Kafka
    checks them, saved unless validate_only."""
    ctx.require(Operation.ALTER_CONFIGS, AclResource.GROUP, group)
    store = ctx.broker.group_configs
    if store is None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "This broker keeps no group configs")
    if not group:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "A group config needs a group id")

    def change(configs: dict[str, str]) -> None:
        edit(configs)
        check_group_configs(configs)

    if validate_only:
        change(store.of(group))
        return
    await asyncio.get_running_loop().run_in_executor(None, store.change, group, change)


async def find_topic(ctx: RequestContext, resource_type: int,
                     resource_name: str) -> TopicInfo:
    """The topic an alter request targets (ALTER_CONFIGS on it)."""
    broker = ctx.broker
    if resource_type != ResourceType.TOPIC:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")
    ctx.require(Operation.ALTER_CONFIGS, AclResource.TOPIC, resource_name)
    info = await broker.lookup_topic(resource_name)
    if info is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"Topic {resource_name} does not exist")
    return info


async def alter_broker_configs(ctx: RequestContext, resource_name: str,
                               edit: Callable[[dict[str, str]], None],
                               validate_only: bool) -> None:
    """Change the dynamic configs of one broker (its id) or of the cluster ("") by ``edit``
    (ALTER_CONFIGS on the cluster), checked as Kafka checks them, saved unless validate_only."""
    ctx.require(Operation.ALTER_CONFIGS, AclResource.CLUSTER, CLUSTER_NAME)
    store = ctx.broker.dynamic_configs
    if store is None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "This broker keeps no dynamic configs")
    if resource_name != CLUSTER_DEFAULT and not resource_name.isdigit():
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid broker id {resource_name!r}")

    def change(configs: dict[str, str]) -> None:
        edit(configs)
        check_change(resource_name, configs)

    if validate_only:
        change(store.of(resource_name))
        return
    await asyncio.get_running_loop().run_in_executor(None, store.change, resource_name, change)
