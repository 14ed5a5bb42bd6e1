"""DescribeTransactions: the state of transactional ids (kafka-transactions.sh describe)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DescribeTransactionsRequest, DescribeTransactionsResponse
from bmq.protocol.messages.describe_transactions_response import TopicData, TransactionState


async def handle_describe_transactions(ctx: RequestContext,
                                       request: DescribeTransactionsRequest,
                                       version: int) -> DescribeTransactionsResponse:
    coordinator = ctx.broker.transactions
    states = []
    for transactional_id in request.transactional_ids:
        if not ctx.authorize(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                             transactional_id):
            states.append(TransactionState(
                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                transactional_id=transactional_id))
            continue
        error, meta = coordinator.describe(transactional_id)
        if meta is None:
            states.append(TransactionState(error_code=error, transactional_id=transactional_id))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(index)
        states.append(TransactionState(
            transactional_id=transactional_id, transaction_state=meta.state.kafka_name,
            transaction_timeout_ms=meta.timeout_ms, transaction_start_time_ms=meta.start_ms,
            producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
            topics=[TopicData(topic=t, partitions=p) for t, p in by_topic.items()]))
    return DescribeTransactionsResponse(transaction_states=states)
