"""Which source topics are mirrored, and their target topics kept in step with them.

Each metadata round looks at the source's topics that the settings select: a topic missing on
the target is created there with the source's partition count and topic configs, marked as a
mirror of this source (``bmq.mirror.source``); a marked one gets the source's new partitions
and config changes. A target topic of that name that is not marked so (an unrelated topic, or
one promoted since) is never written: it is reported and left alone; so is a source topic that
is a mirror itself (two clusters mirroring into each other do not send a topic back where it
came from).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from bmq.metadata.mirrors import MIRROR_SOURCE
from bmq.metadata.views import VIEW_SOURCE
from bmq.mirror.cluster import Cluster
from bmq.mirror.settings import MirrorSettings
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from bmq.protocol.messages.create_partitions_request import CreatePartitionsTopic
from bmq.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig
from bmq.protocol.messages.describe_configs_request import DescribeConfigsResource
from bmq.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)

log = logging.getLogger(__name__)

TOPIC_RESOURCE = 2
DYNAMIC_TOPIC_CONFIG = 1         # DescribeConfigs' config_source of a topic's own setting
SET, DELETE = 0, 1               # IncrementalAlterConfigs' operations
DESCRIBE_CONFIGS_VERSION = 4
CREATE_TOPICS_VERSION = 5
CREATE_PARTITIONS_VERSION = 3
ALTER_CONFIGS_VERSION = 1
# Configs the target's topic keeps whatever the source's says: its mark; CreateTime, as the
# batches keep the timestamps (LogAppendTime ones included) they have on the source, which a
# LogAppendTime topic would stamp anew; no scheduled delivery, which would hold batches back.
OWN_CONFIGS = {MIRROR_SOURCE: None, "message.timestamp.type": "CreateTime",
               "bmq.delay.enable": None}


@dataclass
class TopicRound:
    """What one metadata round found: the mirrored topics (name -> the source's partition
    count) and the selected topics that are not mirrored, with why."""

    mirrored: dict[str, int] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


async def describe_configs(cluster: Cluster, topics: list[str]) -> dict[str, dict[str, str]]:
    """Each topic's own configs (those set on it, not defaults), by name."""
    if not topics:
        return {}
    response = await cluster.ask_any(DescribeConfigsRequest(resources=[
        DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=name,
                                configuration_keys=None) for name in topics]),
        DESCRIBE_CONFIGS_VERSION)
    return {result.resource_name: {config.name: config.value or "" for config in result.configs
                                   if config.config_source == DYNAMIC_TOPIC_CONFIG}
            for result in response.results if result.error_code == ErrorCode.NONE}


def copied_configs(source: dict[str, str]) -> dict[str, str]:
    """The source topic's configs that its mirror takes."""
    return {name: value for name, value in source.items() if name not in OWN_CONFIGS}


async def sync_topics(settings: MirrorSettings, source: Cluster, target: Cluster) -> TopicRound:
    """One metadata round (see the module's doc); LinkError if a cluster does not answer."""
    await source.metadata.refresh()
    await target.metadata.refresh()
    found = TopicRound()
    selected = sorted(name for name, info in source.metadata.topics.items()
                      if info.error == ErrorCode.NONE and settings.topic_selected(name))
    at_source = await describe_configs(source, selected)
    existing = [name for name in selected if name in target.metadata.topics]
    at_target = await describe_configs(target, existing)
    to_create: list[CreatableTopic] = []
    for name in selected:
        configs = at_source.get(name)
        if configs is None:
            continue            # its configs could not be read this round
        if VIEW_SOURCE in configs:
            found.refused[name] = f"a view of {configs[VIEW_SOURCE]}: mirror that topic"
            continue
        if configs.get(MIRROR_SOURCE):
            # Two clusters mirroring into each other never loop: a topic is mirrored from
            # its origin only, never from another mirror of it.
            found.refused[name] = (f"the source's {name} is itself a mirror of "
                                   f"{configs[MIRROR_SOURCE]}: mirror it from there")
            continue
        partitions = len(source.metadata.topics[name].partitions)
        wanted = copied_configs(configs)
        if name not in target.metadata.topics:
            to_create.append(CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=-1,
                configs=[CreatableTopicConfig(name=key, value=value) for key, value in {
                    **wanted, MIRROR_SOURCE: settings.name,
                    "message.timestamp.type": "CreateTime"}.items()]))
            found.mirrored[name] = partitions
            continue
        mark = at_target.get(name, {}).get(MIRROR_SOURCE)
        if mark != settings.name:
            found.refused[name] = (f"the target's {name} is a mirror of {mark}" if mark else
                                   f"the target's {name} is not a mirror (promoted, or "
                                   f"another topic of that name)")
            continue
        found.mirrored[name] = partitions
        if len(target.metadata.topics[name].partitions) < partitions:
            await _add_partitions(target, name, partitions)
        await _follow_configs(target, name, wanted, copied_configs(at_target[name]))
    if to_create:
        response = await target.ask_any(CreateTopicsRequest(topics=to_create),
                                        CREATE_TOPICS_VERSION)
        for result in response.topics:
            if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                found.mirrored.pop(result.name, None)
                found.refused[result.name] = (f"creating it on the target failed: "
                                              f"{ErrorCode(result.error_code).name} "
                                              f"{result.error_message or ''}")
            elif result.error_code == ErrorCode.NONE:
                log.info("mirror topic %s created (%d partitions)", result.name,
                         result.num_partitions)
    return found


async def _add_partitions(target: Cluster, name: str, count: int) -> None:
    response = await target.ask_any(CreatePartitionsRequest(
        topics=[CreatePartitionsTopic(name=name, count=count, assignments=None)],
        timeout_ms=30_000), CREATE_PARTITIONS_VERSION)
    error = response.results[0].error_code
    if error == ErrorCode.NONE:
        log.info("mirror topic %s now has %d partitions, as on the source", name, count)
    else:
        log.warning("mirror topic %s: adding partitions up to %d failed: %s", name, count,
                    ErrorCode(error).name)


async def _follow_configs(target: Cluster, name: str, wanted: dict[str, str],
                          have: dict[str, str]) -> None:
    """Set and delete the target topic's configs that differ from the source's."""
    changes = [AlterableConfig(name=key, config_operation=SET, value=value)
               for key, value in wanted.items() if have.get(key) != value]
    changes += [AlterableConfig(name=key, config_operation=DELETE, value=None)
                for key in have if key not in wanted]
    if not changes:
        return
    response = await target.ask_any(IncrementalAlterConfigsRequest(resources=[
        AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=name,
                             configs=changes)]), ALTER_CONFIGS_VERSION)
    error = response.responses[0].error_code
    if error == ErrorCode.NONE:
        log.info("mirror topic %s: configs follow the source's (%s)", name,
                 ", ".join(change.name for change in changes))
    else:
        log.warning("mirror topic %s: following the source's configs failed: %s", name,
                    ErrorCode(error).name)


async def promote_topics(target: Cluster, topics: list[str]) -> dict[str, str]:
    """Make mirrored topics of the target ordinary, writable ones (failover): their mark is
    deleted, so the mirror leaves them alone and produces are taken. Returns the topics not
    promoted, with why."""
    marks = await describe_configs(target, topics)
    refused = {topic: "no such topic" if topic not in marks else "not a mirror"
               for topic in topics if not marks.get(topic, {}).get(MIRROR_SOURCE)}
    marked = [topic for topic in topics if topic not in refused]
    if marked:
        response = await target.ask_any(IncrementalAlterConfigsRequest(resources=[
            AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=topic, configs=[
                AlterableConfig(name=MIRROR_SOURCE, config_operation=DELETE, value=None)])
            for topic in marked]), ALTER_CONFIGS_VERSION)
        for result in response.responses:
            if result.error_code != ErrorCode.NONE:
                refused[result.resource_name] = (
                    f"{ErrorCode(result.error_code).name} {result.error_message or ''}")
    return refused
