"""Produce sent to a proxy: forwarded to the brokers that own the partitions (one request per
owner, in parallel, at the client's version, on the client connection's own links), their
answers merged back into one response.
Record batches are passed on as the opaque bytes the client sent. A partition without a live
owner, or whose owner cannot be reached, is answered NOT_LEADER_OR_FOLLOWER: the client
refreshes its metadata and retries (idempotent producers without duplicates)."""

from __future__ import annotations

import asyncio

from bmq.net.client import BrokerLink, LinkError
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import ProduceRequest, ProduceResponse
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.messages.produce_response import PartitionProduceResponse, TopicProduceResponse
from bmq.proxy.handlers.base import ProxyContext

TopicPartition = tuple[str, int]


async def _send(link: BrokerLink, request: ProduceRequest, version: int, client_id: str | None,
                results: dict[TopicPartition, PartitionProduceResponse],
                names: dict[str, str]) -> None:
    asked = [(names.get(t.name, t.name), p.index) for t in request.topic_data
             for p in t.partition_data]
    try:
        response = await link.request(request, version, expect_response=request.acks != 0,
                                      client_id=client_id)
    except (LinkError, OSError):
        for key in asked:
            results[key].error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return
    if response is None:
        return
    for topic in response.responses:
        for answer in topic.partition_responses:
            key = (names.get(topic.name, topic.name), answer.index)
            if key in results:
                results[key] = answer


async def handle_produce(ctx: ProxyContext, request: ProduceRequest,
                         version: int) -> ProduceResponse | None:
    proxy = ctx.proxy
    results: dict[TopicPartition, PartitionProduceResponse] = {}
    by_owner: dict[BrokerLink, dict[str, TopicProduceData]] = {}
    names: dict[str, str] = {}      # as the client named a topic (v13: by id) -> its name
    for topic in request.topic_data:
        name = topic.name
        if topic.topic_id.int:
            info = proxy.cluster.topics.by_id(topic.topic_id)
            name = info.name if info is not None else ""
        for data in topic.partition_data:
            result = PartitionProduceResponse(index=data.index, base_offset=-1)
            results[(name, data.index)] = result
            try:
                info = proxy.cluster.topics.get(name)
                if info is None or not 0 <= data.index < info.partitions:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                owner = proxy.owner_node(name, data.index)
            except KafkaError as error:
                result.error_code = error.code
                continue
            names[topic.name] = name
            link = ctx.links.get(owner.host, owner.port)
            forwarded = by_owner.setdefault(link, {}).setdefault(
                topic.name, TopicProduceData(name=topic.name, topic_id=topic.topic_id))
            forwarded.partition_data.append(PartitionProduceData(index=data.index,
                                                                 records=data.records))
    await asyncio.gather(*(
        _send(link, ProduceRequest(transactional_id=request.transactional_id, acks=request.acks,
                                   timeout_ms=request.timeout_ms, topic_data=list(topics.values())),
              version, ctx.header.client_id, results, names)
        for link, topics in by_owner.items()))
    if request.acks == 0:
        return None
    responses = []
    for topic in request.topic_data:
        name = names.get(topic.name, topic.name)
        responses.append(TopicProduceResponse(
            name=topic.name, topic_id=topic.topic_id,
            partition_responses=[results[(name, p.index)] for p in topic.partition_data]))
    return ProduceResponse(responses=responses)
