"""FindCoordinator: which broker coordinates a group (v4+ answers a batch of keys, KIP-699).

The embedded broker leads every ``__consumer_offsets`` and ``__transaction_state`` partition, so
it coordinates every group and every transactional id. Share-group coordinators do not exist
yet, nor transactions in cluster mode (``bmq broker``): COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from bmq.broker.broker import Broker
from bmq.broker.handlers.base import RequestContext
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse
from bmq.protocol.messages.find_coordinator_response import Coordinator

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2


async def _find(broker: Broker, key: str, key_type: int, listener: str) -> Coordinator:
    if key_type == KEY_TYPE_GROUP:
        error = broker.groups.coordinator_error(key, allow_empty=True)
        node = broker.coordinator_node(key)   # in cluster mode: the offsets partition's owner
        if node is not None and node is not broker.node and error != ErrorCode.INVALID_GROUP_ID:
            error = ErrorCode.NONE
        if node is not None and error in (ErrorCode.NONE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            host, port = node.address(listener)
            return Coordinator(key=key, node_id=node.node_id, host=host, port=port,
                               error_code=ErrorCode.NONE, error_message=None)
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        message = "The coordinator is not available."
    elif key_type == KEY_TYPE_TRANSACTION and broker.transactions is not None:
        await broker.transactions.ensure_started()   # __transaction_state on first use
        error = broker.transactions.shard_error(key)
        if error in (ErrorCode.NONE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            host, port = broker.node.address(listener)
            return Coordinator(key=key, node_id=broker.node.node_id, host=host, port=port,
                               error_code=ErrorCode.NONE, error_message=None)
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        message = "The coordinator is not available."
    elif key_type in (KEY_TYPE_TRANSACTION, KEY_TYPE_SHARE):
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        message = ("BMQ has no share-group coordinator, nor transactions in cluster mode, "
                   "yet.")
    else:
        code = ErrorCode.INVALID_REQUEST
        message = f"Unknown coordinator type {key_type}."
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code,
                       error_message=message)


async def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest,
                                  version: int) -> FindCoordinatorResponse:
    key_type = request.key_type if version >= 1 else KEY_TYPE_GROUP
    if version >= 4:
        return FindCoordinatorResponse(
            coordinators=[await _find(ctx.broker, key, key_type, ctx.listener)
                          for key in request.coordinator_keys])
    found = await _find(ctx.broker, request.key, key_type, ctx.listener)
    return FindCoordinatorResponse(error_code=found.error_code, error_message=found.error_message,
                                   node_id=found.node_id, host=found.host, port=found.port)
