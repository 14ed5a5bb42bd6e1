"""ListOffsets, as every role answers it: through the proxy role's partition views, each first
brought up to its owner's high watermark (``catch_up``: a round trip for a `bmq proxy`, nothing
for a broker, whose views read its own logs), so the end offset includes every acknowledged
record."""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from bmq.protocol.errors import ErrorCode, KafkaError, check_leader_epoch
from bmq.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from bmq.protocol.messages.list_offsets_request import ListOffsetsPartition
from bmq.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from bmq.readpath.fetch import READ_COMMITTED, FetchServer
from bmq.storage.offsets import LATEST, NO_TIMESTAMP


async def _answer(server: FetchServer, topic: str, asked: ListOffsetsPartition,
                  committed: bool, refused: Collection[str]) -> ListOffsetsPartitionResponse:
    result = ListOffsetsPartitionResponse(partition_index=asked.partition_index,
                                          timestamp=NO_TIMESTAMP, offset=-1)
    try:
        if topic in refused:
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        view = await server.view(topic, asked.partition_index)
        await server.catch_up(view.source)
        epoch = server.epoch(topic, asked.partition_index)
        check_leader_epoch(epoch, asked.current_leader_epoch)
        result.leader_epoch = epoch
        if committed and asked.timestamp == LATEST:
            # read_committed consumers start (and measure lag) at the last stable offset.
            result.offset = view.last_stable_offset()
        else:
            result.offset, result.timestamp = await view.list_offset(asked.timestamp)
    except KafkaError as error:
        result.error_code = error.code
    return result


async def answer_list_offsets(server: FetchServer, request: ListOffsetsRequest,
                              refused: Collection[str] = (), version: int | None = None
                              ) -> ListOffsetsResponse:
    """``refused``: topics the client may not describe (TOPIC_AUTHORIZATION_FAILED);
    ``version``: the request's (v0, of old clients, answers with old-style offsets)."""
    # Partitions are answered concurrently: a proxy's catch-up round trips to the owners
    # overlap instead of adding up over a request for many partitions.
    committed = request.isolation_level == READ_COMMITTED
    answers = await asyncio.gather(*(_answer(server, topic.name, asked, committed, refused)
                                     for topic in request.topics for asked in topic.partitions))
    topics = []
    at = 0
    for topic in request.topics:
        count = len(topic.partitions)
        partitions = list(answers[at:at + count])
        if version == 0:
            # v0 answers a list of offsets (Kafka 2.x: one, the offset found, for the earliest,
            # the latest or a time), at most max_num_offsets of them.
            for asked, answer in zip(topic.partitions, partitions, strict=True):
                answer.old_style_offsets = [answer.offset][:asked.max_num_offsets] \
                    if answer.offset >= 0 else []
        topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
        at += count
    return ListOffsetsResponse(topics=topics)
