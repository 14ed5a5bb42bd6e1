"""A KIP-848 consumer group's state and the rules that need no clock or I/O.

The coordinator decides, the members converge (KIP-848):

* The **group epoch** moves on whenever what should be assigned changes: a member joins, leaves
  or is removed, a subscription changes, a subscribed topic appears, disappears or grows.
* The **target assignment** is computed by the assignor for the group epoch it was computed at
  (the **assignment epoch**).
* Each member reconciles towards its target on its own heartbeats, with its **member epoch**
  (Kafka's CurrentAssignmentBuilder): partitions it must give up are revoked first (state
  ``UNREVOKED``, the member keeps its epoch and is told only the partitions it keeps); once its
  heartbeat no longer lists them it moves to the target epoch and gets the partitions of its
  target that nobody owns any more; those another member still owns (``partition_epochs``) are
  given once released (state ``UNRELEASED``). A partition therefore never has two owners.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from bmq.coordinators.groups.assignors import ASSIGNORS
from bmq.coordinators.groups.records import (
    Assignment,
    ConsumerGroupValue,
    ConsumerMemberValue,
)
from bmq.protocol.re2 import compile_re2

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
Partition = tuple[uuid.UUID, int]


class MemberState(IntEnum):
    STABLE = 0
    UNREVOKED = 1
    UNRELEASED = 2


@dataclass(eq=False, slots=True)
class ConsumerMember(ConsumerMemberValue):
    # Not stored: the group's session timeout as of the last heartbeat, and the timers.
    session_timeout_ms: int = 45_000
    expiry: asyncio.TimerHandle | None = None
    revocation: asyncio.TimerHandle | None = None

    def cancel_timers(self) -> None:
        for handle in (self.expiry, self.revocation):
            if handle is not None:
                handle.cancel()
        self.expiry = self.revocation = None

    def stored(self) -> ConsumerMemberValue:
        return ConsumerMemberValue(**{f.name: getattr(self, f.name)
                                      for f in dataclasses.fields(ConsumerMemberValue)})

    @property
    def reconciled(self) -> bool:
        return self.state == MemberState.STABLE


def _copy(assignment: Assignment) -> Assignment:
    return {topic_id: set(partitions) for topic_id, partitions in assignment.items() if partitions}


def _partitions(assignment: Assignment) -> Iterable[Partition]:
    for topic_id, partitions in assignment.items():
        for index in partitions:
            yield topic_id, index


def owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Kafka's ownsRevokedPartitions: unknown ownership (None) counts as owning them."""
    if owned is None:
        return True
    return any(owned.get(topic_id, set()) & indexes for topic_id, indexes in partitions.items())


def is_subset(owned: Assignment | None, assignment: Assignment) -> bool:
    if owned is None:
        return False
    return all(indexes <= assignment.get(topic_id, set()) for topic_id, indexes in owned.items())


def compile_regex(pattern: str) -> re.Pattern[str]:
    """A subscription's regular expression; it must match a whole topic name (RE2's
    FullMatch, as Kafka uses). Raises re.error."""
    return compile_re2(pattern)


class ConsumerGroup:
    """The members, epochs and assignments of one KIP-848 group."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}           # instance id -> member id
        # Subscribed topic name -> (id, partitions), as of the last group epoch.
        self.topics: dict[str, tuple[uuid.UUID, int]] = {}
        # The member epoch of whoever owns (or is revoking) each partition.
        self.partition_epochs: dict[Partition, int] = {}
        self.metadata_checked = 0.0
        self._regexes: dict[str, re.Pattern[str]] = {}

    def __repr__(self) -> str:
        return (f"<ConsumerGroup {self.group_id} {self.state} epoch={self.group_epoch} "
                f"members={len(self.members)}>")

    @property
    def state(self) -> str:
        """Kafka's consumer group states."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(not m.reconciled or m.member_epoch != self.assignment_epoch
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    # ---------------------------------------------------------------------------- members
    def static_member(self, instance_id: str) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def add(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._claim(member)

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        member.cancel_timers()
        self._release(member)
        if member.instance_id is not None and \
                self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    def replace_static(self, old: ConsumerMember, new_member_id: str) -> ConsumerMember:
        """A restarted static member takes over its instance's partitions and target."""
        self.remove(old.member_id)
        member = ConsumerMember(**{f.name: getattr(old, f.name)
                                   for f in dataclasses.fields(ConsumerMemberValue)})
        member.member_id = new_member_id
        member.member_epoch = member.previous_member_epoch = 0
        member.pending_revocation = {}
        member.state = MemberState.STABLE
        self.add(member)
        return member

    def reset(self, member: ConsumerMember) -> None:
        """The member rejoins with epoch 0: it has given up everything it owned."""
        self._release(member)
        member.member_epoch = member.previous_member_epoch = 0
        member.assigned, member.pending_revocation = {}, {}
        member.state = MemberState.STABLE

    def _claim(self, member: ConsumerMember) -> None:
        for partition in _partitions(member.assigned):
            self.partition_epochs[partition] = member.member_epoch
        for partition in _partitions(member.pending_revocation):
            self.partition_epochs[partition] = member.member_epoch

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for partition in _partitions(assignment):
                self.partition_epochs.pop(partition, None)

    def set_assignment(self, member: ConsumerMember, epoch: int, state: MemberState,
                       assigned: Assignment, pending: Assignment) -> None:
        self._release(member)
        member.previous_member_epoch, member.member_epoch = member.member_epoch, epoch
        member.state = state
        member.assigned, member.pending_revocation = _copy(assigned), _copy(pending)
        self._claim(member)

    def leave_temporarily(self, member: ConsumerMember) -> None:
        """A static member leaves to come back (epoch -2): it keeps its partitions."""
        self._release(member)
        member.member_epoch = STATIC_LEAVE_EPOCH
        member.pending_revocation = {}
        self._claim(member)

    # ---------------------------------------------------------------------------- subscriptions
    def regex(self, pattern: str) -> re.Pattern[str]:
        compiled = self._regexes.get(pattern)
        if compiled is None:
            compiled = self._regexes[pattern] = compile_regex(pattern)
        return compiled

    def subscribed_names(self, all_topics: Iterable[str]) -> set[str]:
        """Topic names some member subscribes to, by name or by its regular expression."""
        names = {n for m in self.members.values() for n in m.subscribed_topic_names}
        patterns = {m.subscribed_topic_regex for m in self.members.values()
                    if m.subscribed_topic_regex}
        if patterns:
            compiled = [self.regex(p) for p in patterns]
            names.update(t for t in all_topics if any(c.fullmatch(t) for c in compiled))
        return names

    def member_topics(self, member: ConsumerMember) -> frozenset[uuid.UUID]:
        ids = {self.topics[n][0] for n in member.subscribed_topic_names if n in self.topics}
        if member.subscribed_topic_regex:
            compiled = self.regex(member.subscribed_topic_regex)
            ids.update(tid for name, (tid, _) in self.topics.items() if compiled.fullmatch(name))
        return frozenset(ids)

    # ---------------------------------------------------------------------------- assignment
    def assignor_name(self, assignors: list[str]) -> str:
        """The assignor most members ask for (Kafka's rule), else the first configured."""
        votes = Counter(m.server_assignor for m in self.members.values()
                        if m.server_assignor in assignors)
        return votes.most_common(1)[0][0] if votes else assignors[0]

    def compute_target(self, assignor: str) -> None:
        """A new target assignment for the current group epoch."""
        subscriptions = {mid: self.member_topics(m) for mid, m in self.members.items()}
        counts = {tid: partitions for tid, partitions in self.topics.values()}
        previous = {mid: m.target for mid, m in self.members.items()}
        target = ASSIGNORS[assignor](subscriptions, counts, previous)
        for member_id, member in self.members.items():
            member.target = _copy(target.get(member_id, {}))
        self.assignment_epoch = self.group_epoch

    def reconcile(self, member: ConsumerMember, owned: Assignment | None) -> bool:
        """Move the member towards its target (Kafka's CurrentAssignmentBuilder); True if its
        epoch, state or partitions changed."""
        before = (member.member_epoch, member.state, member.assigned, member.pending_revocation)
        if member.state == MemberState.STABLE:
            if member.member_epoch != self.assignment_epoch:
                self._next_assignment(member, member.member_epoch, owned)
        elif member.state == MemberState.UNREVOKED:
            if not owns_any(owned, member.pending_revocation):
                self._next_assignment(member, member.member_epoch + 1, owned)
        else:
            self._next_assignment(member, member.member_epoch, owned)
        return before != (member.member_epoch, member.state, member.assigned,
                          member.pending_revocation)

    def _next_assignment(self, member: ConsumerMember, epoch: int,
                         owned: Assignment | None) -> None:
        kept: Assignment = {}
        revoking: Assignment = {}
        arriving: Assignment = {}
        unreleased = False
        for topic_id in set(member.target) | set(member.assigned):
            target = member.target.get(topic_id, set())
            current = member.assigned.get(topic_id, set())
            kept[topic_id] = current & target
            revoking[topic_id] = current - target
            free = {i for i in target - current
                    if self.partition_epochs.get((topic_id, i), -1) == -1}
            unreleased = unreleased or len(free) < len(target - current)
            arriving[topic_id] = free
        revoking = _copy(revoking)
        arriving = _copy(arriving)
        if revoking and owns_any(owned, revoking):
            # Revoke first; the member keeps its epoch until it has let them go.
            self.set_assignment(member, epoch, MemberState.UNREVOKED, kept, revoking)
            return
        for topic_id, partitions in arriving.items():
            kept[topic_id] = kept.get(topic_id, set()) | partitions
        state = MemberState.UNRELEASED if unreleased else MemberState.STABLE
        self.set_assignment(member, self.assignment_epoch, state, kept, {})

    # ---------------------------------------------------------------------------- persistence
    def to_value(self) -> ConsumerGroupValue:
        return ConsumerGroupValue(self.group_epoch, self.assignment_epoch, dict(self.topics),
                                  [m.stored() for m in self.members.values()])

    @classmethod
    def from_value(cls, group_id: str, value: ConsumerGroupValue) -> ConsumerGroup:
        group = cls(group_id)
        group.group_epoch, group.assignment_epoch = value.group_epoch, value.assignment_epoch
        group.topics = dict(value.topics)
        for stored in value.members:
            group.add(ConsumerMember(**{f.name: getattr(stored, f.name)
                                        for f in dataclasses.fields(ConsumerMemberValue)}))
        return group


def topic_metadata(names: Iterable[str],
                   lookup: Mapping[str, tuple[uuid.UUID, int]]) -> dict[str, tuple[uuid.UUID, int]]:
    """(id, partitions) of those of ``names`` that exist."""
    return {name: lookup[name] for name in names if name in lookup}
