"""Partition APIs a Kafka admin client sends to each partition's leader, which through a proxy
is the proxy itself (Metadata names proxies as leaders): DeleteRecords, DescribeProducers and
WriteTxnMarkers (Admin.deleteRecords, describeProducers, abortTransaction), and BMQ's
BmqMirrorAppend (`bmq mirror` into a cluster it reaches through proxies). Relayed to just any
broker, they reached one that does not own the partition and were answered
NOT_LEADER_OR_FOLLOWER again and again. Here each owner gets its own partitions, on the client
connection's links (which act for the client's principal), and the answers are put together;
a partition without a live owner, or whose owner cannot be reached, is answered
NOT_LEADER_OR_FOLLOWER (the client looks again and retries), one the proxy does not know
UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from bmq.client.requests import Address, ask_each
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    BmqMirrorAppendRequest,
    BmqMirrorAppendResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from bmq.protocol.messages.bmq_mirror_append_request import MirrorTopic
from bmq.protocol.messages.bmq_mirror_append_response import (
    MirrorPartitionResponse,
    MirrorTopicResponse,
)
from bmq.protocol.messages.delete_records_request import DeleteRecordsTopic
from bmq.protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsTopicResult,
)
from bmq.protocol.messages.describe_producers_request import TopicRequest
from bmq.protocol.messages.describe_producers_response import PartitionResponse, TopicResponse
from bmq.protocol.messages.write_txn_markers_request import WritableTxnMarkerTopic
from bmq.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
)
from bmq.proxy.handlers.base import ProxyContext

Key = tuple[str, int]
Result = TypeVar("Result")


async def _ask_owners(ctx: ProxyContext, keys: Iterable[Key],
                      build: Callable[[set[Key]], Any], version: int
                      ) -> tuple[list[tuple[set[Key], Any]], dict[Key, ErrorCode]]:
    """``build(partitions)`` sent to each owner of some of ``keys``: (its partitions, its
    answer) for each owner that answered, and the error of each partition left over."""
    cluster = ctx.proxy.cluster
    by_owner: dict[Address, set[Key]] = {}
    failed: dict[Key, ErrorCode] = {}
    for topic, index in keys:
        info = cluster.topics.get(topic)
        if info is None or not 0 <= index < info.partitions:
            failed[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        owner = cluster.owner(topic, index)
        if owner is None:
            failed[(topic, index)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            continue
        by_owner.setdefault((owner.node.host, owner.node.port), set()).add((topic, index))
    calls = list(by_owner.items())
    answers = await ask_each(ctx.links, [(address, build(owned)) for address, owned in calls],
                             version)
    answered = []
    for (_address, owned), answer in zip(calls, answers, strict=True):
        if answer is None:
            failed.update(dict.fromkeys(owned, ErrorCode.NOT_LEADER_OR_FOLLOWER))
        else:
            answered.append((owned, answer))
    return answered, failed


def _gathered(answered: list[tuple[set[Key], Any]], failed: dict[Key, ErrorCode],
              failure: Callable[[int, ErrorCode], Result]) -> dict[str, list[Result]]:
    """The owners' partition results (answers with ``topics`` of ``partitions``) and one
    ``failure(index, code)`` for each partition left over, by topic, in partition order."""
    results: dict[Key, Result] = {key: failure(key[1], code) for key, code in failed.items()}
    for _owned, answer in answered:
        for topic in answer.topics:
            for partition in topic.partitions:
                results[(topic.name, partition.partition_index)] = partition
    topics: dict[str, list[Result]] = {}
    for (topic_name, _index), result in sorted(results.items(), key=lambda item: item[0]):
        topics.setdefault(topic_name, []).append(result)
    return topics


async def handle_delete_records(ctx: ProxyContext, request: DeleteRecordsRequest,
                                version: int) -> DeleteRecordsResponse:
    offsets = {(t.name, p.partition_index): p for t in request.topics for p in t.partitions}

    def build(owned: set[Key]) -> DeleteRecordsRequest:
        return DeleteRecordsRequest(timeout_ms=request.timeout_ms, topics=[
            DeleteRecordsTopic(name=t.name, partitions=[
                p for p in t.partitions if (t.name, p.partition_index) in owned])
            for t in request.topics if any(k[0] == t.name for k in owned)])

    answered, failed = await _ask_owners(ctx, offsets, build, version)
    return DeleteRecordsResponse(topics=[
        DeleteRecordsTopicResult(name=name, partitions=partitions)
        for name, partitions in _gathered(answered, failed, lambda index, code:
                                          DeleteRecordsPartitionResult(
                                              partition_index=index, low_watermark=-1,
                                              error_code=code)).items()])


async def handle_describe_producers(ctx: ProxyContext, request: DescribeProducersRequest,
                                    version: int) -> DescribeProducersResponse:
    keys = [(t.name, index) for t in request.topics for index in t.partition_indexes]

    def build(owned: set[Key]) -> DescribeProducersRequest:
        return DescribeProducersRequest(topics=[
            TopicRequest(name=t.name, partition_indexes=[
                i for i in t.partition_indexes if (t.name, i) in owned])
            for t in request.topics if any(k[0] == t.name for k in owned)])

    answered, failed = await _ask_owners(ctx, keys, build, version)
    return DescribeProducersResponse(topics=[
        TopicResponse(name=name, partitions=partitions)
        for name, partitions in _gathered(answered, failed, lambda index, code:
                                          PartitionResponse(partition_index=index,
                                                            error_code=code)).items()])


async def handle_write_txn_markers(ctx: ProxyContext, request: WriteTxnMarkersRequest,
                                   version: int) -> WriteTxnMarkersResponse:
    """Each marker's partitions split over their owners (one request an owner, with every
    marker that has partitions there); each marker answered for all of its partitions."""
    keys = {(t.name, i) for m in request.markers for t in m.topics for i in t.partition_indexes}

    def build(owned: set[Key]) -> WriteTxnMarkersRequest:
        markers = []
        for marker in request.markers:
            topics = [WritableTxnMarkerTopic(name=t.name, partition_indexes=[
                i for i in t.partition_indexes if (t.name, i) in owned]) for t in marker.topics]
            topics = [t for t in topics if t.partition_indexes]
            if topics:
                markers.append(type(marker)(
                    producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                    transaction_result=marker.transaction_result, topics=topics,
                    coordinator_epoch=marker.coordinator_epoch,
                    transaction_version=marker.transaction_version))
        return WriteTxnMarkersRequest(markers=markers)

    answered, failed = await _ask_owners(ctx, keys, build, version)
    # Per producer id (a request has one marker a producer: a transaction's markers).
    codes: dict[tuple[int, str, int], int] = {
        (m.producer_id, topic, index): failed[(topic, index)]
        for m in request.markers for t in m.topics for topic, index in
        ((t.name, i) for i in t.partition_indexes) if (topic, index) in failed}
    for _owned, answer in answered:
        for result in answer.markers:
            for topic in result.topics:
                for partition in topic.partitions:
                    codes[(result.producer_id, topic.name, partition.partition_index)] = \
                        partition.error_code
    return WriteTxnMarkersResponse(markers=[WritableTxnMarkerResult(
        producer_id=marker.producer_id, topics=[WritableTxnMarkerTopicResult(
            name=t.name, partitions=[WritableTxnMarkerPartitionResult(
                partition_index=i,
                error_code=codes.get((marker.producer_id, t.name, i),
                                     ErrorCode.NOT_LEADER_OR_FOLLOWER))
                for i in t.partition_indexes]) for t in marker.topics])
        for marker in request.markers])


async def handle_mirror_append(ctx: ProxyContext, request: BmqMirrorAppendRequest,
                               version: int) -> BmqMirrorAppendResponse:
    keys = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]

    def build(owned: set[Key]) -> BmqMirrorAppendRequest:
        return BmqMirrorAppendRequest(source=request.source, timeout_ms=request.timeout_ms,
                                      topics=[MirrorTopic(name=t.name, partitions=[
                                          p for p in t.partitions
                                          if (t.name, p.partition_index) in owned])
                                          for t in request.topics
                                          if any(k[0] == t.name for k in owned)])

    answered, failed = await _ask_owners(ctx, keys, build, version)
    return BmqMirrorAppendResponse(topics=[
        MirrorTopicResponse(name=name, partitions=partitions)
        for name, partitions in _gathered(answered, failed, lambda index, code:
                                          MirrorPartitionResponse(partition_index=index,
                                                                  error_code=code)).items()])
