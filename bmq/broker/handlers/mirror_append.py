"""BmqMirrorAppend (BMQ-internal): `bmq mirror` appends a source cluster's record batches to a
mirrored topic's partitions at the source's offsets (``Partition.append_copied``), answered
once durable. Each partition answers its log end offset, which is where the mirror goes on
from, whatever happened: after a refusal, a crash of the mirror or of this broker."""

from __future__ import annotations

import asyncio

from bmq.broker.broker import Broker
from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.produce import wait_durable
from bmq.metadata.acls import Operation, ResourceType
from bmq.metadata.mirrors import mirror_source
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import BmqMirrorAppendRequest, BmqMirrorAppendResponse
from bmq.protocol.messages.bmq_mirror_append_request import MirrorPartition
from bmq.protocol.messages.bmq_mirror_append_response import (
    MirrorPartitionResponse,
    MirrorTopicResponse,
)
from bmq.protocol.records import BatchHeader, validate_batches
from bmq.writepath.partitions import Partition, now_ms


async def handle_mirror_append(ctx: RequestContext, request: BmqMirrorAppendRequest,
                               version: int) -> BmqMirrorAppendResponse:
    broker = ctx.broker
    waits: list[tuple[MirrorPartitionResponse, Partition, asyncio.Future[None]]] = []
    topics: list[MirrorTopicResponse] = []
    now = now_ms()
    for topic in request.topics:
        answers: list[MirrorPartitionResponse] = []
        topics.append(MirrorTopicResponse(name=topic.name, partitions=answers))
        for data in topic.partitions:
            answer = MirrorPartitionResponse(partition_index=data.partition_index)
            answers.append(answer)
            try:
                partition = await _mirrored_partition(ctx, request.source, topic.name, data)
                answer.log_end_offset = partition.log.log_end_offset
                records = data.records
                if not isinstance(records, memoryview) or len(records) == 0:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "no record batches")
                # Not max.message.bytes: a batch the source took is mirrored whatever this
                # cluster's default limit (a segment holds it, as on Produce).
                headers = validate_batches(records, partition.log.config.segment_bytes,
                                           copied=True)
                await _avoid_producer_ids(broker, headers)
                waits.append((answer, partition, partition.append_copied(records, headers,
                                                                         now)))
            except KafkaError as error:
                answer.error_code = error.code
                answer.error_message = error.message
    await wait_durable([(answer, wait) for answer, _, wait in waits], request.timeout_ms)
    for answer, partition, _ in waits:
        answer.log_end_offset = partition.log.log_end_offset
    if not broker.can_acknowledge():
        # Cluster mode: the ack lease ran out meanwhile (see Produce); the mirror asks the
        # partition's current owner, whose log end offset says what was kept.
        for answer, _, _ in waits:
            if answer.error_code == ErrorCode.NONE:
                answer.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    return BmqMirrorAppendResponse(topics=topics)


async def _avoid_producer_ids(broker: Broker, headers: list[BatchHeader]) -> None:
    """This cluster hands out none of the producer ids of the batches (the source's) from
    now on, before they are appended: after a promotion, a new producer given one of them would
    take over that producer's state in the partition."""
    allocator = broker.membership.producer_ids
    highest = max(header.producer_id for header in headers)
    if highest >= 0 and allocator.may_hand_out(highest):
        try:
            await asyncio.get_running_loop().run_in_executor(None, allocator.avoid, highest)
        except Exception as error:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"cannot reserve producer ids past {highest}: {error}") from error


async def _mirrored_partition(ctx: RequestContext, source: str, topic: str,
                              data: MirrorPartition) -> Partition:
    """The partition to append to, once the mirror may: a topic mirrored from ``source``, the
    principal allowed to WRITE and ALTER it (the mirror rewrites a topic no producer may), the
    partition served here and writable."""
    broker = ctx.broker
    ctx.require(Operation.WRITE, ResourceType.TOPIC, topic)
    ctx.require(Operation.ALTER, ResourceType.TOPIC, topic)
    if broker.topics.get(topic) is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    marked = mirror_source(broker.topics, topic)
    if marked != source:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"{topic} is not a mirror of {source}" if marked is None else
                         f"{topic} is a mirror of {marked}, not of {source}")
    partition = await broker.served_partition(topic, data.partition_index)
    partition.check_writable()
    if not broker.can_acknowledge():
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "ack lease expired")
    return partition
