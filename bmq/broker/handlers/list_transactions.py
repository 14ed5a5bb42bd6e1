"""ListTransactions: transactional ids this broker coordinates, filtered as Kafka filters them
(states, producer ids, v1: running longer than a duration, v2: an id pattern)."""

from __future__ import annotations

import re

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.transactions import TxnState
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ListTransactionsRequest, ListTransactionsResponse
from bmq.protocol.messages.list_transactions_response import TransactionState
from bmq.protocol.re2 import compile_re2
from bmq.writepath.partitions import now_ms

STATES = {state.kafka_name: state for state in TxnState}


async def handle_list_transactions(ctx: RequestContext, request: ListTransactionsRequest,
                                   version: int) -> ListTransactionsResponse:
    coordinator = ctx.broker.transactions
    unknown = [s for s in request.state_filters if s not in STATES]
    states = {STATES[s] for s in request.state_filters if s in STATES}
    pids = set(request.producer_id_filters)
    pattern = None
    if version >= 2 and request.transactional_id_pattern:
        try:
            pattern = compile_re2(request.transactional_id_pattern)
        except re.error:
            # Kafka's answer (InvalidRegularExpression) to a pattern RE2J cannot compile.
            return ListTransactionsResponse(error_code=ErrorCode.INVALID_REGULAR_EXPRESSION)
    now = now_ms()
    listed = [
        TransactionState(transactional_id=m.transactional_id, producer_id=m.producer_id,
                         transaction_state=m.state.kafka_name)
        for m in coordinator.all_txns()
        if (not request.state_filters or m.state in states)
        and (not pids or m.producer_id in pids)
        and (version < 1 or request.duration_filter < 0
             or (m.start_ms >= 0 and now - m.start_ms >= request.duration_filter))
        and (pattern is None or pattern.fullmatch(m.transactional_id))
        and ctx.authorize(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id,
                          audit=False)]
    return ListTransactionsResponse(unknown_state_filters=unknown, transaction_states=listed)
