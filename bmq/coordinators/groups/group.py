"""One consumer group's state: members, generation, protocol, committed offsets.

This module holds the data and the rules that need no clock or I/O (protocol selection, member
bookkeeping, which offsets have expired); ``coordinator.py`` drives the state machine with timers,
awaited futures and writes to the offsets log.

States and transitions (Kafka's classic group protocol)::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                 ▲   │ (no members left)                       │ leader's SyncGroup
      │                 │   └──────────────▶ Empty                   ▼ stored
      │                 └──── join / leave / expiry ──────────── Stable
    Dead: the group was deleted or expired and is gone from the coordinator.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from bmq.coordinators.groups.consumer_group import ConsumerGroup
from bmq.coordinators.groups.records import GroupValue, MemberValue, OffsetValue
from bmq.metadata.topics import TopicPartition
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ConsumerProtocolSubscription
from bmq.protocol.primitives import DecodeError, Reader, UnsupportedVersionError

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"
GROUP_TYPE_CLASSIC = "classic"
GROUP_TYPE_CONSUMER = "consumer"

_T = TypeVar("_T")


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(slots=True)
class JoinResult:
    """What a JoinGroup request is answered with."""

    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    # (member id, group instance id, metadata for the selected protocol); only the leader's.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    """What a SyncGroup request is answered with."""

    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    # (protocol name, metadata) in the member's order of preference.
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # Set while a JoinGroup / SyncGroup of this member waits for the rebalance to progress.
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None
    # A member added by this rebalance that has not yet been told its generation.
    is_new: bool = False
    expiry: asyncio.TimerHandle | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def cancel_expiry(self) -> None:
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None


def _answer(waiter: asyncio.Future[_T] | None, result: _T) -> bool:
    if waiter is None:
        return False
    if not waiter.done():
        waiter.set_result(result)
    return True


class Group:
    """A classic consumer group as its coordinator sees it."""

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}            # group instance id -> member id
        self.pending_members: dict[str, asyncio.TimerHandle | None] = {}  # MEMBER_ID_REQUIRED
        self.pending_sync: set[str] = set()
        self._supported: Counter[str] = Counter()
        self.subscribed_topics: set[str] | None = None
        # Committed offsets, and what is on its way to the log.
        self.offsets: dict[TopicPartition, OffsetValue] = {}
        self.pending_commits: Counter[TopicPartition] = Counter()
        self._offset_tokens: Counter[TopicPartition] = Counter()
        # Rebalance timers: the delayed join (rebalance or initial delay) and the pending sync.
        self.join_timer: asyncio.TimerHandle | None = None
        self.sync_timer: asyncio.TimerHandle | None = None
        self.initial_delay = False
        self.initial_delay_cap = 0.0
        # A KIP-848 group's state (consumer_protocol.py); its classic side is then empty.
        self.consumer: ConsumerGroup | None = None

    def __repr__(self) -> str:
        return (f"<Group {self.group_id} {self.state.value} gen={self.generation} "
                f"members={len(self.members)}>")

    # ---------------------------------------------------------------------------- state
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    @property
    def group_type(self) -> str:
        return GROUP_TYPE_CLASSIC if self.consumer is None else GROUP_TYPE_CONSUMER

    @property
    def state_name(self) -> str:
        """Kafka's name of the group's state, as ListGroups and describes report it."""
        return self.state.value if self.consumer is None else self.consumer.state

    def is_empty(self) -> bool:
        """No members of either protocol."""
        return self.is_(GroupState.EMPTY) and (self.consumer is None or
                                                not self.consumer.members)

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: illegal transition "
                               f"{self.state.value} -> {state.value}")
        self.state = state
        self.state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                              GroupState.EMPTY)

    # ---------------------------------------------------------------------------- members
    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def has_static_member(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def is_static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        """True if ``instance_id`` now belongs to another member id (a newer incarnation)."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    @property
    def size(self) -> int:
        return len(self.members)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def add(self, member: Member, join_waiter: asyncio.Future[JoinResult] | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self._supported.update(member.protocol_names())
        member.join_waiter = join_waiter
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        member.cancel_expiry()
        self._supported.subtract(member.protocol_names())
        self._supported += Counter()  # drop zero counts
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(self, member: Member, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      join_waiter: asyncio.Future[JoinResult] | None) -> None:
        self._supported.subtract(member.protocol_names())
        self._supported += Counter()
        member.protocols = protocols
        self._supported.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        previous, member.join_waiter = member.join_waiter, join_waiter
        if previous is not None and previous is not join_waiter:
            # A newer JoinGroup supersedes the one still waiting; answer the old one now.
            _answer(previous, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))

    def replace_static_member(self, instance_id: str, old_member_id: str,
                              new_member_id: str) -> Member:
        """Give a static member's slot to its new incarnation; the old one is fenced."""
        member = self.members.pop(old_member_id)
        answer_join(member, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id))
        answer_sync(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        if old_member_id in self.pending_sync:
            self.pending_sync.discard(old_member_id)
            self.pending_sync.add(new_member_id)
        return member

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # ---------------------------------------------------------------------------- protocols
    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        n = len(self.members)
        return {name for name, count in self._supported.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type and \
            any(self._supported[name] == n for name in protocols)

    def select_protocol(self) -> str:
        """Kafka's rule: each member votes for its most preferred candidate; most votes wins.

        Ties go to the candidate that received its first vote earliest (member join order).
        """
        candidates = self.candidate_protocols()
        if not candidates:
            raise RuntimeError(f"group {self.group_id} has no protocol all members support")
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        order = {name: i for i, name in enumerate(votes)}
        return max(votes, key=lambda name: (votes[name], -order[name]))

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        assert self.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, if this is a consumer group we can decode."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None \
                or not self.members:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            decoded = decode_subscription(member.metadata(self.protocol_name))
            if decoded is None:
                return None
            topics.update(decoded)
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        if self.consumer is not None:
            return topic in self.consumer.topics
        # Unknown subscriptions count as subscribed: never delete what might be in use.
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync = set(self.members)

    # ---------------------------------------------------------------------------- offsets
    def offset_token(self, tp: TopicPartition) -> int:
        return self._offset_tokens[tp]

    def remove_offsets(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Forget these committed offsets (and any commit still in flight for them)."""
        removed = []
        for tp in partitions:
            self._offset_tokens[tp] += 1
            if self.offsets.pop(tp, None) is not None:
                removed.append(tp)
        return removed

    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(+self.pending_commits)

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Kafka's offset expiration rules (KIP-211)."""
        if self.consumer is not None:
            # KIP-848 groups: by commit time, except topics the group subscribes to.
            return self._expired(now_ms, retention_ms, skip=set(self.consumer.topics))
        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            # No members: everything expires retention_ms after the group became empty.
            return self._expired(now_ms, retention_ms, use_state_timestamp=True)
        if self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None \
                and self.is_(GroupState.STABLE):
            # Live consumers: only topics nobody subscribes to any more expire.
            return self._expired(now_ms, retention_ms, skip=self.subscribed_topics)
        if self.protocol_type is None:
            # Simple (standalone) consumers: by commit time.
            return self._expired(now_ms, retention_ms)
        return []

    def _expired(self, now_ms: int, retention_ms: int, use_state_timestamp: bool = False,
                 skip: set[str] | frozenset[str] = frozenset()) -> list[TopicPartition]:
        expired = []
        for tp, value in self.offsets.items():
            if tp[0] in skip or self.pending_commits[tp] > 0:
                continue
            if value.expire_timestamp >= 0:
                if now_ms >= value.expire_timestamp:
                    expired.append(tp)
                continue
            base = self.state_timestamp if use_state_timestamp and self.state_timestamp >= 0 \
                else value.commit_timestamp
            if now_ms - base >= retention_ms:
                expired.append(tp)
        return expired

    # ---------------------------------------------------------------------------- persistence
    def to_value(self, assignments: dict[str, bytes] | None = None) -> GroupValue:
        """The group metadata record for the current generation."""
        members = []
        if self.protocol_name is not None:
            for m in self.members.values():
                assignment = m.assignment if assignments is None \
                    else assignments.get(m.member_id, b"")
                members.append(MemberValue(
                    member_id=m.member_id, group_instance_id=m.group_instance_id,
                    client_id=m.client_id, client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata(self.protocol_name), assignment=assignment))
        return GroupValue(protocol_type=self.protocol_type or "", generation=self.generation,
                          protocol_name=self.protocol_name, leader=self.leader_id,
                          state_timestamp=self.state_timestamp, members=members)

    @classmethod
    def from_value(cls, group_id: str, value: GroupValue | None,
                   offsets: dict[TopicPartition, OffsetValue], now_ms: int) -> Group:
        """Rebuild a group from the offsets log: Stable if it had members, else Empty."""
        group = cls(group_id, now_ms)
        group.offsets = dict(offsets)
        if value is None:
            return group
        group.protocol_type = value.protocol_type or None
        group.generation = value.generation
        group.state_timestamp = value.state_timestamp
        if value.protocol_name is not None and value.members:
            group.protocol_name = value.protocol_name
            for mv in value.members:
                member = Member(
                    member_id=mv.member_id, group_instance_id=mv.group_instance_id,
                    client_id=mv.client_id, client_host=mv.client_host,
                    rebalance_timeout_ms=mv.rebalance_timeout_ms,
                    session_timeout_ms=mv.session_timeout_ms,
                    protocol_type=group.protocol_type or "",
                    protocols=[(value.protocol_name, mv.subscription)],
                    assignment=mv.assignment)
                group.add(member, None)
            if value.leader in group.members:
                group.leader_id = value.leader
            group.state = GroupState.STABLE
            group.subscribed_topics = group.compute_subscribed_topics()
        return group


def answer_join(member: Member, result: JoinResult) -> bool:
    """Answer the member's waiting JoinGroup, if any; True if there was one."""
    waiter, member.join_waiter = member.join_waiter, None
    return _answer(waiter, result)


def answer_sync(member: Member, result: SyncResult) -> bool:
    """Answer the member's waiting SyncGroup, if any; True if there was one."""
    waiter, member.sync_waiter = member.sync_waiter, None
    return _answer(waiter, result)


def decode_subscription(metadata: bytes) -> list[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version), or None if undecodable."""
    try:
        r = Reader(metadata)
        version = r.read_int16()
        if version < 0:
            return None
        # Newer versions only append fields, so the highest version we know reads their prefix.
        subscription = ConsumerProtocolSubscription.read(
            r, min(version, ConsumerProtocolSubscription.MAX_VERSION))
        return list(subscription.topics)
    except (DecodeError, UnsupportedVersionError):
        return None
