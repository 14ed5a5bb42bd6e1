"""ListTransactions through a proxy: none. A proxy coordinates no transaction, and admin clients
(the Java Admin, kafka-transactions.sh list) ask every node Metadata lists, brokers too, and
put the answers together: relayed to a broker, the proxy's answer listed that broker's
transactions a second time. Its checks are the broker's: unknown state filters are named back,
and a v2 pattern RE2 cannot compile is INVALID_REGULAR_EXPRESSION."""

from __future__ import annotations

import re

from bmq.coordinators.transactions.records import TxnState
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ListTransactionsRequest, ListTransactionsResponse
from bmq.protocol.re2 import compile_re2
from bmq.proxy.handlers.base import ProxyContext

KNOWN_STATES = {state.kafka_name for state in TxnState}


async def handle_list_transactions(ctx: ProxyContext, request: ListTransactionsRequest,
                                   version: int) -> ListTransactionsResponse:
    if version >= 2 and request.transactional_id_pattern:
        try:
            compile_re2(request.transactional_id_pattern)
        except re.error:
            return ListTransactionsResponse(error_code=ErrorCode.INVALID_REGULAR_EXPRESSION)
    return ListTransactionsResponse(unknown_state_filters=[
        s for s in request.state_filters if s not in KNOWN_STATES])
