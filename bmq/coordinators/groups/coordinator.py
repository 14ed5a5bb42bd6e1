"""The group coordinator: Kafka's classic rebalance protocol and committed offsets, on the
``__consumer_offsets`` partitions this broker owns.

The parts: ``core`` (shards, lookup, session timers), ``rebalance`` (rebalances, SyncGroup,
Heartbeat, LeaveGroup), ``join`` (JoinGroup), ``offsets`` (commits, fetches, deletes, expiry),
``consumer_protocol`` (KIP-848's ConsumerGroupHeartbeat); this module adds the admin requests
(DescribeGroups, ListGroups, DeleteGroups), which answer for groups of both protocols.

Durability: group metadata (after each completed rebalance) and offset commits are appended to the
group's ``__consumer_offsets`` partition. OffsetCommit is answered once its batch is flushed;
commits become visible to OffsetFetch at that moment too, in log order.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from bmq.coordinators.groups.consumer_group import ConsumerGroup
from bmq.coordinators.groups.consumer_protocol import ConsumerGroupProtocol
from bmq.coordinators.groups.core import DEAD, STABLE
from bmq.coordinators.groups.group import CONSUMER_PROTOCOL_TYPE, GROUP_TYPE_CLASSIC
from bmq.coordinators.groups.join import JoinGroupProtocol
from bmq.coordinators.groups.records import Assignment
from bmq.coordinators.groups.shard import tombstones
from bmq.coordinators.groups.txn_offsets import TxnOffsetStore
from bmq.coordinators.sharded import Appended
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ConsumerProtocolAssignment
from bmq.protocol.messages.consumer_protocol_assignment import TopicPartition
from bmq.protocol.primitives import Writer
from bmq.writepath.partitions import now_ms

log = logging.getLogger(__name__)


@dataclass(slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    members: list[MemberSummary] = field(default_factory=list)


@dataclass(slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = GROUP_TYPE_CLASSIC



class GroupCoordinator(JoinGroupProtocol, TxnOffsetStore, ConsumerGroupProtocol):
    """Every consumer group of the offsets partitions this broker owns."""

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        writes: list[tuple[str, Appended]] = []
        for group_id in group_ids:
            error = self.coordinator_error(group_id, allow_empty=True)
            group = self.group(group_id) if error == ErrorCode.NONE else None
            if error != ErrorCode.NONE:
                results[group_id] = error
            elif group is None or group.is_(DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_empty():
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                removed = group.remove_offsets(list(group.offsets))
                group.pending_commits.clear()
                group.transition_to(DEAD, now_ms())
                self._cancel_timers(group)
                del self._shard(group_id).groups[group_id]
                log.info("deleted group %s (%d offsets)", group_id, len(removed))
                writes.append((group_id, self._append(
                    group_id, tombstones(group_id, removed, group_too=True))))
        for group_id, appended in writes:
            results[group_id] = await self.durable(appended)
        return results

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary | None]:
        error = self.coordinator_error(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return error, None
        group = self.group(group_id)
        if group is None or group.is_(DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, None
        if group.consumer is not None:
            return ErrorCode.NONE, self._summarize_consumer_group(group.consumer)
        stable = group.is_(STABLE) and group.protocol_name is not None
        members = []
        for m in group.members.values():
            members.append(MemberSummary(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b""))
        return ErrorCode.NONE, GroupSummary(
            group_id, group.state.value, group.protocol_type or "",
            (group.protocol_name or "") if stable else "", members)

    def _summarize_consumer_group(self, cg: ConsumerGroup) -> GroupSummary:
        """A KIP-848 group as DescribeGroups shows it: the assignor as the protocol, each
        member's current partitions as a ConsumerProtocolAssignment."""
        members = [MemberSummary(m.member_id, m.instance_id, m.client_id, m.client_host, b"",
                                 self._encode_assignment(m.assigned))
                   for m in cg.members.values()]
        assignor = cg.assignor_name(self.assignors()) if cg.members else ""
        return GroupSummary(cg.group_id, cg.state, CONSUMER_PROTOCOL_TYPE, assignor, members)

    def _encode_assignment(self, assignment: Assignment) -> bytes:
        topics = []
        for topic_id, partitions in sorted(assignment.items()):
            info = self._host.topics.by_id(topic_id)
            if info is not None:
                topics.append(TopicPartition(topic=info.name, partitions=sorted(partitions)))
        w = Writer()
        w.write_int16(0)
        ConsumerProtocolAssignment(assigned_partitions=topics).write(w, 0)
        return w.getvalue()

    def list_groups(self, states: set[str] | None = None,
                    types: set[str] | None = None) -> tuple[ErrorCode, list[ListedGroup]]:
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        wanted_states = {s.lower() for s in states} if states else None
        wanted_types = {t.lower() for t in types} if types else None
        listed = []
        for shard in self.shards.values():
            for group in shard.groups.values():
                if group.is_(DEAD):
                    continue
                if wanted_states is not None and group.state_name.lower() not in wanted_states:
                    continue
                if wanted_types is not None and group.group_type not in wanted_types:
                    continue
                protocol_type = CONSUMER_PROTOCOL_TYPE if group.consumer is not None \
                    else group.protocol_type or ""
                listed.append(ListedGroup(group.group_id, protocol_type, group.state_name,
                                          group.group_type))
        listed.sort(key=lambda g: g.group_id)
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._loading else ErrorCode.NONE
        return error, listed
