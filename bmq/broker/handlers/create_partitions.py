"""CreatePartitions: grow a topic's partition count."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.create_topics import check_replica_assignment
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import CreatePartitionsRequest, CreatePartitionsResponse
from bmq.protocol.messages.create_partitions_response import CreatePartitionsTopicResult


async def handle_create_partitions(ctx: RequestContext, request: CreatePartitionsRequest,
                                   version: int) -> CreatePartitionsResponse:
    broker = ctx.broker
    results = []
    for topic in request.topics:
        result = CreatePartitionsTopicResult(name=topic.name)
        results.append(result)
        try:
            ctx.require(Operation.ALTER, ResourceType.TOPIC, topic.name)
            info = await broker.lookup_topic(topic.name)
            if info is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if topic.assignments is not None:
                if len(topic.assignments) != topic.count - info.partitions:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "Give one assignment per new partition.")
                check_replica_assignment(ctx, [a.broker_ids for a in topic.assignments])
            if request.validate_only:
                if topic.count <= info.partitions:
                    raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                     f"Topic currently has {info.partitions} partitions.")
            else:
                await broker.add_partitions(info, topic.count)
        except KafkaError as error:
            result.error_code = error.code
            result.error_message = error.message
    return CreatePartitionsResponse(results=results)
