"""AddPartitionsToTxn: add partitions to a producer's transaction (v0-3: one transaction from
its producer; v4+: a batch of transactions, each possibly verify-only, KIP-890 part 1)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.transactions import TransactionCoordinator
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from bmq.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from bmq.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)

BATCHED_VERSION = 4
# PRODUCER_FENCED from v2 of AddPartitionsToTxn, AddOffsetsToTxn and EndTxn (KIP-588).
PRODUCER_FENCED_VERSION = 2


def fenced_code(error: ErrorCode, version: int) -> ErrorCode:
    """PRODUCER_FENCED as a client of this request version knows it."""
    if error == ErrorCode.PRODUCER_FENCED and version < PRODUCER_FENCED_VERSION:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


async def _add(coordinator: TransactionCoordinator, transactional_id: str,
               producer_id: int, producer_epoch: int, topics: list[AddPartitionsToTxnTopic],
               verify_only: bool, version: int) -> list[AddPartitionsToTxnTopicResult]:
    asked = [(t.name, p) for t in topics for p in t.partitions]
    errors = await coordinator.add_partitions(transactional_id, producer_id, producer_epoch,
                                              asked, verify_only)
    return [AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
        AddPartitionsToTxnPartitionResult(
            partition_index=p, partition_error_code=fenced_code(errors[(t.name, p)], version))
        for p in t.partitions]) for t in topics]


async def handle_add_partitions_to_txn(ctx: RequestContext, request: AddPartitionsToTxnRequest,
                                       version: int) -> AddPartitionsToTxnResponse:
    coordinator = ctx.broker.transactions
    if version < BATCHED_VERSION:
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=await _add(
            coordinator, request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id, request.v3_and_below_producer_epoch,
            request.v3_and_below_topics, False, version))
    results = []
    for txn in request.transactions:
        results.append(AddPartitionsToTxnResult(
            transactional_id=txn.transactional_id,
            topic_results=await _add(coordinator, txn.transactional_id, txn.producer_id,
                                     txn.producer_epoch, txn.topics, txn.verify_only, version)))
    return AddPartitionsToTxnResponse(results_by_transaction=results)
