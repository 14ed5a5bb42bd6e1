"""InitProducerId: a producer id for an idempotent producer, or the id and next epoch of a
transactional id from its transaction coordinator (bmq.coordinators.transactions)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import InitProducerIdRequest, InitProducerIdResponse


async def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest,
                                  version: int) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        if not ctx.authorize(Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                             request.transactional_id):
            return InitProducerIdResponse(
                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1,
                producer_epoch=-1)
        coordinator = ctx.broker.transactions
        answer = await coordinator.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, request.producer_id,
            request.producer_epoch)
        # PRODUCER_FENCED reaches clients of v0-3 as INVALID_PRODUCER_EPOCH
        # (bmq.protocol.legacy_errors)
        return InitProducerIdResponse(error_code=answer.error, producer_id=answer.producer_id,
                                      producer_epoch=answer.producer_epoch)
    # An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (Kafka 3).
    if ctx.authorizing and not ctx.authorize(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER,
                                             CLUSTER_NAME, audit=False) and not any(
            ctx.authorize(Operation.WRITE, ResourceType.TOPIC, t.name, audit=False)
            for t in ctx.broker.topics.all()):
        ctx.authorize_cluster(Operation.IDEMPOTENT_WRITE)     # audited
        return InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                      producer_id=-1, producer_epoch=-1)
    # As Kafka does for non-transactional producers: always a new id, so an epoch bump
    # (KIP-360) is simply a new producer with fresh sequence numbers.
    producer_id = await ctx.broker.allocate_producer_id()
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id,
                                  producer_epoch=0)
