"""ShareFetch through a proxy: split by partition owner, answers merged (bmq.proxy.share)."""

from __future__ import annotations

import uuid
from typing import Any

from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ShareFetchRequest, ShareFetchResponse
from bmq.protocol.messages.share_fetch_response import (
    LeaderIdAndEpoch,
    PartitionData,
    ShareFetchableTopicResponse,
)
from bmq.proxy.handlers.base import ProxyContext
from bmq.proxy.share import IdPartition, ask_owners, fetch_request, plan, settle

# The owner's session is gone (it restarted, or the partition moved): the client starts anew.
SESSION_LOST = frozenset({ErrorCode.SHARE_SESSION_NOT_FOUND,
                          ErrorCode.INVALID_SHARE_SESSION_EPOCH})


def owner_of(ctx: ProxyContext) -> Any:
    """``tp`` -> the address of its owner, or the error its partition is answered."""
    def find(tp: IdPartition) -> tuple[str, int] | ErrorCode:
        info = ctx.proxy.topic_by_id(tp[0])
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_ID
        owner = ctx.proxy.cluster.owner(info.name, tp[1])
        if owner is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return owner.node.host, owner.node.port
    return find


def leader(ctx: ProxyContext, topic_id: uuid.UUID, index: int) -> LeaderIdAndEpoch:
    """The proxy as the partition's leader, as Metadata names it."""
    info = ctx.proxy.topic_by_id(topic_id)
    if info is None:
        return LeaderIdAndEpoch()
    return LeaderIdAndEpoch(leader_id=ctx.proxy.leader(info.name, index),
                            leader_epoch=ctx.proxy.epoch(info.name, index))


async def handle_share_fetch(ctx: ProxyContext, request: ShareFetchRequest,
                             version: int) -> ShareFetchResponse:
    group_id, member_id = request.group_id or "", request.member_id or ""
    epoch = request.share_session_epoch
    relay = ctx.proxy.share_sessions
    error, session = relay.use(group_id, member_id, epoch)
    if session is None:
        return ShareFetchResponse(error_code=error)
    acks = {(t.topic_id, p.partition_index): p.acknowledgement_batches
            for t in request.topics for p in t.partitions if p.acknowledgement_batches}
    closing = epoch == -1
    if not closing:
        for topic in request.topics:
            for p in topic.partitions:
                if (topic.topic_id, p.partition_index) not in session.partitions:
                    session.partitions.append((topic.topic_id, p.partition_index))
        for forgotten in request.forgotten_topics_data:
            for index in forgotten.partitions:
                if (forgotten.topic_id, index) in session.partitions:
                    session.partitions.remove((forgotten.topic_id, index))
    calls, failed = plan(session, [] if closing else session.partitions, acks, owner_of(ctx),
                         closing)
    answers = await ask_owners(ctx.links, calls, lambda c: fetch_request(request, c), version)
    partitions: dict[uuid.UUID, list[PartitionData]] = {}
    lock_ms = 0
    for call, answer in answers:
        unreachable = answer is None
        code = ErrorCode.NOT_LEADER_OR_FOLLOWER if unreachable else ErrorCode(answer.error_code)
        if code in SESSION_LOST and not closing:
            relay.drop(group_id, member_id)
            return ShareFetchResponse(error_code=code)
        if code != ErrorCode.NONE:
            for tp in {*call.owner.partitions, *call.added, *call.acks}:
                failed[tp] = code
            settle(call, code)
            continue
        settle(call, code)
        lock_ms = max(lock_ms, answer.acquisition_lock_timeout_ms)
        for topic in answer.responses:
            for p in topic.partitions:
                p.current_leader = leader(ctx, topic.topic_id, p.partition_index)
                partitions.setdefault(topic.topic_id, []).append(p)
    for (topic_id, index), code in failed.items():
        partitions.setdefault(topic_id, []).append(PartitionData(
            partition_index=index, error_code=code, records=b"",
            acknowledge_error_code=code if (topic_id, index) in acks else ErrorCode.NONE,
            current_leader=leader(ctx, topic_id, index)))
    return ShareFetchResponse(
        acquisition_lock_timeout_ms=lock_ms,
        responses=[ShareFetchableTopicResponse(topic_id=t, partitions=p)
                   for t, p in partitions.items()])
