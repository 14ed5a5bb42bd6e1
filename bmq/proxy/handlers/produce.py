"""Produce sent to a proxy: forwarded to the brokers that own the partitions (one request per
owner, in parallel, at the client's version, on the client connection's own links), their
answers merged back into one response.
Record batches are passed on as the opaque bytes the client sent.

Batches with a producer id (idempotent or transactional producers: every client's default
now) are *held* rather than answered with an error when their partition moves: when it has no
live owner, when its owner cannot be reached (it died, or left the cluster frozen and the proxy
closed its links), or when the owner answers NOT_LEADER_OR_FOLLOWER / LEADER_NOT_AVAILABLE
(draining, or the new owner still recovering), the proxy waits for the partition's writable
owner and forwards the batch there itself, so the client sees a slower answer, not an error.
An error would make it refresh its metadata from some node its last Metadata listed: aiokafka
picks one at random, which can be the frozen broker, and sends nothing more to the proxy until
that request times out (40 s). A duplicate of a batch the old owner had made durable is
recognised by the new owner.

Order, per client connection and partition, is what a single Kafka leader gives: a held batch
is forwarded only once every earlier batch of that connection and partition has its answer;
while one is held, or while earlier ones are in flight to another broker than the current
owner, later batches are held too (else the new owner would get sequence N+1 before N:
OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to librdkafka's idempotent producer). A batch still without
a writable owner after half the request's timeout is answered NOT_LEADER_OR_FOLLOWER, and so is
every later held batch of its partition: the client refreshes its metadata and retries them in
order. Batches without a producer id are answered NOT_LEADER_OR_FOLLOWER at once, as before."""

from __future__ import annotations

import asyncio
import struct
import weakref
from dataclasses import dataclass, field

from bmq.metadata.views import refuse_view
from bmq.net.client import BrokerLink, LinkError, LinkPool
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import ProduceRequest, ProduceResponse
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.messages.produce_response import PartitionProduceResponse, TopicProduceResponse
from bmq.proxy.handlers.base import ProxyContext

TopicPartition = tuple[str, int]

_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_AT = 43    # in a v2 record batch header
HOLD_POLL_S = 0.02      # how often a held batch looks for its partition's writable owner
HOLD_MAX_S = 15.0
# What an owner answers while it drains or recovers the partition: a held batch waits on.
_NOT_YET = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE)


@dataclass
class _Flow:
    """One client connection's batches (with a producer id) of one partition, in arrival order:
    each has a future, resolved when it has its answer (False: the proxy gave up on it)."""

    next_seq: int = 0
    open: dict[int, asyncio.Future[bool]] = field(default_factory=dict)
    held: int = 0
    inflight: int = 0
    link: BrokerLink | None = None     # where the batches in flight went


# Per client connection (its own link pool), per partition.
_flows: weakref.WeakKeyDictionary[LinkPool, dict[TopicPartition, _Flow]] = \
    weakref.WeakKeyDictionary()


def _has_producer_id(records: object) -> bool:
    return (isinstance(records, (bytes, bytearray, memoryview))
            and len(records) >= _PRODUCER_ID_AT + 8
            and _PRODUCER_ID.unpack_from(records, _PRODUCER_ID_AT)[0] >= 0)


@dataclass
class _Batch:
    key: TopicPartition
    topic: TopicProduceData
    data: PartitionProduceData
    flow: _Flow | None = None       # None: no producer id (or acks=0), never held
    seq: int = 0

    def finish(self, answered: bool) -> None:
        if self.flow is not None:
            done = self.flow.open.pop(self.seq)
            if not done.done():
                done.set_result(answered)


class _Forwarding:
    """One Produce request's batches on their way to the owners."""

    def __init__(self, ctx: ProxyContext, request: ProduceRequest, version: int) -> None:
        self.ctx = ctx
        self.request = request
        self.version = version
        self.results: dict[TopicPartition, PartitionProduceResponse] = {}
        self.names: dict[str, str] = {}   # as the client named a topic (v13: by id) -> name
        self.deadline = asyncio.get_running_loop().time() + min(
            HOLD_MAX_S, request.timeout_ms / 2000)

    def admit(self, batch: _Batch, owner_link: BrokerLink | None) -> bool:
        """Give the batch its place in its flow; True if it must be held (not sent now)."""
        if self.request.acks == 0 or not _has_producer_id(batch.data.records):
            return False
        flow = _flows.setdefault(self.ctx.links, {}).setdefault(batch.key, _Flow())
        batch.flow, batch.seq = flow, flow.next_seq
        flow.next_seq += 1
        flow.open[batch.seq] = asyncio.get_running_loop().create_future()
        if flow.held or owner_link is None or (flow.inflight and flow.link is not owner_link):
            flow.held += 1
            return True
        flow.inflight += 1
        flow.link = owner_link
        return False

    async def send(self, link: BrokerLink, batches: list[_Batch]) -> None:
        """Forward ``batches`` (one owner's) in one request; hold those the owner could not
        take."""
        topics: dict[str, TopicProduceData] = {}
        for batch in batches:
            topics.setdefault(batch.topic.name, TopicProduceData(
                name=batch.topic.name, topic_id=batch.topic.topic_id)).partition_data.append(
                PartitionProduceData(index=batch.data.index, records=batch.data.records))
        request = ProduceRequest(transactional_id=self.request.transactional_id,
                                 acks=self.request.acks, timeout_ms=self.request.timeout_ms,
                                 topic_data=list(topics.values()))
        answers: dict[TopicPartition, PartitionProduceResponse] = {}
        try:
            response = await link.request(request, self.version,
                                          expect_response=request.acks != 0,
                                          client_id=self.ctx.header.client_id)
        except (LinkError, OSError):
            response = None
        except BaseException:
            for batch in batches:       # (cancelled: the client went) nothing waits on these
                if batch.flow is not None:
                    batch.flow.inflight -= 1
                batch.finish(False)
            raise
        else:
            if response is None:        # acks=0
                return
            for topic in response.responses:
                for answer in topic.partition_responses:
                    answers[(self.names.get(topic.name, topic.name), answer.index)] = answer
        held = []
        for batch in batches:
            if batch.flow is not None:
                batch.flow.inflight -= 1
            answer = answers.get(batch.key)
            if answer is not None and (batch.flow is None or answer.error_code not in _NOT_YET):
                self.results[batch.key] = answer
                batch.finish(True)
            elif batch.flow is not None:
                batch.flow.held += 1
                held.append(self.hold(batch))
            else:
                self.results[batch.key].error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        await asyncio.gather(*held)

    async def hold(self, batch: _Batch) -> None:
        """Forward the batch alone, once every earlier batch of its flow has its answer, to
        the partition's owner, until it takes it or the deadline passes."""
        flow = batch.flow
        assert flow is not None
        answered = False
        loop = asyncio.get_running_loop()
        try:
            for _, earlier in sorted((s, f) for s, f in flow.open.items() if s < batch.seq):
                try:
                    ok = await asyncio.wait_for(asyncio.shield(earlier),
                                                max(0.0, self.deadline - loop.time()))
                except TimeoutError:
                    ok = False
                if not ok:
                    return      # an earlier batch was given up: the client retries from it
            answered = await self._forward(batch)
        finally:
            flow.held -= 1
            if not answered:
                self.results[batch.key].error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            batch.finish(answered)

    async def _forward(self, batch: _Batch) -> bool:
        ctx, loop = self.ctx, asyncio.get_running_loop()
        single = ProduceRequest(
            transactional_id=self.request.transactional_id, acks=self.request.acks,
            timeout_ms=self.request.timeout_ms,
            topic_data=[TopicProduceData(name=batch.topic.name, topic_id=batch.topic.topic_id,
                                         partition_data=[batch.data])])
        while loop.time() < self.deadline:
            owner = ctx.proxy.cluster.owner(*batch.key)
            if owner is not None:
                link = ctx.links.get(owner.node.host, owner.node.port)
                try:
                    response = await link.request(single, self.version,
                                                  client_id=ctx.header.client_id)
                except (LinkError, OSError):
                    pass
                else:
                    answer = response.responses[0].partition_responses[0]
                    if answer.error_code not in _NOT_YET:
                        self.results[batch.key] = answer
                        return True
            await asyncio.sleep(HOLD_POLL_S)
        return False


async def handle_produce(ctx: ProxyContext, request: ProduceRequest,
                         version: int) -> ProduceResponse | None:
    proxy = ctx.proxy
    forwarding = _Forwarding(ctx, request, version)
    results, names = forwarding.results, forwarding.names
    by_owner: dict[BrokerLink, list[_Batch]] = {}
    held: list[_Batch] = []
    # No await until every batch has its place in its flow (arrival order).
    for topic in request.topic_data:
        name = topic.name
        if topic.topic_id.int:
            info = proxy.cluster.topics.by_id(topic.topic_id)
            name = info.name if info is not None else ""
        for data in topic.partition_data:
            result = PartitionProduceResponse(index=data.index, base_offset=-1)
            results[(name, data.index)] = result
            info = proxy.cluster.topics.get(name)
            if info is None or not 0 <= data.index < info.partitions:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                refuse_view(proxy.cluster.topics, name)
            except KafkaError as error:
                result.error_code, result.error_message = error.code, error.message
                continue
            names[topic.name] = name
            batch = _Batch((name, data.index), topic, data)
            owner = proxy.cluster.owner(name, data.index)
            link = None if owner is None else ctx.links.get(owner.node.host, owner.node.port)
            if forwarding.admit(batch, link):
                held.append(batch)
            elif link is None:
                result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                by_owner.setdefault(link, []).append(batch)
    await asyncio.gather(*(forwarding.hold(batch) for batch in held),
                         *(forwarding.send(link, batches) for link, batches in by_owner.items()))
    if request.acks == 0:
        return None
    responses = []
    for topic in request.topic_data:
        name = names.get(topic.name, topic.name)
        responses.append(TopicProduceResponse(
            name=topic.name, topic_id=topic.topic_id,
            partition_responses=[results[(name, p.index)] for p in topic.partition_data]))
    return ProduceResponse(responses=responses)
