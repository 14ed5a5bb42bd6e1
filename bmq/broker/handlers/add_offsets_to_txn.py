"""AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction, so
the offsets TxnOffsetCommit stores for it commit or abort with the transaction."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.metadata.topics import OFFSETS_TOPIC
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse


async def handle_add_offsets_to_txn(ctx: RequestContext, request: AddOffsetsToTxnRequest,
                                    version: int) -> AddOffsetsToTxnResponse:
    if not ctx.authorize(Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         request.transactional_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(Operation.READ, ResourceType.GROUP, request.group_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = ctx.broker.transactions
    tp = (OFFSETS_TOPIC, ctx.broker.groups.partition_for(request.group_id))
    errors = await coordinator.add_partitions(request.transactional_id, request.producer_id,
                                              request.producer_epoch, [tp])
    return AddOffsetsToTxnResponse(error_code=errors[tp])
