"""A Produce request routed to the brokers that own its partitions: split by owner (one request
per owner, in parallel, at the caller's version, on the caller's links), the answers merged
back into one response. Record batches are passed on as the opaque bytes the caller has.

Each owner's part and each held batch is a unit of its own (``ProduceRouting.parts``): it sends,
retries and fills in the answers of its own partitions only, whatever the others do.

Batches with a producer id (idempotent or transactional producers: every client's default
now) are *held* rather than answered with an error when their partition moves: when it has no
live owner, when its owner cannot be reached (it died, or left the cluster frozen and the
caller closed its links), or when the owner answers NOT_LEADER_OR_FOLLOWER /
LEADER_NOT_AVAILABLE (draining, or the new owner still recovering, errors Kafka calls
retriable), the router waits for the partition's writable owner and forwards the batch there
itself, so the producer sees a slower answer, not an error. An error would make a Kafka client
refresh its metadata from some node its last Metadata listed: aiokafka picks one at random,
which can be the frozen broker, and sends nothing more until that request times out (40 s).
A duplicate of a batch the old owner had made durable is recognised by the new owner.

Order, per link pool (a proxy's client connection) and partition, is what a single Kafka leader
gives: a held batch is forwarded only once every earlier batch of that pool and partition has
its answer; while one is held, or while earlier ones are in flight to another broker than the
current owner, later batches are held too (else the new owner would get sequence N+1 before N:
OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to librdkafka's idempotent producer). A batch still without
a writable owner after half the request's timeout is answered NOT_LEADER_OR_FOLLOWER, and so is
every later held batch of its partition: the producer refreshes its metadata and retries them
in order. Batches without a producer id are answered NOT_LEADER_OR_FOLLOWER at once."""

from __future__ import annotations

import asyncio
import struct
import uuid
import weakref
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from bmq.client.requests import Address
from bmq.metadata.topics import TopicPartition
from bmq.net.client import BrokerLink, LinkError, LinkPool
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import ProduceRequest, ProduceResponse
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.messages.produce_response import PartitionProduceResponse, TopicProduceResponse

_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_AT = 43    # in a v2 record batch header
HOLD_POLL_S = 0.02      # how often a held batch looks for its partition's writable owner
HOLD_MAX_S = 15.0
# What an owner answers while it drains or recovers the partition: a held batch waits on.
PARTITION_MOVING = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE)
# What tells the router's targets the owner they named is not (or no longer) the partition's.
OWNER_STALE = (*PARTITION_MOVING, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


class ProduceTargets(Protocol):
    """The cluster as the router sees it (a proxy: its ZooKeeper view)."""

    def topic_name(self, topic_id: uuid.UUID) -> str:
        """The name of the topic with this id ("" if none)."""

    def check(self, topic: str, index: int) -> None:
        """Raise KafkaError if the partition takes no produce (unknown, read-only, ...)."""

    def owner(self, topic: str, index: int) -> Address | None:
        """Where the partition's live owner is now, if it has one."""

    def moved(self, topic: str, index: int) -> None:
        """The owner ``owner`` named did not take the partition's batch (it could not be
        reached, or answered that it does not lead the partition): a client that looks its
        owners up (``bmq.client.metadata``) looks again."""


@dataclass
class _Flow:
    """One link pool's batches (with a producer id) of one partition, in arrival order: each
    has a future, resolved when it has its answer (False: the router gave up on it)."""

    next_seq: int = 0
    open: dict[int, asyncio.Future[bool]] = field(default_factory=dict)
    held: int = 0
    inflight: int = 0
    link: BrokerLink | None = None     # where the batches in flight went


# Per link pool (a proxy: per client connection), per partition.
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


class ProduceRouting:
    """One Produce request's batches on their way to the owners. Built without an await, so
    every batch has its place in its flow in arrival order."""

    def __init__(self, links: LinkPool, targets: ProduceTargets, request: ProduceRequest,
                 version: int, client_id: str | None = None) -> None:
        """``client_id``: the header's of the forwarded requests (None: the links' own)."""
        self.links = links
        self.targets = targets
        self.request = request
        self.version = version
        self.client_id = client_id
        self.results: dict[TopicPartition, PartitionProduceResponse] = {}
        self.names: dict[str, str] = {}   # as the client named a topic (v13: by id) -> name
        self.deadline = asyncio.get_running_loop().time() + min(
            HOLD_MAX_S, request.timeout_ms / 2000)
        self.by_owner: dict[BrokerLink, list[_Batch]] = {}
        self.held: list[_Batch] = []
        for topic in request.topic_data:
            for data in topic.partition_data:
                self._place(topic, data)

    def _place(self, topic: TopicProduceData, data: PartitionProduceData) -> None:
        name = self.targets.topic_name(topic.topic_id) if topic.topic_id.int else topic.name
        result = PartitionProduceResponse(index=data.index, base_offset=-1)
        self.results[(name, data.index)] = result
        try:
            self.targets.check(name, data.index)
        except KafkaError as error:
            result.error_code, result.error_message = error.code, error.message
            return
        self.names[topic.name] = name
        batch = _Batch((name, data.index), topic, data)
        owner = self.targets.owner(name, data.index)
        link = None if owner is None else self.links.get(*owner)
        if self._admit(batch, link):
            self.held.append(batch)
        elif link is None:
            result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        else:
            self.by_owner.setdefault(link, []).append(batch)

    def parts(self) -> list[Coroutine[Any, Any, None]]:
        """The independent units: each owner's part of the request, and each held batch."""
        return [*(self._hold(batch) for batch in self.held),
                *(self._send(link, batches) for link, batches in self.by_owner.items())]

    def response(self) -> ProduceResponse | None:
        """The merged answer, once every part is done (None for acks=0)."""
        if self.request.acks == 0:
            return None
        responses = []
        for topic in self.request.topic_data:
            name = self.names.get(topic.name, topic.name)
            responses.append(TopicProduceResponse(
                name=topic.name, topic_id=topic.topic_id,
                partition_responses=[self.results[(name, p.index)]
                                     for p in topic.partition_data]))
        return ProduceResponse(responses=responses)

    def _admit(self, batch: _Batch, owner_link: BrokerLink | None) -> bool:
        """Give the batch its place in its flow; True if it must be held (not sent now)."""
        if self.request.acks == 0 or not _has_producer_id(batch.data.records):
            return False
        flow = _flows.setdefault(self.links, {}).setdefault(batch.key, _Flow())
        batch.flow, batch.seq = flow, flow.next_seq
        flow.next_seq += 1
        flow.open[batch.seq] = asyncio.get_running_loop().create_future()
        if flow.held or owner_link is None or (flow.inflight and flow.link is not owner_link):
            flow.held += 1
            return True
        flow.inflight += 1
        flow.link = owner_link
        return False

    async def _send(self, link: BrokerLink, batches: list[_Batch]) -> None:
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
                                          client_id=self.client_id)
        except (LinkError, OSError):
            response = None
        except BaseException:
            for batch in batches:       # (cancelled: the producer went) nothing waits on these
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
            if answer is None or answer.error_code in OWNER_STALE:
                self.targets.moved(*batch.key)
            if answer is not None and (batch.flow is None
                                       or answer.error_code not in PARTITION_MOVING):
                self.results[batch.key] = answer
                batch.finish(True)
            elif batch.flow is not None:
                batch.flow.held += 1
                held.append(self._hold(batch))
            else:
                self.results[batch.key].error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        await asyncio.gather(*held)

    async def _hold(self, batch: _Batch) -> None:
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
                    return      # an earlier batch was given up: the producer retries from it
            answered = await self._forward(batch)
        finally:
            flow.held -= 1
            if not answered:
                self.results[batch.key].error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            batch.finish(answered)

    async def _forward(self, batch: _Batch) -> bool:
        loop = asyncio.get_running_loop()
        single = ProduceRequest(
            transactional_id=self.request.transactional_id, acks=self.request.acks,
            timeout_ms=self.request.timeout_ms,
            topic_data=[TopicProduceData(name=batch.topic.name, topic_id=batch.topic.topic_id,
                                         partition_data=[batch.data])])
        while loop.time() < self.deadline:
            owner = self.targets.owner(*batch.key)
            if owner is not None:
                try:
                    response = await self.links.get(*owner).request(
                        single, self.version, client_id=self.client_id)
                except (LinkError, OSError):
                    self.targets.moved(*batch.key)
                else:
                    answer = response.responses[0].partition_responses[0]
                    if answer.error_code in OWNER_STALE:
                        self.targets.moved(*batch.key)
                    if answer.error_code not in PARTITION_MOVING:
                        self.results[batch.key] = answer
                        return True
            await asyncio.sleep(HOLD_POLL_S)
        return False


async def route_produce(links: LinkPool, targets: ProduceTargets, request: ProduceRequest,
                        version: int, client_id: str | None = None) -> ProduceResponse | None:
    """Forward the request to its partitions' owners and return their merged answer (None for
    acks=0)."""
    routing = ProduceRouting(links, targets, request, version, client_id)
    await asyncio.gather(*routing.parts())
    return routing.response()
