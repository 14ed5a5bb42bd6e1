"""FindCoordinator: which broker coordinates a group or a transactional id (v4+ answers a batch
of keys, KIP-699): the owner of the key's ``__consumer_offsets`` or ``__transaction_state``
partition (every partition's, on the embedded broker). ``__transaction_state`` is created on the
first transactional producer's request, as Kafka does. Key type 2 (KIP-932) names the share
coordinator of a share-partition key ``group:topicId:partition``: the owner of the key's
``__share_group_state`` partition (created on first use), asked by brokers (CLUSTER_ACTION, as
in Kafka) and tools.
"""

from __future__ import annotations

from bmq.broker.broker import Broker
from bmq.broker.handlers.base import DENIED, RequestContext
from bmq.coordinators.transactions import TRANSACTION_TOPIC
from bmq.metadata.acls import Operation, ResourceType
from bmq.metadata.nodes import BrokerNode
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse
from bmq.protocol.messages.find_coordinator_response import Coordinator

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2


def _located(broker: Broker, key: str, node: BrokerNode | None, error: ErrorCode,
             listener: str) -> Coordinator:
    """The owner of ``key``'s partition as the coordinator, if it can serve: another broker is
    trusted to (the client hears from it otherwise); this one if its shard is (being) loaded."""
    if node is not None and node is not broker.node and error != ErrorCode.INVALID_GROUP_ID:
        error = ErrorCode.NONE
    if node is not None and error in (ErrorCode.NONE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        host, port = node.address(listener)
        return Coordinator(key=key, node_id=node.node_id, host=host, port=port,
                           error_code=ErrorCode.NONE, error_message=None)
    return Coordinator(key=key, node_id=-1, host="", port=-1,
                       error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       error_message="The coordinator is not available.")


async def _find(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    broker, listener = ctx.broker, ctx.listener
    resource = {KEY_TYPE_GROUP: ResourceType.GROUP,
                KEY_TYPE_TRANSACTION: ResourceType.TRANSACTIONAL_ID}.get(key_type)
    if resource is not None and not ctx.authorize(Operation.DESCRIBE, resource, key):
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=DENIED[resource],
                           error_message=None)
    if key_type == KEY_TYPE_GROUP:
        return _located(broker, key, broker.coordinator_node(key),
                        broker.groups.coordinator_error(key, allow_empty=True), listener)
    if key_type == KEY_TYPE_TRANSACTION:
        transactions = broker.transactions
        await transactions.ensure_started()   # __transaction_state on first use
        node = broker.membership.owner_node(TRANSACTION_TOPIC, transactions.partition_for(key))
        return _located(broker, key, node, transactions.shard_error(key), listener)
    if key_type == KEY_TYPE_SHARE:
        return await _find_share(ctx, key)
    return Coordinator(key=key, node_id=-1, host="", port=-1,
                       error_code=ErrorCode.INVALID_REQUEST,
                       error_message=f"Unknown coordinator type {key_type}.")


async def _find_share(ctx: RequestContext, key: str) -> Coordinator:
    if not ctx.authorize_cluster(Operation.CLUSTER_ACTION):
        return Coordinator(key=key, node_id=-1, host="", port=-1,
                           error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None)
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[2].lstrip("-").isdigit():
        return Coordinator(key=key, node_id=-1, host="", port=-1,
                           error_code=ErrorCode.INVALID_REQUEST,
                           error_message=f"Share coordinator key {key!r} is not "
                                         "group:topicId:partition.")
    state_log = ctx.broker.share.state_log
    await state_log.ensure_started()     # __share_group_state on first use
    node = ctx.broker.membership.owner_node(state_log.topic, state_log.partition_for(key))
    return _located(ctx.broker, key, node, state_log.shard_error(key), ctx.listener)


async def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest,
                                  version: int) -> FindCoordinatorResponse:
    key_type = request.key_type if version >= 1 else KEY_TYPE_GROUP
    if version >= 4:
        return FindCoordinatorResponse(
            coordinators=[await _find(ctx, key, key_type)
                          for key in request.coordinator_keys])
    found = await _find(ctx, request.key, key_type)
    return FindCoordinatorResponse(error_code=found.error_code, error_message=found.error_message,
                                   node_id=found.node_id, host=found.host, port=found.port)
