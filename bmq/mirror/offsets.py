"""Consumer groups' committed offsets, copied from the source's coordinators to the target's,
so a group that moves to the target resumes where it was.

An offset is copied only once the target has the data before it (the partition mirrored at
least that far), so a group never points past what the target holds; only for partitions
still mirrored, as the target says right before the commit (after a promotion the group's
offsets on the target are its own); and never back (a group that moved to the target and went
on there keeps its offsets, whatever it left on the source). The copy is
a commit of a group with no members (generation -1), which the target refuses while the group
is active there: a group is run on one cluster at a time.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from bmq.metadata.mirrors import MIRROR_SOURCE
from bmq.mirror.cluster import Cluster
from bmq.mirror.copier import Copier
from bmq.mirror.settings import MirrorSettings
from bmq.mirror.topics import describe_configs
from bmq.net.client import LinkError
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest
from bmq.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from bmq.protocol.messages.offset_fetch_request import OffsetFetchRequestGroup

log = logging.getLogger(__name__)

OFFSET_FETCH_VERSION = 8        # groups batched; topics by name (v10 has ids)
OFFSET_COMMIT_VERSION = 8
LIST_GROUPS_VERSION = 4

Committed = dict[tuple[str, int], tuple[int, str | None]]   # (offset, metadata)


class GroupOffsets:
    def __init__(self, settings: MirrorSettings, source: Cluster, target: Cluster,
                 copier: Copier) -> None:
        self.settings = settings
        self.source = source
        self.target = target
        self.copier = copier
        self._copied: dict[str, Committed] = defaultdict(dict)
        self.errors: dict[str, str] = {}      # group -> why its offsets are not copied now

    async def copy(self) -> None:
        """One round over the selected groups; LinkError if the source does not answer."""
        for group in await self._groups():
            try:
                await self._copy_group(group)
                self.errors.pop(group, None)
            except (KafkaError, LinkError, OSError, TimeoutError) as error:
                why = str(error) or type(error).__name__
                if self.errors.get(group) != why:
                    log.warning("offsets of group %s not copied: %s", group, why)
                self.errors[group] = why

    async def _groups(self) -> list[str]:
        groups = set(self.settings.groups)
        if self.settings.groups_regex:
            await self.source.metadata.fresh()
            for address in self.source.metadata.brokers.values():    # each lists its own
                response = await self.source.ask(address, ListGroupsRequest(),
                                                 LIST_GROUPS_VERSION)
                groups.update(listed.group_id for listed in response.groups
                              if self.settings.group_selected(listed.group_id))
        return sorted(groups)

    async def _copy_group(self, group: str) -> None:
        copied = self._copied[group]
        due: Committed = {}
        for key, (offset, metadata) in (await _committed(self.source, group)).items():
            progress = self.copier.partitions.get(key)
            if progress is not None and progress.mirrored_to >= offset and \
                    copied.get(key, (None,))[0] != offset:
                due[key] = (offset, metadata)
        if not due:
            return
        # Never back: a group that moved to the target and went on there keeps its offsets
        # (also when a mirror started again, which has copied nothing yet, copies them all).
        on_target = await _committed(self.target, group)
        due = {key: committed for key, committed in due.items()
               if key not in on_target or on_target[key][0] <= committed[0]}
        # Still mirrors now: a topic promoted since the last metadata round is the group's
        # own on the target (it may have committed there already).
        marks = await describe_configs(self.target, sorted({topic for topic, _ in due}))
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = defaultdict(list)
        for (topic_name, index), (offset, metadata) in due.items():
            if marks.get(topic_name, {}).get(MIRROR_SOURCE) != self.settings.name:
                continue
            # No leader epoch: the source's epochs are not the target's.
            by_topic[topic_name].append(OffsetCommitRequestPartition(
                partition_index=index, committed_offset=offset, committed_leader_epoch=-1,
                committed_metadata=metadata))
        if not by_topic:
            return
        response = await self.target.ask_coordinator(group, OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="",
            topics=[OffsetCommitRequestTopic(name=name, partitions=parts)
                    for name, parts in by_topic.items()]), OFFSET_COMMIT_VERSION)
        for topic in response.topics:
            for result in topic.partitions:
                key = (topic.name, result.partition_index)
                if result.error_code == ErrorCode.NONE and key in due:
                    copied[key] = due[key]
                elif result.error_code != ErrorCode.NONE:
                    self.target.coordinator_moved(group, result.error_code)
                    raise KafkaError(ErrorCode(result.error_code),
                                     f"OffsetCommit of {key[0]}-{key[1]} on the target")


async def _committed(cluster: Cluster, group: str) -> Committed:
    """The group's committed offsets on ``cluster``, by partition."""
    fetched = await cluster.ask_coordinator(group, OffsetFetchRequest(
        groups=[OffsetFetchRequestGroup(group_id=group, topics=None)]), OFFSET_FETCH_VERSION)
    answer = fetched.groups[0]
    cluster.coordinator_moved(group, answer.error_code)
    if answer.error_code != ErrorCode.NONE:
        raise KafkaError(ErrorCode(answer.error_code), f"OffsetFetch on {cluster.bootstrap}")
    return {(topic.name, partition.partition_index): (partition.committed_offset,
                                                      partition.metadata)
            for topic in answer.topics for partition in topic.partitions
            if partition.committed_offset >= 0 and partition.error_code == ErrorCode.NONE}
