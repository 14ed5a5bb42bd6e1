"""The group coordinator: Kafka's classic rebalance protocol and committed offsets.

Everything runs on the broker's event loop, so group state needs no locks. A JoinGroup or
SyncGroup that has to wait for the rest of the group parks a future on its member and the request
handler awaits it; timers (``loop.call_later``) drive session expiry, the rebalance timeout, the
initial rebalance delay and the pending-sync timeout. Nothing polls.

Durability: group metadata (after each completed rebalance) and offset commits are appended to the
group's ``__consumer_offsets`` partition. OffsetCommit is answered once its batch is flushed;
commits become visible to OffsetFetch at that moment too, in log order.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Coroutine, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from bmq.coordinators.base import CoordinatorHost, InternalLogCoordinator
from bmq.coordinators.groups.group import (
    CONSUMER_PROTOCOL_TYPE,
    GROUP_TYPE_CLASSIC,
    Group,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
    TopicPartition,
    answer_join,
    answer_sync,
)
from bmq.coordinators.groups.placement import OFFSETS_TOPIC, partition_for
from bmq.coordinators.groups.records import GroupKey, OffsetValue
from bmq.coordinators.groups.shard import (
    Entry,
    OffsetsShard,
    coordinator_error,
    offset_entries,
    tombstones,
)
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.writepath.partitions import now_ms

log = logging.getLogger(__name__)

Appended = asyncio.Future[None] | ErrorCode

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member that never completes its join.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
EMPTY = GroupState.EMPTY
DEAD = GroupState.DEAD


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True
    support_skip_assignment: bool = False
    reason: str | None = None


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


@dataclass(slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str | None = ""
    error: ErrorCode = ErrorCode.NONE


class GroupCoordinator(InternalLogCoordinator):
    """All consumer groups of the offsets partitions this broker leads."""

    topic = OFFSETS_TOPIC

    def __init__(self, broker: CoordinatorHost, executor: Executor) -> None:
        self._broker = broker
        self._executor = executor
        self.config = broker.config
        self.num_partitions = max(1, self.config.offsets_topic_num_partitions)
        self.shards: dict[int, OffsetsShard] = {}
        self._loading: set[int] = set()
        self._active = False
        self._tasks: set[asyncio.Future[Any]] = set()
        self._expiry_task: asyncio.Task[None] | None = None

    # ================================================================================ lifecycle
    async def start(self) -> None:
        """Create ``__consumer_offsets`` if needed and load every partition of it."""
        info = self._broker.topics.get(OFFSETS_TOPIC)
        if info is None:
            info = await self._broker.create_topic(OFFSETS_TOPIC, self.num_partitions, configs={
                "retention.ms": "-1",
                "retention.bytes": "-1",
                "segment.bytes": str(self.config.offsets_topic_segment_bytes),
                "max.message.bytes": str(2**31 - 1),
            })
        elif info.partitions != self.num_partitions:
            log.warning("%s has %d partitions; offsets_topic_num_partitions=%d is ignored",
                        OFFSETS_TOPIC, info.partitions, self.num_partitions)
        self.num_partitions = info.partitions
        await asyncio.gather(*(self.load_partition(index) for index in range(info.partitions)))
        self._active = True
        interval = self.config.offsets_retention_check_interval_ms
        if interval > 0:
            self._expiry_task = asyncio.get_running_loop().create_task(
                self._expire_forever(interval))

    async def stop(self) -> None:
        self._active = False
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            self._expiry_task = None
        for index in list(self.shards):
            self.unload_partition(index)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=10)

    async def load_partition(self, index: int) -> None:
        """Become coordinator of the groups on offsets partition ``index`` (replays its log)."""
        partition = self._broker.partitions.get(OFFSETS_TOPIC, index)
        if partition is None:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"{OFFSETS_TOPIC}-{index} is not open")
        shard = OffsetsShard(index, partition, self._executor)
        self._loading.add(index)
        try:
            await shard.load()
        finally:
            self._loading.discard(index)
        self.shards[index] = shard
        for group in shard.groups.values():
            for member in group.members.values():
                self._schedule_expiry(group, member, member.session_timeout_ms)

    def unload_partition(self, index: int) -> None:
        """Stop coordinating the groups of partition ``index``; waiting members must move."""
        shard = self.shards.pop(index, None)
        if shard is None:
            return
        shard.close()
        for group in shard.groups.values():
            self._cancel_timers(group)
            for member in group.members.values():
                member.cancel_expiry()
                answer_join(member, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                answer_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
            for handle in group.pending_members.values():
                if handle is not None:
                    handle.cancel()
        shard.groups.clear()

    # ================================================================================ lookup
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def coordinator_error(self, group_id: str | None, allow_empty: bool = False) -> ErrorCode:
        """Kafka's validateGroupStatus: NONE if this broker can serve the group now."""
        if group_id is None or (not allow_empty and group_id == ""):
            return ErrorCode.INVALID_GROUP_ID
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        index = self.partition_for(group_id)
        if index in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if index not in self.shards:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def _shard(self, group_id: str) -> OffsetsShard:
        return self.shards[self.partition_for(group_id)]

    def group(self, group_id: str) -> Group | None:
        shard = self.shards.get(self.partition_for(group_id))
        return None if shard is None else shard.groups.get(group_id)

    def _get_or_create(self, group_id: str) -> Group:
        shard = self._shard(group_id)
        group = shard.groups.get(group_id)
        if group is None:
            group = shard.groups[group_id] = Group(group_id, now_ms())
        return group

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("group coordinator task failed", exc_info=task.exception())

    def _append(self, group_id: str, entries: list[Entry]) -> Appended:
        """Append records to the group's offsets partition now (so the log keeps the order in
        which the coordinator decided things); returns the durability future or an error."""
        shard = self.shards.get(self.partition_for(group_id))
        if shard is None:
            return ErrorCode.NOT_COORDINATOR
        try:
            return shard.write(entries)
        except KafkaError as error:
            return coordinator_error(error.code)

    @staticmethod
    async def _durable(appended: Appended) -> ErrorCode:
        """Wait until an append is durable (the wait may be abandoned; the write is not)."""
        if isinstance(appended, ErrorCode):
            return appended
        try:
            await asyncio.shield(appended)
        except KafkaError as error:
            return coordinator_error(error.code)
        return ErrorCode.NONE

    # ================================================================================ timers
    def _schedule_expiry(self, group: Group, member: Member, timeout_ms: int) -> None:
        member.cancel_expiry()
        member.expiry = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._on_member_expired, group, member)

    def _on_member_expired(self, group: Group, member: Member) -> None:
        member.expiry = None
        if group.members.get(member.member_id) is not member or group.is_(DEAD):
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            # Blocked in JoinGroup/SyncGroup: the rebalance and sync timeouts cover it.
            return
        reason = ("new member did not complete its join" if member.is_new
                  else f"session timeout ({member.session_timeout_ms} ms) expired")
        log.info("member %s of group %s removed: %s", member.member_id, group.group_id, reason)
        self._remove_member_and_update_group(group, member, reason)

    def _on_pending_expired(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, False) is False:
            return
        if group.is_(PREPARING):
            self._try_complete_join(group)

    def _cancel_timers(self, group: Group) -> None:
        for handle in (group.join_timer, group.sync_timer):
            if handle is not None:
                handle.cancel()
        group.join_timer = group.sync_timer = None
        group.initial_delay = False

    def _set_join_timer(self, group: Group, delay_s: float) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
        group.join_timer = asyncio.get_running_loop().call_later(
            max(delay_s, 0), self._on_join_timer, group)

    def _on_join_timer(self, group: Group) -> None:
        group.join_timer = None
        if group.is_(PREPARING):
            self._complete_join(group)

    def _extend_initial_delay(self, group: Group) -> None:
        """A member arrived during the initial delay: wait one more delay for the next one.

        The initial delay ends once no new member has arrived for
        ``group_initial_rebalance_delay_ms``, and never later than the rebalance timeout
        (at least one delay) after it began.
        """
        if not group.initial_delay or not group.is_(PREPARING):
            return
        loop = asyncio.get_running_loop()
        deadline = min(loop.time() + self.config.group_initial_rebalance_delay_ms / 1000,
                       group.initial_delay_cap)
        self._set_join_timer(group, deadline - loop.time())

    # ================================================================================ rebalance
    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(COMPLETING):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        was_empty = group.is_(EMPTY)
        group.transition_to(PREPARING, now_ms())
        log.info("preparing to rebalance group %s (generation %d, %d members): %s",
                 group.group_id, group.generation, group.size, reason)
        delay_ms = self.config.group_initial_rebalance_delay_ms
        if was_empty and delay_ms > 0:
            group.initial_delay = True
            loop = asyncio.get_running_loop()
            group.initial_delay_cap = loop.time() + max(delay_ms,
                                                        group.rebalance_timeout_ms()) / 1000
            self._set_join_timer(group, delay_ms / 1000)
        else:
            group.initial_delay = False
            self._set_join_timer(group, group.rebalance_timeout_ms() / 1000)
            self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.is_(PREPARING) and not group.initial_delay and group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_delay = False
        # Dynamic members that did not rejoin in time are out; static ones keep their place.
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("member %s of group %s removed: did not rejoin within the rebalance "
                         "timeout", member.member_id, group.group_id)
                answer_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
                group.remove(member.member_id)
        if group.is_(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined remain: wait for them (or expiry).
            log.warning("group %s could not complete its rebalance: no member rejoined",
                        group.group_id)
            self._set_join_timer(group, group.rebalance_timeout_ms() / 1000)
            return
        group.init_next_generation(now_ms())
        if group.is_(EMPTY):
            log.info("group %s with generation %d is now empty (%s-%d)", group.group_id,
                     group.generation, OFFSETS_TOPIC, self.partition_for(group.group_id))
            appended = self._append(group.group_id,
                                    [(GroupKey(group.group_id), group.to_value())])
            self._spawn(self._store_empty_group(group, group.generation, appended))
            return
        log.info("stabilized group %s generation %d (protocol %s, %d members)",
                 group.group_id, group.generation, group.protocol_name, group.size)
        leader_view = group.current_member_metadata()
        for member in list(group.members.values()):
            answer_join(member, JoinResult(
                ErrorCode.NONE, member.member_id, group.generation, group.protocol_type,
                group.protocol_name, group.leader_id or "",
                members=leader_view if group.is_leader(member.member_id) else []))
            self._schedule_expiry(group, member, member.session_timeout_ms)
            member.is_new = False
        group.sync_timer = asyncio.get_running_loop().call_later(
            group.rebalance_timeout_ms() / 1000, self._on_sync_expired, group, group.generation)

    def _on_sync_expired(self, group: Group, generation: int) -> None:
        group.sync_timer = None
        if generation != group.generation or group.state not in (COMPLETING, STABLE) \
                or not group.pending_sync:
            return
        missing = sorted(group.pending_sync)
        log.info("group %s: members %s did not sync within the rebalance timeout",
                 group.group_id, missing)
        for member_id in missing:
            member = group.remove(member_id)
            if member is not None:
                answer_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                answer_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        self._prepare_rebalance(group, f"members {missing} did not sync")

    def _remove_pending_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            result = SyncResult(error, group.protocol_type if ok else None,
                                group.protocol_name if ok else None, member.assignment)
            if answer_sync(member, result):
                # Its session may have lapsed while it waited; start a fresh one.
                self._schedule_expiry(group, member, member.session_timeout_ms)

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        answer_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        answer_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(PREPARING):
            self._try_complete_join(group)

    async def _store_empty_group(self, group: Group, generation: int,
                                 appended: Appended) -> None:
        error = await self._durable(appended)
        if error != ErrorCode.NONE:
            log.warning("could not store empty group %s generation %d: %s", group.group_id,
                        generation, error.name)

    # ================================================================================ JoinGroup
    async def join_group(self, request: JoinRequest) -> JoinResult:
        error = self.coordinator_error(request.group_id)
        if error == ErrorCode.NONE and not (
                self.config.group_min_session_timeout_ms <= request.session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        if error != ErrorCode.NONE:
            return JoinResult(error, request.member_id)
        unknown = request.member_id == ""
        group = self.group(request.group_id)
        if group is None:
            if not unknown:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
            group = self._get_or_create(request.group_id)
        is_new_member = unknown or request.member_id in group.pending_members
        if is_new_member and group.size >= self.config.group_max_size:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, request.member_id)
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        if unknown:
            self._join_new_member(group, request, waiter)
        else:
            self._join_known_member(group, request, waiter)
        if group.is_(PREPARING):
            self._try_complete_join(group)
        return await waiter

    def _join_new_member(self, group: Group, request: JoinRequest,
                         waiter: asyncio.Future[JoinResult]) -> None:
        if group.is_(DEAD):
            waiter.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, ""))
            return
        if not group.supports_protocols(request.protocol_type,
                                        [name for name, _ in request.protocols]):
            waiter.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ""))
            return
        instance_id = request.group_instance_id
        prefix = instance_id if instance_id is not None else request.client_id
        new_member_id = f"{prefix}-{uuid.uuid4()}"
        if instance_id is not None:
            old_member_id = group.static_members.get(instance_id)
            if old_member_id is None:
                self._add_member_and_rebalance(group, request, new_member_id, waiter)
            else:
                log.info("static member %s of group %s rejoins with a new member id; replacing "
                         "%s with %s", instance_id, group.group_id, old_member_id, new_member_id)
                self._replace_static_member(group, request, old_member_id, new_member_id,
                                            waiter)
        elif request.require_known_member_id:
            # KIP-394: hand out the member id first; the member joins with it next.
            group.pending_members[new_member_id] = asyncio.get_running_loop().call_later(
                request.session_timeout_ms / 1000, self._on_pending_expired, group,
                new_member_id)
            self._extend_initial_delay(group)
            waiter.set_result(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self._add_member_and_rebalance(group, request, new_member_id, waiter)

    def _join_known_member(self, group: Group, request: JoinRequest,
                           waiter: asyncio.Future[JoinResult]) -> None:
        member_id = request.member_id
        instance_id = request.group_instance_id
        if group.is_(DEAD):
            waiter.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(request.protocol_type,
                                        [name for name, _ in request.protocols]):
            waiter.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in group.pending_members:
            if instance_id is not None:
                # Pending ids are only given to dynamic members.
                waiter.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return
            handle = group.pending_members.pop(member_id)
            if handle is not None:
                handle.cancel()
            self._add_member_and_rebalance(group, request, member_id, waiter)
            return
        if group.is_static_member_fenced(instance_id, member_id):
            waiter.set_result(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id))
            return
        member = group.members.get(member_id)
        if member is None or (instance_id is not None and
                              not group.has_static_member(instance_id)):
            waiter.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            return
        state = group.state
        if state is PREPARING:
            self._update_member_and_rebalance(group, member, request, waiter,
                                              f"member {member_id} rejoined")
        elif state is COMPLETING:
            if member.matches(request.protocols):
                # It missed its JoinGroup response: answer again for the current generation.
                waiter.set_result(self._current_join_result(group, member_id))
            else:
                self._update_member_and_rebalance(
                    group, member, request, waiter,
                    f"member {member_id} changed its metadata while the group completed")
        elif state is STABLE:
            if group.is_leader(member_id):
                # The leader rejoins to force a rebalance (e.g. topic metadata changed).
                self._update_member_and_rebalance(group, member, request, waiter,
                                                  f"leader {member_id} rejoined")
            elif not member.matches(request.protocols):
                self._update_member_and_rebalance(group, member, request, waiter,
                                                  f"member {member_id} changed its metadata")
            else:
                waiter.set_result(JoinResult(
                    ErrorCode.NONE, member_id, group.generation, group.protocol_type,
                    group.protocol_name, group.leader_id or ""))
        else:
            waiter.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _current_join_result(self, group: Group, member_id: str) -> JoinResult:
        return JoinResult(
            ErrorCode.NONE, member_id, group.generation, group.protocol_type,
            group.protocol_name, group.leader_id or "",
            members=group.current_member_metadata() if group.is_leader(member_id) else [])

    def _add_member_and_rebalance(self, group: Group, request: JoinRequest, member_id: str,
                                  waiter: asyncio.Future[JoinResult]) -> None:
        member = Member(
            member_id=member_id, group_instance_id=request.group_instance_id,
            client_id=request.client_id, client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type, protocols=list(request.protocols),
            is_new=True)
        group.add(member, waiter)
        # New members cannot heartbeat until they know their generation; if the client goes
        # away instead, this removes it eventually (it would rejoin if still there).
        self._schedule_expiry(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._extend_initial_delay(group)
        self._maybe_prepare_rebalance(group, f"new member {member_id} joined"
                                      + (f" ({request.reason})" if request.reason else ""))

    def _update_member_and_rebalance(self, group: Group, member: Member, request: JoinRequest,
                                     waiter: asyncio.Future[JoinResult], reason: str) -> None:
        group.update_member(member, list(request.protocols), request.rebalance_timeout_ms,
                            request.session_timeout_ms, waiter)
        if request.reason:
            reason += f" ({request.reason})"
        self._maybe_prepare_rebalance(group, reason)

    def _replace_static_member(self, group: Group, request: JoinRequest, old_member_id: str,
                               new_member_id: str, waiter: asyncio.Future[JoinResult]) -> None:
        instance_id = request.group_instance_id
        assert instance_id is not None
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._schedule_expiry(group, member, member.session_timeout_ms)
        previous = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, list(request.protocols), request.rebalance_timeout_ms,
                            request.session_timeout_ms, waiter)
        if group.is_(STABLE):
            if group.select_protocol() == group.protocol_name:
                # Same protocol: no rebalance; persist the new member id, then answer.
                appended = self._append(group.group_id,
                                        [(GroupKey(group.group_id), group.to_value())])
                self._spawn(self._store_replaced_static_member(
                    group, member, old_member_id, previous, current_leader,
                    request.support_skip_assignment, appended))
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {instance_id} rejoined with another protocol")
        elif group.is_(COMPLETING):
            self._maybe_prepare_rebalance(
                group, f"static member {instance_id} rejoined while the group completed")
        # PreparingRebalance: it simply takes part in the rebalance under way.

    async def _store_replaced_static_member(
            self, group: Group, member: Member, old_member_id: str,
            previous: tuple[list[tuple[str, bytes]], int, int], current_leader: str | None,
            support_skip_assignment: bool, appended: Appended) -> None:
        new_member_id = member.member_id
        error = await self._durable(appended)
        if group.members.get(new_member_id) is not member:
            return  # replaced or removed again meanwhile; that path answered the request
        if error != ErrorCode.NONE:
            waiter, member.join_waiter = member.join_waiter, None
            instance_id = member.group_instance_id
            assert instance_id is not None
            group.replace_static_member(instance_id, new_member_id, old_member_id)
            protocols, rebalance_timeout, session_timeout = previous
            group.update_member(member, protocols, rebalance_timeout, session_timeout, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(JoinResult(error, new_member_id))
            return
        if support_skip_assignment and group.is_leader(new_member_id):
            # KIP-814: the leader learns the group's metadata but must not reassign.
            result = JoinResult(ErrorCode.NONE, new_member_id, group.generation,
                                group.protocol_type, group.protocol_name, new_member_id,
                                skip_assignment=True, members=group.current_member_metadata())
        else:
            # Name the old leader id so the rejoining member never thinks it must assign: a
            # stable group would not pass on a new assignment anyway.
            result = JoinResult(ErrorCode.NONE, new_member_id, group.generation,
                                group.protocol_type, group.protocol_name, current_leader or "")
        answer_join(member, result)

    # ================================================================================ SyncGroup
    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None,
                         protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        error = self.coordinator_error(group_id)
        if error != ErrorCode.NONE:
            return SyncResult(error)
        group = self.group(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(DEAD):
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(group_instance_id, member_id):
            return SyncResult(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_(EMPTY):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(PREPARING):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.is_(STABLE):
            self._remove_pending_sync(group, member_id)
            self._schedule_expiry(group, member, member.session_timeout_ms)
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name,
                              member.assignment)
        # CompletingRebalance: wait for the leader's assignment to be stored.
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        answer_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))  # a superseded one
        member.sync_waiter = waiter
        self._remove_pending_sync(group, member_id)
        if group.is_leader(member_id):
            full = {mid: assignments.get(mid, b"") for mid in group.members}
            appended = self._append(group_id, [(GroupKey(group_id), group.to_value(full))])
            self._spawn(self._store_assignment(group, group.generation, full, appended))
        return await waiter

    async def _store_assignment(self, group: Group, generation: int,
                                assignments: dict[str, bytes], appended: Appended) -> None:
        error = await self._durable(appended)
        # Members may have come or gone while the write was under way.
        if not group.is_(COMPLETING) or group.generation != generation:
            return
        if error != ErrorCode.NONE:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, f"could not store the assignment: {error.name}")
            return
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(STABLE, now_ms())
        log.info("group %s generation %d is stable", group.group_id, generation)

    # ================================================================================ Heartbeat
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        error = self.coordinator_error(group_id)
        if error != ErrorCode.NONE:
            return error
        group = self.group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_expiry(group, member, member.session_timeout_ms)
        if group.is_(PREPARING):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # ================================================================================ LeaveGroup
    def leave_group(self, group_id: str, leaving: Iterable[tuple[str, str | None, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members (member id, instance id, reason); a group error or one per member."""
        error = self.coordinator_error(group_id)
        if error != ErrorCode.NONE:
            return error, []
        group = self.group(group_id)
        leaving = list(leaving)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id, reason in leaving:
            why = f"member {member_id or instance_id} left" + (f" ({reason})" if reason else "")
            if member_id == "":
                # Administrative removal of a static member by its instance id.
                current = group.static_members.get(instance_id) if instance_id else None
                if current is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    self._remove_member_and_update_group(group, group.members[current], why)
                    results.append(ErrorCode.NONE)
            elif member_id in group.pending_members:
                handle = group.pending_members.pop(member_id)
                if handle is not None:
                    handle.cancel()
                if group.is_(PREPARING):
                    self._try_complete_join(group)
                results.append(ErrorCode.NONE)
            elif group.is_static_member_fenced(instance_id, member_id):
                results.append(ErrorCode.FENCED_INSTANCE_ID)
            elif member_id in group.members:
                log.info("%s of group %s", why, group_id)
                self._remove_member_and_update_group(group, group.members[member_id], why)
                results.append(ErrorCode.NONE)
            else:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
        return ErrorCode.NONE, results

    # ================================================================================ offsets
    def _validate_commit(self, group: Group, generation_id: int, member_id: str,
                         group_instance_id: str | None) -> ErrorCode:
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id != "" or group_instance_id is not None:
            if group.is_static_member_fenced(group_instance_id, member_id):
                return ErrorCode.FENCED_INSTANCE_ID
            if member_id not in group.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation_id != group.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_(EMPTY):
            # Only members may commit for a group that has members.
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(COMPLETING):
            # Its generation is current, so it got the JoinGroup response: sync, then commit.
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                             group_instance_id: str | None,
                             offsets: dict[TopicPartition, OffsetValue],
                             api_version: int = 8) -> dict[TopicPartition, ErrorCode]:
        """Store committed offsets once durable; an error code per partition."""
        error = self.coordinator_error(group_id, allow_empty=True)
        group: Group | None = None
        if error == ErrorCode.NONE:
            group = self.group(group_id)
            if group is None:
                if generation_id < 0:
                    # A consumer or tool that uses Kafka only to store offsets.
                    group = self._get_or_create(group_id)
                else:
                    error = (ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9
                             else ErrorCode.ILLEGAL_GENERATION)
            if group is not None:
                error = self._validate_commit(group, generation_id, member_id,
                                              group_instance_id)
        if error != ErrorCode.NONE or group is None:
            return dict.fromkeys(offsets, error)
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_expiry(group, member, member.session_timeout_ms)
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetValue] = {}
        limit = self.config.offset_metadata_max_bytes
        for tp, value in offsets.items():
            if len(value.metadata.encode()) > limit:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = value
        if not accepted:
            return results
        durable = self._append(group_id, offset_entries(group_id, accepted))
        if isinstance(durable, ErrorCode):
            results.update(dict.fromkeys(accepted, durable))
            return results
        tokens = {tp: group.offset_token(tp) for tp in accepted}
        for tp in accepted:
            group.pending_commits[tp] += 1
        durable.add_done_callback(
            lambda future: self._commit_done(group, accepted, tokens, future))
        results.update(dict.fromkeys(accepted, await self._durable(durable)))
        return results

    @staticmethod
    def _commit_done(group: Group, accepted: dict[TopicPartition, OffsetValue],
                     tokens: dict[TopicPartition, int], future: asyncio.Future[None]) -> None:
        ok = not future.cancelled() and future.exception() is None
        for tp, value in accepted.items():
            group.pending_commits[tp] -= 1
            if group.pending_commits[tp] <= 0:
                del group.pending_commits[tp]
            # Skip offsets deleted (OffsetDelete, DeleteGroups, expiry) after this commit.
            if ok and group.offset_token(tp) == tokens[tp]:
                group.offsets[tp] = value

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      require_stable: bool = False
                      ) -> tuple[ErrorCode, list[FetchedOffset]]:
        """Committed offsets of these partitions (None: every partition the group has)."""
        error = self.coordinator_error(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return error, []
        group = self.group(group_id)
        if group is None or group.is_(DEAD):
            return ErrorCode.NONE, [FetchedOffset(t, p) for t, p in partitions or []]
        if partitions is None:
            partitions = sorted(group.offsets)
        results = []
        for topic, partition in partitions:
            if require_stable and group.pending_commits[(topic, partition)] > 0:
                results.append(FetchedOffset(topic, partition,
                                             error=ErrorCode.UNSTABLE_OFFSET_COMMIT))
                continue
            value = group.offsets.get((topic, partition))
            if value is None:
                results.append(FetchedOffset(topic, partition))
            else:
                results.append(FetchedOffset(topic, partition, value.offset, value.leader_epoch,
                                             value.metadata))
        return ErrorCode.NONE, results

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                             ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: drop committed offsets of topics the group no longer consumes."""
        error = self.coordinator_error(group_id)
        if error != ErrorCode.NONE:
            return error, {}
        group = self.group(group_id)
        if group is None or group.is_(DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        results: dict[TopicPartition, ErrorCode] = {}
        if group.is_(EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            code = await self._remove_offsets(group, eligible)
            results.update(dict.fromkeys(eligible, code))
        return ErrorCode.NONE, results

    async def _remove_offsets(self, group: Group, partitions: list[TopicPartition]) -> ErrorCode:
        removed = group.remove_offsets(partitions)
        dead = self._maybe_retire(group)
        if not removed and not dead:
            return ErrorCode.NONE
        return await self._durable(
            self._append(group.group_id, tombstones(group.group_id, removed, dead)))

    def _maybe_retire(self, group: Group) -> bool:
        """An empty group without offsets is gone (Kafka: Empty -> Dead, tombstone)."""
        if not group.is_(EMPTY) or group.has_offsets():
            return False
        group.transition_to(DEAD, now_ms())
        self._cancel_timers(group)
        shard = self.shards.get(self.partition_for(group.group_id))
        if shard is not None and shard.groups.get(group.group_id) is group:
            del shard.groups[group.group_id]
        return True

    # ================================================================================ admin
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
            elif not group.is_(EMPTY):
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
            results[group_id] = await self._durable(appended)
        return results

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary | None]:
        error = self.coordinator_error(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return error, None
        group = self.group(group_id)
        if group is None or group.is_(DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, None
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
                if wanted_states is not None and group.state.value.lower() not in wanted_states:
                    continue
                if wanted_types is not None and GROUP_TYPE_CLASSIC not in wanted_types:
                    continue
                listed.append(ListedGroup(group.group_id, group.protocol_type or "",
                                          group.state.value))
        listed.sort(key=lambda g: g.group_id)
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._loading else ErrorCode.NONE
        return error, listed

    # ================================================================================ expiry
    async def _expire_forever(self, interval_ms: int) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await self.expire_offsets()
            except Exception:
                log.exception("offset expiration failed")

    async def expire_offsets(self, now: int | None = None) -> int:
        """Delete expired offsets and groups left empty without offsets; returns how many."""
        now = now_ms() if now is None else now
        retention_ms = self.config.offsets_retention_minutes * 60_000
        removed_total = 0
        writes: list[Appended] = []
        for shard in list(self.shards.values()):
            entries: list[Entry] = []
            for group in list(shard.groups.values()):
                expired = group.expired_offsets(now, retention_ms)
                removed = group.remove_offsets(expired)
                dead = self._maybe_retire(group)
                if removed or dead:
                    entries.extend(tombstones(group.group_id, removed, dead))
                    removed_total += len(removed)
                    log.info("group %s: %d offsets expired%s", group.group_id, len(removed),
                             "; group removed" if dead else "")
            if entries:
                try:
                    writes.append(shard.write(entries))
                except KafkaError as failure:
                    log.warning("could not write %d tombstones to %s-%d: %s", len(entries),
                                OFFSETS_TOPIC, shard.index, failure)
        for appended in writes:
            code = await self._durable(appended)
            if code != ErrorCode.NONE:
                log.warning("tombstones not durable: %s", code.name)
        return removed_total
