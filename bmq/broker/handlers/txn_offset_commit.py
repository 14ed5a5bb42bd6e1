"""TxnOffsetCommit: a group's offsets committed inside a producer's transaction (visible in
the group only once the transaction commits; bmq.coordinators.groups.txn_offsets)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.groups.records import OffsetValue
from bmq.metadata.acls import Operation, ResourceType
from bmq.metadata.topics import OFFSETS_TOPIC
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from bmq.protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from bmq.writepath.partitions import now_ms

GROUP_METADATA_VERSION = 3   # generation, member id and instance id from v3 (KIP-447)


async def _producer_error(ctx: RequestContext, request: TxnOffsetCommitRequest) -> ErrorCode:
    """The producer must own the transaction, which must hold the group's offsets partition
    (AddOffsetsToTxn first); asked of the transaction's coordinator, on this broker or (in
    cluster mode) another."""
    broker = ctx.broker
    if not ctx.authorize(Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         request.transactional_id):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if not ctx.authorize(Operation.READ, ResourceType.GROUP, request.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    tp = (OFFSETS_TOPIC, broker.groups.partition_for(request.group_id))
    error = broker.transactions.verify(request.transactional_id, request.producer_id,
                                       request.producer_epoch, tp)
    if error == ErrorCode.NOT_COORDINATOR and broker.txn_peers is not None:
        error = await broker.txn_peers.verification(
            request.transactional_id, request.producer_id, request.producer_epoch, tp)
        if error == ErrorCode.NOT_ENOUGH_REPLICAS:    # the coordinator is not available now
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS   # (retriable for this API)
    if error == ErrorCode.INVALID_PRODUCER_EPOCH:
        return ErrorCode.PRODUCER_FENCED
    return error


async def handle_txn_offset_commit(ctx: RequestContext, request: TxnOffsetCommitRequest,
                                   version: int) -> TxnOffsetCommitResponse:
    now = now_ms()
    offsets = {(t.name, p.partition_index): OffsetValue(
        offset=p.committed_offset, leader_epoch=p.committed_leader_epoch,
        metadata=p.committed_metadata or "", commit_timestamp=now)
        for t in request.topics for p in t.partitions}
    error = await _producer_error(ctx, request)
    errors: dict[tuple[str, int], ErrorCode]
    if error != ErrorCode.NONE:
        errors = dict.fromkeys(offsets, error)
    else:
        group_fields = version >= GROUP_METADATA_VERSION
        errors = await ctx.broker.groups.commit_txn_offsets(
            request.group_id, request.producer_id, request.producer_epoch,
            request.generation_id if group_fields else -1,
            request.member_id if group_fields else "",
            request.group_instance_id if group_fields else None, offsets)
    return TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponseTopic(name=t.name, partitions=[
        TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                         error_code=errors[(t.name, p.partition_index)])
        for p in t.partitions]) for t in request.topics])
