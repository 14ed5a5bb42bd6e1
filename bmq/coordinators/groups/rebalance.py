"""Kafka's classic rebalance protocol: preparing and completing rebalances, SyncGroup,
Heartbeat and LeaveGroup, and the timers that drive them.

A JoinGroup or SyncGroup that has to wait for the rest of the group parks a future on its member
and the request handler awaits it. Group metadata is appended to the group's
``__consumer_offsets`` partition after each completed rebalance.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from bmq.coordinators.groups.core import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    GroupCoordinatorCore,
)
from bmq.coordinators.groups.group import (
    Group,
    JoinResult,
    Member,
    SyncResult,
    answer_join,
    answer_sync,
)
from bmq.coordinators.groups.records import GroupKey
from bmq.coordinators.sharded import Appended
from bmq.metadata.topics import OFFSETS_TOPIC
from bmq.protocol.errors import ErrorCode
from bmq.writepath.partitions import now_ms

log = logging.getLogger(__name__)


class RebalanceProtocol(GroupCoordinatorCore):
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
            self.tasks.spawn(self._store_empty_group(group, group.generation, appended))
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
        error = await self.durable(appended)
        if error != ErrorCode.NONE:
            log.warning("could not store empty group %s generation %d: %s", group.group_id,
                        generation, error.name)

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
            self.tasks.spawn(self._store_assignment(group, group.generation, full, appended))
        return await waiter

    async def _store_assignment(self, group: Group, generation: int,
                                assignments: dict[str, bytes], appended: Appended) -> None:
        error = await self.durable(appended)
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
