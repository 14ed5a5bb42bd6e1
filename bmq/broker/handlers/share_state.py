"""BmqShareState (BMQ-internal): the share coordinator's side of a cluster broker. The leader
of a data partition reads the state of its share-partitions here and writes each change
(bmq.broker.share_peers); the write is answered once durable."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.share.records import StateKey, StateRecord, decode_value, encode_value
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import BmqShareStateRequest, BmqShareStateResponse
from bmq.protocol.primitives import DecodeError


async def handle_share_state(ctx: RequestContext, request: BmqShareStateRequest,
                             version: int) -> BmqShareStateResponse:
    if not ctx.authorize_internal():    # BMQ's own brokers
        return BmqShareStateResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    state_log = ctx.broker.share.state_log
    key = StateKey(request.group_id, request.topic_id, request.partition)
    if request.read_state:
        appended, state = state_log.read_for_leader(key, request.leader_epoch)
        code = await state_log.durable(appended)
        value = None if state is None or code != ErrorCode.NONE \
            else encode_value(state.start_offset, state.runs)
        return BmqShareStateResponse(error_code=code, value=value)
    if request.reset:      # the group's coordinator rewrites it (offsets altered, deleted)
        start = None if request.value is None else decode_value(bytes(request.value))[0]
        if request.forwarded:            # by the partition's leader: here is the coordinator
            code = await state_log.durable(state_log.admin_write(key, start))
        else:                            # to the partition's leader
            peers = ctx.broker.share_peers
            code = ErrorCode.INVALID_REQUEST if peers is None \
                else await peers.reset(key, start)
        return BmqShareStateResponse(error_code=code)
    if request.value is None:
        record = StateRecord(key, True, -1, None)
    else:
        try:
            record = StateRecord(key, request.snapshot, *decode_value(bytes(request.value)))
        except (DecodeError, ValueError):
            return BmqShareStateResponse(error_code=ErrorCode.INVALID_REQUEST)
    # Appended before anything is awaited: a leader's writes are appended in the order sent.
    appended = state_log.write_for_leader(key, request.leader_epoch, record)
    return BmqShareStateResponse(error_code=await state_log.durable(appended))
