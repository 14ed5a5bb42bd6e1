"""EndTxn: commit or abort a producer's transaction; answered once the markers are durable in
every partition of the transaction and the transaction is complete in its log."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import EndTxnRequest, EndTxnResponse


async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest,
                         version: int) -> EndTxnResponse:
    if not ctx.authorize(Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         request.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    coordinator = ctx.broker.transactions
    error = await coordinator.end_txn(request.transactional_id, request.producer_id,
                                      request.producer_epoch, request.committed)
    return EndTxnResponse(error_code=error,
                          producer_id=request.producer_id, producer_epoch=request.producer_epoch)
