"""BmqDescribeDatabusStreams (BMQ's own, for `bmq databus` agents): every stream mapping kept
with the cluster's metadata and their version; none when the asker holds the current version,
so an agent's poll of unchanged mappings costs a few bytes. Authorized as Kafka's
DescribeConfigs of the cluster: DESCRIBE_CONFIGS on the CLUSTER."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation
from bmq.metadata.databus_streams import to_wire
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    BmqDescribeDatabusStreamsRequest,
    BmqDescribeDatabusStreamsResponse,
)
from bmq.protocol.messages.bmq_describe_databus_streams_response import (
    DescribedDatabusStream,
)


async def handle_describe_databus_streams(
        ctx: RequestContext, request: BmqDescribeDatabusStreamsRequest,
        version: int) -> BmqDescribeDatabusStreamsResponse:
    if not ctx.authorize_cluster(Operation.DESCRIBE_CONFIGS):
        return BmqDescribeDatabusStreamsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, version=-1)
    store = ctx.broker.databus_streams
    assert store is not None        # (read before the broker serves)
    mappings = store.value
    if request.known_version == mappings.version:
        return BmqDescribeDatabusStreamsResponse(error_code=ErrorCode.NONE,
                                                 version=mappings.version)
    return BmqDescribeDatabusStreamsResponse(
        error_code=ErrorCode.NONE, version=mappings.version, streams=[
            DescribedDatabusStream(name=stream, **to_wire(mapping))
            for stream, mapping in sorted(mappings.streams.items())])
