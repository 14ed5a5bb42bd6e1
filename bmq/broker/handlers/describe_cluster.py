"""DescribeCluster: the cluster id, controller and brokers (KIP-700)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import CLUSTER_NAME, ResourceType
from bmq.protocol.acl_operations import CLUSTER_OPERATIONS, authorized
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DescribeClusterRequest, DescribeClusterResponse
from bmq.protocol.messages.describe_cluster_response import DescribeClusterBroker

ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2


async def handle_describe_cluster(ctx: RequestContext, request: DescribeClusterRequest,
                                  version: int) -> DescribeClusterResponse:
    broker = ctx.broker
    if request.endpoint_type not in (ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS):
        return DescribeClusterResponse(error_code=ErrorCode.INVALID_REQUEST,
                                       error_message="unknown endpoint type",
                                       endpoint_type=request.endpoint_type,
                                       cluster_id=broker.cluster_id)
    # The embedded broker is its own controller, so both endpoint types name the same node.
    # The nodes are Metadata's, proxies included: Metadata and DescribeTopicPartitions name
    # proxies as leaders, and the Java Admin finds a leader among DescribeCluster's nodes.
    return DescribeClusterResponse(
        error_code=ErrorCode.NONE,
        endpoint_type=request.endpoint_type,
        cluster_id=broker.cluster_id,
        controller_id=broker.controller_id,
        brokers=[DescribeClusterBroker(broker_id=n.node_id, host=host, port=port, rack=n.rack)
                 for n in broker.metadata_nodes for host, port in [n.address(ctx.listener)]],
        cluster_authorized_operations=authorized(
            ctx.operations(CLUSTER_OPERATIONS, ResourceType.CLUSTER, CLUSTER_NAME),
            request.include_cluster_authorized_operations),
    )
