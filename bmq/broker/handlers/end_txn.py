"""EndTxn: commit or abort a producer's transaction; answered once the markers are durable in
every partition of the transaction and the transaction is complete in its log."""

from __future__ import annotations

from bmq.broker.handlers.add_partitions_to_txn import fenced_code
from bmq.broker.handlers.base import RequestContext
from bmq.protocol.messages import EndTxnRequest, EndTxnResponse


async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest,
                         version: int) -> EndTxnResponse:
    coordinator = ctx.broker.transactions
    error = await coordinator.end_txn(request.transactional_id, request.producer_id,
                                      request.producer_epoch, request.committed)
    return EndTxnResponse(error_code=fenced_code(error, version),
                          producer_id=request.producer_id, producer_epoch=request.producer_epoch)
