"""AddPartitionsToTxn: add partitions to a producer's transaction (v0-3: one transaction from
its producer; v4+: a batch of transactions, each possibly verify-only, KIP-890 part 1)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from bmq.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from bmq.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)

BATCHED_VERSION = 4


async def _add(ctx: RequestContext, transactional_id: str,
               producer_id: int, producer_epoch: int, topics: list[AddPartitionsToTxnTopic],
               verify_only: bool, version: int) -> list[AddPartitionsToTxnTopicResult]:
    asked = [(t.name, p) for t in topics for p in t.partitions]
    denied = _denied(ctx, transactional_id, topics)
    if denied:
        errors = {tp: denied.get(tp[0], ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in asked}
    else:
        errors = await ctx.broker.transactions.add_partitions(
            transactional_id, producer_id, producer_epoch, asked, verify_only)
    return [AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
        AddPartitionsToTxnPartitionResult(
            partition_index=p, partition_error_code=errors[(t.name, p)])
        for p in t.partitions]) for t in topics]


def _denied(ctx: RequestContext, transactional_id: str,
            topics: list[AddPartitionsToTxnTopic]) -> dict[str, ErrorCode]:
    """Topics refused (WRITE on the transactional id, then on each topic), by name."""
    if not ctx.authorize(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return {t.name: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for t in topics}
    return {t.name: ErrorCode.TOPIC_AUTHORIZATION_FAILED for t in topics
            if not ctx.authorize(Operation.WRITE, ResourceType.TOPIC, t.name)}


async def handle_add_partitions_to_txn(ctx: RequestContext, request: AddPartitionsToTxnRequest,
                                       version: int) -> AddPartitionsToTxnResponse:
    if version < BATCHED_VERSION:
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=await _add(
            ctx, request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id, request.v3_and_below_producer_epoch,
            request.v3_and_below_topics, False, version))
    results = []
    for txn in request.transactions:
        results.append(AddPartitionsToTxnResult(
            transactional_id=txn.transactional_id,
            topic_results=await _add(ctx, txn.transactional_id, txn.producer_id,
                                     txn.producer_epoch, txn.topics, txn.verify_only, version)))
    return AddPartitionsToTxnResponse(results_by_transaction=results)
