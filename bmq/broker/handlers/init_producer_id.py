"""InitProducerId for idempotent producers: a fresh producer id with epoch 0."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import InitProducerIdRequest, InitProducerIdResponse


async def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest,
                                  version: int) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        # Transactions arrive with their own issue; refuse clearly rather than half-work.
        return InitProducerIdResponse(
            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1,
            producer_epoch=-1)
    # As Kafka does for non-transactional producers: always a new id, so an epoch bump
    # (KIP-360) is simply a new producer with fresh sequence numbers.
    producer_id = await ctx.broker.allocate_producer_id()
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id,
                                  producer_epoch=0)
