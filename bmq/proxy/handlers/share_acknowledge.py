"""ShareAcknowledge through a proxy: each owner gets its partitions' acknowledgements in its
own share session (bmq.proxy.share)."""

from __future__ import annotations

import uuid

from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from bmq.protocol.messages.share_acknowledge_response import (
    LeaderIdAndEpoch,
    PartitionData,
    ShareAcknowledgeTopicResponse,
)
from bmq.proxy.handlers.base import ProxyContext
from bmq.proxy.handlers.share_fetch import SESSION_LOST, leader, owner_of
from bmq.proxy.share import acknowledge_request, ask_owners, plan, settle


async def handle_share_acknowledge(ctx: ProxyContext, request: ShareAcknowledgeRequest,
                                   version: int) -> ShareAcknowledgeResponse:
    group_id, member_id = request.group_id or "", request.member_id or ""
    epoch = request.share_session_epoch
    if epoch == 0:
        return ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    relay = ctx.proxy.share_sessions
    error, session = relay.use(group_id, member_id, epoch)
    if session is None:
        return ShareAcknowledgeResponse(error_code=error)
    acks = {(t.topic_id, p.partition_index): p.acknowledgement_batches
            for t in request.topics for p in t.partitions}
    closing = epoch == -1
    calls, failed = plan(session, [], acks, owner_of(ctx), closing)
    sendable = []
    for call in calls:
        if call.epoch == 0:      # no session there: the records were not acquired through it
            failed.update(dict.fromkeys(call.acks, ErrorCode.NOT_LEADER_OR_FOLLOWER))
        else:
            sendable.append(call)
    answers = await ask_owners(ctx.links, sendable, lambda c: acknowledge_request(request, c),
                               version)
    partitions: dict[uuid.UUID, list[PartitionData]] = {}
    for call, answer in answers:
        code = ErrorCode.NOT_LEADER_OR_FOLLOWER if answer is None \
            else ErrorCode(answer.error_code)
        if code in SESSION_LOST and not closing:
            relay.drop(group_id, member_id)
            return ShareAcknowledgeResponse(error_code=code)
        settle(call, code)
        if code != ErrorCode.NONE:
            failed.update(dict.fromkeys(call.acks, code))
            continue
        for topic in answer.responses:
            for p in topic.partitions:
                own = leader(ctx, topic.topic_id, p.partition_index)
                p.current_leader = LeaderIdAndEpoch(leader_id=own.leader_id,
                                                    leader_epoch=own.leader_epoch)
                partitions.setdefault(topic.topic_id, []).append(p)
    for (topic_id, index), code in failed.items():
        own = leader(ctx, topic_id, index)
        partitions.setdefault(topic_id, []).append(PartitionData(
            partition_index=index, error_code=code,
            current_leader=LeaderIdAndEpoch(leader_id=own.leader_id,
                                            leader_epoch=own.leader_epoch)))
    return ShareAcknowledgeResponse(responses=[
        ShareAcknowledgeTopicResponse(topic_id=t, partitions=p) for t, p in partitions.items()])
