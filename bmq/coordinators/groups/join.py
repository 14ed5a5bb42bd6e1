"""JoinGroup: new, known and static members (KIP-345, KIP-394, KIP-814) joining a group."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

from bmq.coordinators.groups.core import COMPLETING, DEAD, PREPARING, STABLE
from bmq.coordinators.groups.group import (
    Group,
    JoinResult,
    Member,
    answer_join,
)
from bmq.coordinators.groups.rebalance import RebalanceProtocol
from bmq.coordinators.groups.records import GroupKey
from bmq.coordinators.sharded import Appended
from bmq.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member that never completes its join.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


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



class JoinGroupProtocol(RebalanceProtocol):
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
        if group is not None and group.consumer is not None:
            if group.consumer.members:
                # BMQ does not mix classic members into KIP-848 groups (see docs/groups.md).
                return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
            self._forget_consumer_group(group)
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
                self.tasks.spawn(self._store_replaced_static_member(
                    group, member, old_member_id, previous, current_leader,
                    request.support_skip_assignment, appended))
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {instance_id} rejoined with another protocol")
        elif group.is_(COMPLETING):
            self._maybe_prepare_rebalance(
                group, f"static member {instance_id} rejoined while the group completed")

    async def _store_replaced_static_member(
            self, group: Group, member: Member, old_member_id: str,
            previous: tuple[list[tuple[str, bytes]], int, int], current_leader: str | None,
            support_skip_assignment: bool, appended: Appended) -> None:
        new_member_id = member.member_id
        error = await self.durable(appended)
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
