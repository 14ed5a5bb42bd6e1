"""BmqMirrorAppend (BMQ-internal): `bmq mirror` appends a source cluster's record batches to a
mirrored topic's partitions at the source's offsets (``Partition.append_copied``: gaps of a
compacted source kept), answered once durable, and the partition's log start follows the
source's (DeleteRecords, retention; past the log end the log starts over there,
``Partition.start_copy_at``). Each partition answers its log start and end offsets; the end
is where the mirror goes on from, whatever happened: after a refusal, a crash of the mirror or
of this broker."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

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


@dataclass
class _Taken:
    """A partition whose request was taken: its answer, its log start to follow, the
    durability of its batches (None if it had none)."""

    answer: MirrorPartitionResponse
    partition: Partition
    log_start: int
    durable: asyncio.Future[None] | None


async def handle_mirror_append(ctx: RequestContext, request: BmqMirrorAppendRequest,
                               version: int) -> BmqMirrorAppendResponse:
    broker = ctx.broker
    taken: list[_Taken] = []
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
                _answer_offsets(answer, partition)
                taken.append(await _take(ctx, topic.name, partition, data, answer, now))
            except KafkaError as error:
                answer.error_code = error.code
                answer.error_message = error.message
    await wait_durable([(t.answer, t.durable) for t in taken if t.durable is not None],
                       request.timeout_ms)
    for t in taken:
        if t.answer.error_code == ErrorCode.NONE:
            await _follow_log_start(t)
        _answer_offsets(t.answer, t.partition)
    if not broker.can_acknowledge():
        # Cluster mode: the ack lease ran out meanwhile (see Produce); the mirror asks the
        # partition's current owner, whose log end offset says what was kept.
        for t in taken:
            if t.answer.error_code == ErrorCode.NONE:
                t.answer.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    return BmqMirrorAppendResponse(topics=topics)


async def _take(ctx: RequestContext, topic: str, partition: Partition, data: MirrorPartition,
                answer: MirrorPartitionResponse, now: int) -> _Taken:
    """Check one partition's batches, start the log over past its end if the source's log
    starts there, and append them."""
    records = data.records
    headers: list[BatchHeader] = []
    if isinstance(records, memoryview) and len(records):
        # Not max.message.bytes: a batch the source took is mirrored whatever this
        # cluster's default limit (a segment holds it, as on Produce).
        headers = validate_batches(records, partition.log.config.segment_bytes, copied=True)
    elif data.log_start_offset < 0:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "no record batches")
    log_start = data.log_start_offset
    if log_start > partition.log.log_start_offset:
        # Records go: as DeleteRecords, the mirror's principal must be allowed to.
        ctx.require(Operation.DELETE, ResourceType.TOPIC, topic)
    if log_start > partition.log.log_end_offset:
        # The source deleted all this log has: start over where its data starts (the first
        # batch may hold the source's log start).
        start = min(headers[0].base_offset, log_start) if headers else log_start
        if start > partition.log.log_end_offset:
            await partition.start_copy_at(start)
    if not headers:
        return _Taken(answer, partition, log_start, None)
    assert isinstance(records, memoryview)
    await _avoid_producer_ids(ctx.broker, headers)
    return _Taken(answer, partition, log_start, partition.append_copied(records, headers, now))


async def _follow_log_start(taken: _Taken) -> None:
    """The log starts where the source's does, once what it appended is durable (never past
    its high watermark: the source's log start is within what the mirror appended)."""
    log = taken.partition.log
    start = min(taken.log_start, log.high_watermark)
    if start > log.log_start_offset:
        try:
            await asyncio.get_running_loop().run_in_executor(None, log.delete_records, start)
        except KafkaError as error:
            taken.answer.error_code = error.code
            taken.answer.error_message = error.message


def _answer_offsets(answer: MirrorPartitionResponse, partition: Partition) -> None:
    answer.log_start_offset = partition.log.log_start_offset
    answer.log_end_offset = partition.log.log_end_offset


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
