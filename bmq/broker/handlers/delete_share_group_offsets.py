"""DeleteShareGroupOffsets (KIP-932): an empty share group forgets its share-partitions of
some topics."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.share.admin import delete_offsets
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse
from bmq.protocol.messages.delete_share_group_offsets_response import (
    DeleteShareGroupOffsetsResponseTopic,
)


async def handle_delete_share_group_offsets(
        ctx: RequestContext, request: DeleteShareGroupOffsetsRequest,
        version: int) -> DeleteShareGroupOffsetsResponse:
    if not ctx.authorize(Operation.DELETE, ResourceType.GROUP, request.group_id):
        return DeleteShareGroupOffsetsResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = ctx.broker.groups.shard_error(request.group_id)
    if error != ErrorCode.NONE:
        return DeleteShareGroupOffsetsResponse(error_code=error)
    names = [t.topic_name for t in request.topics]
    refused = [n for n in names if not ctx.authorize(Operation.READ, ResourceType.TOPIC, n)]
    error, deleted = await delete_offsets(ctx.broker.share, ctx.broker.share_admin,
                                          request.group_id,
                                          [n for n in names if n not in refused])
    return DeleteShareGroupOffsetsResponse(error_code=error, responses=[
        DeleteShareGroupOffsetsResponseTopic(topic_name=t.name, topic_id=t.topic_id,
                                             error_code=t.error) for t in deleted] + [
        DeleteShareGroupOffsetsResponseTopic(
            topic_name=n, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for n in refused])
