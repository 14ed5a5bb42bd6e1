"""KIP-848's consumer group protocol: ConsumerGroupHeartbeat (join, heartbeat, leave) and the
session and revocation timeouts, over ``consumer_group.ConsumerGroup``.

A KIP-848 group shares its ``Group`` (the group id, its committed offsets) with the classic
protocol: ``Group.consumer`` holds its consumer-protocol state, and the classic side of such a
group has no members. The whole consumer-protocol state is one record of the group's
``__consumer_offsets`` partition (``records.ConsumerGroupKey``), appended whenever it changes
and durable before the heartbeat that changed it is answered, so epochs and assignments come
back after a restart exactly as members last heard them.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from dataclasses import dataclass

from bmq.coordinators.groups.consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    compile_regex,
    is_subset,
    topic_metadata,
)
from bmq.coordinators.groups.core import EMPTY, GroupCoordinatorCore
from bmq.coordinators.groups.group import Group
from bmq.coordinators.groups.records import Assignment, ConsumerGroupKey
from bmq.coordinators.groups.shard import OffsetsShard
from bmq.coordinators.sharded import Appended
from bmq.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

# How often a heartbeat re-reads the subscribed topics (new topics matching a regex, more
# partitions); a subscription change re-reads them at once.
METADATA_REFRESH_S = 0.5
# While a group reconciles, members are asked to heartbeat this often (at most), so that a
# rebalance's steps (revoke, then assign what was released) follow each other quickly.
RECONCILING_HEARTBEAT_MS = 100


@dataclass(slots=True)
class ConsumerHeartbeat:
    """A ConsumerGroupHeartbeat, with what the broker adds (client, the group's timings)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


class ConsumerGroupProtocol(GroupCoordinatorCore):
    def assignors(self) -> list[str]:
        return [a.strip() for a in self.config.group_consumer_assignors.split(",") if a.strip()]

    async def consumer_heartbeat(self, hb: ConsumerHeartbeat) -> HeartbeatResult:
        error = self.coordinator_error(hb.group_id)
        if error != ErrorCode.NONE:
            return HeartbeatResult(error)
        try:
            self._validate(hb)
            group = self.group(hb.group_id)
            if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                result, changed = self._leave(group, hb), True
            else:
                result, changed = self._heartbeat(group, hb)
        except KafkaError as failure:
            return HeartbeatResult(failure.code, failure.message)
        if changed:
            code = await self.durable(self._store(hb.group_id))
            if code != ErrorCode.NONE:
                return HeartbeatResult(code)
        return result

    def _validate(self, hb: ConsumerHeartbeat) -> None:
        """Kafka's checks of a ConsumerGroupHeartbeat (INVALID_REQUEST and friends)."""
        if hb.instance_id == "":
            raise _invalid("InstanceId can't be empty.")
        if hb.rack_id == "":
            raise _invalid("RackId can't be empty.")
        if hb.member_id == "" and hb.member_epoch != 0:
            raise _invalid("MemberId can't be empty.")
        if hb.member_epoch == 0:
            if hb.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if hb.owned is None or hb.owned:
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            # An empty list of names (or an empty regex) is a member subscribed to nothing
            # yet, as Kafka accepts: the Java client joins so when its Pattern matched no
            # topic so far (no metadata yet at its first heartbeat).
            if hb.subscribed_topic_names is None and hb.subscribed_topic_regex is None:
                raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be "
                               "non-null when (re-)joining.")
        elif hb.member_epoch == STATIC_LEAVE_EPOCH and hb.instance_id is None:
            raise _invalid("InstanceId can't be null.")
        elif hb.member_epoch < STATIC_LEAVE_EPOCH:
            raise _invalid("MemberEpoch is invalid.")
        if hb.server_assignor is not None and hb.server_assignor not in self.assignors():
            raise KafkaError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {hb.server_assignor} is not supported. Supported "
                             f"assignors: {', '.join(self.assignors())}.")
        if hb.subscribed_topic_regex:
            try:
                compile_regex(hb.subscribed_topic_regex)
            except re.error as bad:
                raise KafkaError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                 f"SubscribedTopicRegex {hb.subscribed_topic_regex!r} is not a "
                                 f"valid regular expression: {bad}") from None

    # ---------------------------------------------------------------------------- joining
    def _consumer_group(self, group: Group | None, group_id: str,
                        create: bool) -> tuple[Group, ConsumerGroup]:
        if group is not None and group.consumer is not None:
            return group, group.consumer
        if not create:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        if group is not None and (group.members or not group.is_(EMPTY)):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND,
                             f"Group {group_id} is not a consumer group.")
        # New, or an empty classic group (its committed offsets stay) becomes a consumer group.
        group = self._get_or_create(group_id)
        group.consumer = ConsumerGroup(group_id)
        log.info("group %s now uses the consumer protocol", group_id)
        return group, group.consumer

    def _member(self, cg: ConsumerGroup, hb: ConsumerHeartbeat) -> ConsumerMember:
        """The member the heartbeat is from: new, rejoining or known (Kafka's fencing)."""
        if hb.member_epoch == 0:
            existing = cg.members.get(hb.member_id)
            if hb.instance_id is not None:
                static = cg.static_member(hb.instance_id)
                if static is not None and static is not existing:
                    if static.member_epoch != STATIC_LEAVE_EPOCH:
                        raise KafkaError(
                            ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"Static member {hb.member_id} with instance id {hb.instance_id} "
                            f"cannot join the group because the instance id is owned by "
                            f"{static.member_id} member.")
                    log.info("static member %s of group %s rejoins as %s", hb.instance_id,
                             cg.group_id, hb.member_id)
                    return cg.replace_static(static, hb.member_id)
            if existing is not None:
                # It joins afresh, so it has let go of all its partitions.
                cg.reset(existing)
                return existing
            if len(cg.members) >= self.config.group_consumer_max_size:
                raise KafkaError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                 f"The consumer group has reached its maximum capacity of "
                                 f"{self.config.group_consumer_max_size} members.")
            member = ConsumerMember(hb.member_id, instance_id=hb.instance_id)
            cg.add(member)
            log.info("member %s joins consumer group %s", hb.member_id, cg.group_id)
            return member
        found = _known_member(cg, hb)
        if hb.member_epoch > found.member_epoch or (
                hb.member_epoch < found.member_epoch and (
                    hb.member_epoch != found.previous_member_epoch
                    or not is_subset(hb.owned, found.assigned))):
            # A smaller epoch is accepted only if the answer that bumped it may have been lost.
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has epoch {hb.member_epoch}; the "
                             f"coordinator knows epoch {found.member_epoch}. The member must "
                             f"abandon all its partitions and rejoin.")
        return found

    @staticmethod
    def _update(member: ConsumerMember, hb: ConsumerHeartbeat) -> tuple[bool, bool]:
        """Take the heartbeat's non-null fields; (anything changed, subscription changed)."""
        before = (member.instance_id, member.rack_id, member.rebalance_timeout_ms,
                  member.server_assignor, member.client_id, member.client_host)
        subscription = (member.subscribed_topic_names, member.subscribed_topic_regex)
        if hb.instance_id is not None:
            member.instance_id = hb.instance_id
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        if hb.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms
        if hb.server_assignor is not None:
            member.server_assignor = hb.server_assignor
        if hb.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(hb.subscribed_topic_names)))
        if hb.subscribed_topic_regex is not None:
            # librdkafka sends "" for "no regular expression".
            member.subscribed_topic_regex = hb.subscribed_topic_regex or None
        member.client_id, member.client_host = hb.client_id, hb.client_host
        after = (member.instance_id, member.rack_id, member.rebalance_timeout_ms,
                 member.server_assignor, member.client_id, member.client_host)
        subscribed = subscription != (member.subscribed_topic_names,
                                      member.subscribed_topic_regex)
        return subscribed or before != after, subscribed

    def _heartbeat(self, group: Group | None,
                   hb: ConsumerHeartbeat) -> tuple[HeartbeatResult, bool]:
        joining = hb.member_epoch == 0
        if joining and hb.member_id == "":
            hb.member_id = str(uuid.uuid4())  # v0: the coordinator names new members
        group, cg = self._consumer_group(group, hb.group_id, create=joining)
        was_member = hb.member_id in cg.members
        member = self._member(cg, hb)
        assigned_before = member.assigned
        changed, subscribed = self._update(member, hb)
        changed = changed or joining or not was_member
        if subscribed or time.monotonic() - cg.metadata_checked >= METADATA_REFRESH_S:
            self._refresh_topics(cg, bump=subscribed)
        if cg.group_epoch > cg.assignment_epoch:
            cg.compute_target(cg.assignor_name(self.assignors()))
            changed = True
        changed = cg.reconcile(member, hb.owned) or changed
        self._after_reconcile(group, member)
        member.session_timeout_ms = hb.session_timeout_ms
        self._schedule_consumer_expiry(group, member)
        full = joining or (hb.rebalance_timeout_ms != -1 and hb.subscribed_topic_names
                           is not None and hb.owned is not None)
        assigned_changed = assigned_before != member.assigned
        reconciling = cg.state != "Stable"
        interval = min(hb.heartbeat_interval_ms, RECONCILING_HEARTBEAT_MS) if reconciling \
            else hb.heartbeat_interval_ms
        return HeartbeatResult(
            ErrorCode.NONE, member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=interval,
            assignment={t: set(p) for t, p in member.assigned.items()}
            if full or assigned_changed else None), changed

    def _refresh_topics(self, cg: ConsumerGroup, bump: bool) -> None:
        """Re-read the subscribed topics; the group epoch moves on if they (or, with ``bump``,
        the subscriptions) changed."""
        lookup = {t.name: (t.topic_id, t.partitions) for t in self._host.topics.all()
                  if not t.internal}
        topics = topic_metadata(cg.subscribed_names(lookup), lookup)
        cg.metadata_checked = time.monotonic()
        if topics != cg.topics:
            cg.topics = topics
            bump = True
        if bump:
            cg.group_epoch += 1
            log.info("consumer group %s: group epoch %d", cg.group_id, cg.group_epoch)

    def _after_reconcile(self, group: Group, member: ConsumerMember) -> None:
        """A member revoking partitions must do so within its rebalance timeout."""
        if member.state != MemberState.UNREVOKED:
            if member.revocation is not None:
                member.revocation.cancel()
                member.revocation = None
            return
        if member.revocation is None:
            member.revocation = asyncio.get_running_loop().call_later(
                member.rebalance_timeout_ms / 1000, self._on_revocation_expired, group, member,
                member.member_epoch)

    # ---------------------------------------------------------------------------- leaving
    def _leave(self, group: Group | None, hb: ConsumerHeartbeat) -> HeartbeatResult:
        group, cg = self._consumer_group(group, hb.group_id, create=False)
        member = _known_member(cg, hb)
        if hb.member_epoch == STATIC_LEAVE_EPOCH:
            # It comes back under the same instance id and takes its partitions back.
            log.info("static member %s of group %s left temporarily", hb.instance_id,
                     hb.group_id)
            cg.leave_temporarily(member)
            if member.revocation is not None:
                member.revocation.cancel()
                member.revocation = None
        else:
            self._fence(group, member, "left the group")
        return HeartbeatResult(ErrorCode.NONE, member_id=hb.member_id,
                               member_epoch=hb.member_epoch)

    def _fence(self, group: Group, member: ConsumerMember, reason: str) -> None:
        cg = group.consumer
        assert cg is not None
        log.info("member %s of consumer group %s removed: %s", member.member_id,
                 group.group_id, reason)
        cg.remove(member.member_id)
        self._refresh_topics(cg, bump=True)
        cg.compute_target(cg.assignor_name(self.assignors()))

    # ---------------------------------------------------------------------------- timers
    def _schedule_consumer_expiry(self, group: Group, member: ConsumerMember) -> None:
        if member.expiry is not None:
            member.expiry.cancel()
        member.expiry = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._on_consumer_expired, group, member)

    def _expire_in_background(self, group: Group, member: ConsumerMember, reason: str) -> None:
        cg = group.consumer
        if cg is None or cg.members.get(member.member_id) is not member:
            return
        self._fence(group, member, reason)
        self.tasks.spawn(self._store_in_background(group.group_id))

    def _on_consumer_expired(self, group: Group, member: ConsumerMember) -> None:
        member.expiry = None
        self._expire_in_background(
            group, member, f"session timeout ({member.session_timeout_ms} ms) expired")

    def _on_revocation_expired(self, group: Group, member: ConsumerMember, epoch: int) -> None:
        member.revocation = None
        if member.member_epoch == epoch and member.state == MemberState.UNREVOKED:
            self._expire_in_background(
                group, member, f"it did not revoke its partitions within "
                f"{member.rebalance_timeout_ms} ms")

    async def _store_in_background(self, group_id: str) -> None:
        code = await self.durable(self._store(group_id))
        if code != ErrorCode.NONE:
            log.warning("could not store consumer group %s: %s", group_id, code.name)

    def _store(self, group_id: str) -> Appended:
        group = self.group(group_id)
        cg = None if group is None else group.consumer
        return self._append(group_id, [(ConsumerGroupKey(group_id),
                                        None if cg is None else cg.to_value())])

    def _consumer_shard_loaded(self, shard: OffsetsShard) -> None:
        """After a restart or a move, members have one session (the broker's default until
        they heartbeat) to come back."""
        for group in shard.groups.values():
            if group.consumer is not None:
                for member in group.consumer.members.values():
                    member.session_timeout_ms = self.config.group_consumer_session_timeout_ms
                    self._schedule_consumer_expiry(group, member)
                    self._after_reconcile(group, member)

    def describe_consumer_group(self, group_id: str
                                ) -> tuple[ErrorCode, str | None, ConsumerGroup | None]:
        """(error, message, group) for ConsumerGroupDescribe."""
        error = self.coordinator_error(group_id)
        if error != ErrorCode.NONE:
            return error, None, None
        group = self.group(group_id)
        if group is None or group.consumer is None:
            exists = group is not None and not group.is_empty()
            message = f"Group {group_id} is not a consumer group." if exists \
                else f"Group {group_id} not found."
            return ErrorCode.GROUP_ID_NOT_FOUND, message, None
        return ErrorCode.NONE, None, group.consumer


def _known_member(cg: ConsumerGroup, hb: ConsumerHeartbeat) -> ConsumerMember:
    """The member a heartbeat (or a leave) comes from: by instance id for a static member,
    which must still be the one holding it, else by member id; Kafka's errors otherwise."""
    if hb.instance_id is None:
        member = cg.members.get(hb.member_id)
        if member is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {hb.member_id} is not a member of group {cg.group_id}.")
        return member
    member = cg.static_member(hb.instance_id)
    if member is None:
        raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {hb.instance_id} is unknown.")
    if member.member_id != hb.member_id:
        raise KafkaError(ErrorCode.FENCED_INSTANCE_ID,
                         f"Static member {hb.member_id} with instance id {hb.instance_id} was "
                         f"fenced by member {member.member_id}.")
    return member
