"""BmqAlterDatabusStreams (BMQ's own, for `bmq databus map`): set or remove stream mappings kept
with the cluster's metadata. Each stream is checked on its own: a bad one is refused with
Kafka's error code and a message (INVALID_TOPIC_EXCEPTION, INVALID_CONFIG; INVALID_REQUEST
for a stream named twice) and nothing of it is stored; the good ones are stored in one change.
Authorized as Kafka's IncrementalAlterConfigs of the cluster: ALTER_CONFIGS on the CLUSTER."""

from __future__ import annotations

import asyncio
from collections import Counter

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation
from bmq.metadata.databus_streams import (
    MappingError,
    StreamMapping,
    check_stream_name,
    from_wire,
)
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    BmqAlterDatabusStreamsRequest,
    BmqAlterDatabusStreamsResponse,
)
from bmq.protocol.messages.bmq_alter_databus_streams_response import (
    AlterDatabusStreamResult,
)


async def handle_alter_databus_streams(
        ctx: RequestContext, request: BmqAlterDatabusStreamsRequest,
        version: int) -> BmqAlterDatabusStreamsResponse:
    store = ctx.broker.databus_streams
    assert store is not None        # (read before the broker serves)
    if not ctx.authorize_cluster(Operation.ALTER_CONFIGS):
        return BmqAlterDatabusStreamsResponse(version=store.value.version, results=[
            AlterDatabusStreamResult(name=asked.name,
                                     error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            for asked in request.streams])
    named = Counter(asked.name for asked in request.streams)
    results, changes = [], {}
    for asked in request.streams:
        try:
            if named[asked.name] > 1:
                raise MappingError(f"stream {asked.name} named more than once",
                                   ErrorCode.INVALID_REQUEST)
            check_stream_name(asked.name)
            mapping: StreamMapping | None = None if asked.topic is None else from_wire(asked)
        except MappingError as error:
            results.append(AlterDatabusStreamResult(name=asked.name, error_code=error.code,
                                                    error_message=str(error)))
            continue
        changes[asked.name] = mapping
        results.append(AlterDatabusStreamResult(name=asked.name, error_code=ErrorCode.NONE))
    mappings = store.value
    if changes:
        mappings = await asyncio.get_running_loop().run_in_executor(None, store.change, changes)
    return BmqAlterDatabusStreamsResponse(version=mappings.version, results=results)
