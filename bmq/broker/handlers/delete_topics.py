"""DeleteTopics, by name (v0-5) or by name or id (v6+)."""

from __future__ import annotations

import uuid

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import DeleteTopicsRequest, DeleteTopicsResponse
from bmq.protocol.messages.delete_topics_response import DeletableTopicResult
from bmq.protocol.primitives import ZERO_UUID


async def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest,
                               version: int) -> DeleteTopicsResponse:
    broker = ctx.broker
    asked: list[tuple[str | None, uuid.UUID]] = (
        [(t.name, t.topic_id) for t in request.topics] if version >= 6
        else [(name, ZERO_UUID) for name in request.topic_names])
    results = []
    for name, topic_id in asked:
        result = DeletableTopicResult(name=name, topic_id=topic_id)
        results.append(result)
        try:
            info = (await broker.lookup_topic(name) if name is not None
                    else broker.topics.by_id(topic_id))
            if info is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name is not None
                                 else ErrorCode.UNKNOWN_TOPIC_ID)
            result.name, result.topic_id = info.name, info.topic_id
            ctx.require(Operation.DELETE, ResourceType.TOPIC, info.name)
            if info.internal:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 f"Internal topic {info.name} cannot be deleted")
            if not broker.config.delete_topic_enable:
                raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED)
            await broker.delete_topic(info)
        except KafkaError as error:
            result.error_code = error.code
            result.error_message = error.message
    return DeleteTopicsResponse(responses=results)
