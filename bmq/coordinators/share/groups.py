"""Share group membership (KIP-932's ShareGroupHeartbeat and ShareGroupDescribe).

Members join with epoch 0, heartbeat with the epoch they were given and leave with -1. The
assignment is the server's: every member gets every partition of the topics it subscribes to
(a share group spreads records, not partitions, over its members), so a member's assignment
changes only when its subscription or a topic's partitions change, and then the group epoch
and that member's epoch move on. A member that sends no heartbeat for the group's
``share.session.timeout.ms`` is removed.

Membership is kept in memory by the broker that coordinates the group (the owner of the
group's ``__consumer_offsets`` partition, which FindCoordinator names): after a restart or a
move of the coordinator, members get UNKNOWN_MEMBER_ID (also when the whole group is unknown,
where Kafka, whose groups are durable, answers GROUP_ID_NOT_FOUND) and join again, as
librdkafka does at once. What matters for
delivery (acquired records, acknowledgements) is in the share-group state log.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from bmq.coordinators.clock import steady_now_ms
from bmq.metadata.topics import TopicRegistry
from bmq.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

GROUP_TYPE_SHARE = "share"
ASSIGNOR = "simple"
EMPTY, STABLE = "Empty", "Stable"

Assignment = dict[uuid.UUID, list[int]]


@dataclass(slots=True)
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    epoch: int = 0
    previous_epoch: int = -1
    rack_id: str | None = None
    topics: list[str] = field(default_factory=list)
    assignment: Assignment = field(default_factory=dict)
    # The assignment last sent (None: send it with the next answer).
    sent: Assignment | None = None
    expires_ms: int = 0


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    error: ErrorCode
    member_id: str | None = None
    epoch: int = 0
    interval_ms: int = 0
    assignment: Assignment | None = None
    message: str | None = None


class ShareGroups:
    """The share groups this broker coordinates."""

    def __init__(self, topics: TopicRegistry,
                 group_config: Callable[[str], dict[str, str]]) -> None:
        self._topics = topics
        self._config = group_config
        self.groups: dict[str, ShareGroup] = {}

    def _assignment(self, topics: Iterable[str]) -> Assignment:
        assignment: Assignment = {}
        for name in sorted(set(topics)):
            info = self._topics.get(name)
            if info is not None and not info.internal:
                assignment[info.topic_id] = list(range(info.partitions))
        return assignment

    def heartbeat(self, group_id: str, member_id: str, epoch: int, rack_id: str | None,
                  topics: list[str] | None, client_id: str, client_host: str
                  ) -> HeartbeatAnswer:
        if not group_id:
            return HeartbeatAnswer(ErrorCode.INVALID_REQUEST, message="GroupId can't be empty.")
        if not member_id:
            return HeartbeatAnswer(ErrorCode.INVALID_REQUEST, message="MemberId can't be empty.")
        configs = self._config(group_id)
        interval = int(configs["share.heartbeat.interval.ms"])
        now = steady_now_ms()
        group = self.groups.get(group_id)
        if epoch == -1:
            if group is None or member_id not in group.members:
                return HeartbeatAnswer(ErrorCode.UNKNOWN_MEMBER_ID)
            self._remove(group, member_id, "left")
            return HeartbeatAnswer(ErrorCode.NONE, member_id, -1, interval)
        if epoch == 0:
            if topics is None:
                return HeartbeatAnswer(ErrorCode.INVALID_REQUEST,
                                       message="SubscribedTopicNames must be set in first "
                                               "request.")
            group = self.groups.setdefault(group_id, ShareGroup(group_id))
            member = group.members.get(member_id)
            if member is None:
                member = group.members[member_id] = ShareMember(member_id, client_id,
                                                                client_host)
                log.info("member %s (client %s) joined share group %s", member_id, client_id,
                         group_id)
            member.sent = None
        else:
            if group is None:
                # Kafka answers GROUP_ID_NOT_FOUND (fatal to librdkafka's share consumer), as
                # its groups outlive a coordinator's move; here membership does not, so a group
                # this coordinator does not know may well exist: the member joins again.
                return HeartbeatAnswer(ErrorCode.UNKNOWN_MEMBER_ID)
            found = group.members.get(member_id)
            if found is None:
                return HeartbeatAnswer(ErrorCode.UNKNOWN_MEMBER_ID)
            member = found
            if epoch not in (member.epoch, member.previous_epoch):
                return HeartbeatAnswer(ErrorCode.FENCED_MEMBER_EPOCH,
                                       message=f"The member epoch {epoch} is not "
                                               f"{member.epoch}.")
            if epoch == member.previous_epoch:
                member.sent = None      # it missed the answer that moved it on
        if rack_id is not None:
            member.rack_id = rack_id
        if topics is not None:
            member.topics = list(topics)
        assignment = self._assignment(member.topics)
        if assignment != member.assignment or member.epoch == 0:
            group.epoch += 1
            member.previous_epoch, member.epoch = member.epoch, group.epoch
            member.assignment = assignment
        member.expires_ms = now + int(configs["share.session.timeout.ms"])
        send = member.assignment if member.sent != member.assignment else None
        member.sent = member.assignment
        return HeartbeatAnswer(ErrorCode.NONE, member.member_id, member.epoch, interval, send)

    def _remove(self, group: ShareGroup, member_id: str, why: str) -> None:
        del group.members[member_id]
        log.info("member %s %s share group %s", member_id, why, group.group_id)
        group.epoch += 1

    def expire(self) -> None:
        """Remove the members whose session timed out."""
        now = steady_now_ms()
        for group in self.groups.values():
            for member in [m for m in group.members.values() if m.expires_ms <= now]:
                self._remove(group, member.member_id, "timed out of")

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def get_or_create(self, group_id: str) -> ShareGroup:
        """The group, made empty if unknown: Kafka makes it so when its offsets are altered
        (kafka-share-groups.sh --reset-offsets sets a new group's start before any member
        joins), and it is then listed and described."""
        return self.groups.setdefault(group_id, ShareGroup(group_id))

    def describe(self, group_id: str) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return group

    def listed(self) -> list[ShareGroup]:
        return sorted(self.groups.values(), key=lambda g: g.group_id)

    def topic_name(self, topic_id: uuid.UUID) -> str:
        info = self._topics.by_id(topic_id)
        return "" if info is None else info.name
