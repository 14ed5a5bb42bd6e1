"""A Produce request routed to the brokers that own its partitions: split by owner (one request
per owner, in parallel, at the caller's version, on the caller's links), the answers merged
back into one response. Record batches are passed on as the opaque bytes the caller has.

Each owner's part and each held batch is a unit of its own (``ProduceRouting.parts``): it sends,
retries and fills in the answers of its own partitions only, whatever the others do.

A part waits on its owner only while the owner is alive. A Kafka client's connection gets its
answers in the order of its requests, and its producer keeps at most 5 requests in flight: one
request held on a frozen (SIGSTOP) or cut-off owner would hold every partition of the
connection, those of healthy brokers too. So the router watches its forwards as
``bmq.client.liveness`` does (probing the owner on a connection of its own): an owner link that
has had a forward outstanding for ``STALL_S`` with no answer meanwhile, neither there nor to a
probe, is *stalled*: the parts waiting on it are answered REQUEST_TIMED_OUT, and so is every
part for it until it answers again (nothing more is forwarded to it meanwhile). An owner that
answers probes is alive, only slow to make the batches durable (a storage flush under load
takes seconds): its parts wait, for ``SLOW_S`` at most (an owner cut off from its storage
alone never makes them durable). Answered REQUEST_TIMED_OUT early, a batch the owner does make
durable later would be one librdkafka holds for retry as "possibly persisted", and renumbers
after its next epoch bump (a message timed out elsewhere): a duplicate. REQUEST_TIMED_OUT is
what Kafka answers when a write was not confirmed in time, and it is retriable everywhere
without a metadata refresh (librdkafka and the Java client retry it, in order, for an
idempotent producer; aiokafka re-enqueues it): the producer retries on the same proxy, and its
retry reaches the partition's owner of the moment. A forward still outstanding to a stalled
owner cannot reorder a producer's sequence: if the partition stays, the retry goes after it on
the same link (the owner answers it as a duplicate); if the partition moves, the new owner
took over with a new storage epoch, which fences the old owner's late write.

Batches with a producer id (idempotent or transactional producers: every client's default
now) are *held* rather than answered with an error when their partition moves: when it has no
live owner, when its owner cannot be reached (it died), or when the owner answers
NOT_LEADER_OR_FOLLOWER / LEADER_NOT_AVAILABLE (draining, or the new owner still recovering,
errors Kafka calls retriable), the router waits for the partition's writable owner and forwards
the batch there itself, so the producer sees a slower answer, not an error that sends it to
look for metadata (aiokafka asks a node of its last Metadata at random, which can be the frozen
broker, and sends nothing more until that request times out, 40 s). A batch still held after
``STALL_S`` is answered REQUEST_TIMED_OUT. A duplicate of a batch the old owner had made
durable is recognised by the new owner.

Order, per link pool (a proxy's client connection) and partition, is what a single Kafka leader
gives (a Kafka client sends a partition's batches on its one connection to the leader; after a
reconnect it retries what was in flight only once its answers are in): a held batch is
forwarded only once every earlier batch of that pool and partition has its answer; while one is
held, or while earlier ones are in flight to another broker than the current owner or to an
owner that has not yet taken a batch of the partition from this pool, later batches are held
too (else the new owner would get sequence N+1 before N: OUT_OF_ORDER_SEQUENCE_NUMBER; or,
still opening the partition, turn N away and take N+1 as a new producer's first). Once a
batch is answered with an error its producer retries it after (REQUEST_TIMED_OUT, or such an
answer of its owner), the later batches of its producer
and epoch that the client had sent before it heard so are answered REQUEST_TIMED_OUT, without
being forwarded, until its retry (a batch from that sequence or before) comes: forwarded, they
would reach the owner without their predecessor, which it refuses (OUT_OF_ORDER), or takes
when it knows nothing of the producer (Kafka's rule), so that the retry itself is refused as
out of order: fatal to librdkafka's idempotent producer. Batches without a producer id are answered
NOT_LEADER_OR_FOLLOWER when their partition has no reachable owner."""

from __future__ import annotations

import asyncio
import struct
import uuid
import weakref
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from bmq.client.liveness import STALL_S, Stalled, ask_while_alive
from bmq.client.requests import Address
from bmq.metadata.topics import TopicPartition
from bmq.net.client import BrokerLink, LinkError, LinkPool
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.message_sets import is_message_set
from bmq.protocol.messages import ProduceRequest, ProduceResponse
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.messages.produce_response import PartitionProduceResponse, TopicProduceResponse

# In a v2 record batch header: producer id, producer epoch, base sequence.
_PRODUCER = struct.Struct(">qhi")
_PRODUCER_AT = 43
_SEQUENCE_HALF = 1 << 30    # sequences wrap at 2**31: "after" is less than half a turn ahead
SLOW_S = 5.0            # the longest a part waits on an owner that answers probes
HOLD_POLL_S = 0.02      # how often a held batch looks for its partition's writable owner
# What an owner answers while it drains or recovers the partition: a held batch waits on.
PARTITION_MOVING = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE)
# What tells the router's targets the owner they named is not (or no longer) the partition's.
OWNER_STALE = (*PARTITION_MOVING, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
# Other answers a producer retries the batch after (Kafka's retriable errors of a Produce).
RETRIED = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT,
           ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.KAFKA_STORAGE_ERROR)


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


async def _ask(link: BrokerLink, request: ProduceRequest, version: int,
               client_id: str | None) -> ProduceResponse | None:
    """Forward ``request`` on ``link`` and return the answer (None for acks=0); Stalled if the
    owner is stalled, or still has not answered after ``SLOW_S``."""
    response: ProduceResponse | None = await ask_while_alive(
        link, lambda: link.request(request, version, expect_response=request.acks != 0,
                                   client_id=client_id), SLOW_S)
    return response


@dataclass
class _Flow:
    """One link pool's batches (with a producer id) of one partition, in arrival order: each
    has a future, resolved when it has its answer (False: the router gave up on it)."""

    next_seq: int = 0
    open: dict[int, asyncio.Future[bool]] = field(default_factory=dict)
    held: int = 0
    inflight: int = 0
    link: BrokerLink | None = None     # where the batches in flight went
    # The owner link that has taken a batch of this flow: batches are pipelined to it only.
    # An owner still opening the partition turns one batch away (NOT_LEADER_OR_FOLLOWER) and
    # may take the next, sent right behind it, a moment later: as the first batch of a
    # producer it knows nothing of (Kafka's rule), so the retry of the one turned away is
    # out of order, fatal to librdkafka (seen at a topic's start in the fault tests).
    confirmed: BrokerLink | None = None
    # (producer id, epoch, base sequence) of the earliest batch answered with an error its
    # producer retries (RETRIED), whose retry has not come yet.
    failed: tuple[int, int, int] | None = None

    def refuses(self, producer: tuple[int, int, int]) -> bool:
        """Whether a batch must be answered REQUEST_TIMED_OUT unsent: it follows a batch
        answered with an error whose retry has not come (else this one is the retry, or of
        another epoch: the flow is clear again)."""
        if self.failed is None:
            return False
        if _before(self.failed, producer):
            return True
        self.failed = None
        return False

    def waits_before(self, seq: int) -> bool:
        """Whether a batch that came before the one at ``seq`` has no answer yet."""
        return any(earlier < seq for earlier in self.open)


def _before(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    """Whether batch ``a`` comes before ``b`` of the same producer and epoch."""
    return a[:2] == b[:2] and 0 < (b[2] - a[2]) % (1 << 31) < _SEQUENCE_HALF


# Per link pool (a proxy: per client connection), per partition.
_flows: weakref.WeakKeyDictionary[LinkPool, dict[TopicPartition, _Flow]] = \
    weakref.WeakKeyDictionary()


def _producer(records: object) -> tuple[int, int, int] | None:
    """(producer id, epoch, base sequence) of a batch that has a producer id (none in a
    message set of formats v0/v1, an old client's: the bytes there are a message's)."""
    if not isinstance(records, (bytes, bytearray, memoryview)) or \
            len(records) < _PRODUCER_AT + _PRODUCER.size or is_message_set(records):
        return None
    producer: tuple[int, int, int] = _PRODUCER.unpack_from(records, _PRODUCER_AT)
    return producer if producer[0] >= 0 else None


@dataclass
class _Batch:
    key: TopicPartition
    topic: TopicProduceData
    data: PartitionProduceData
    flow: _Flow | None = None       # None: no producer id (or acks=0), never held
    seq: int = 0                    # its place in the flow
    producer: tuple[int, int, int] = (-1, -1, -1)

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
            STALL_S, request.timeout_ms / 2000)
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
        placed = self._admit(batch, link)
        if placed == "hold":
            self.held.append(batch)
        elif placed == "refuse":
            result.error_code = ErrorCode.REQUEST_TIMED_OUT
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

    def _admit(self, batch: _Batch, owner_link: BrokerLink | None
               ) -> Literal["send", "hold", "refuse"]:
        """Give the batch its place in its flow: to be sent now, held, or refused (it follows
        a batch answered REQUEST_TIMED_OUT whose retry has not come)."""
        producer = None if self.request.acks == 0 else _producer(batch.data.records)
        if producer is None:
            return "send"
        flow = _flows.setdefault(self.links, {}).setdefault(batch.key, _Flow())
        if flow.refuses(producer):
            return "refuse"
        batch.flow, batch.seq, batch.producer = flow, flow.next_seq, producer
        flow.next_seq += 1
        flow.open[batch.seq] = asyncio.get_running_loop().create_future()
        if flow.held or owner_link is None or (flow.inflight and (
                flow.link is not owner_link or flow.confirmed is not owner_link)):
            flow.held += 1
            return "hold"
        flow.inflight += 1
        flow.link = owner_link
        return "send"

    def _time_out(self, batch: _Batch) -> None:
        """Answer the batch REQUEST_TIMED_OUT (retriable: its outcome is not known)."""
        self.results[batch.key].error_code = ErrorCode.REQUEST_TIMED_OUT
        self._retried(batch)

    def _retried(self, batch: _Batch) -> None:
        """The batch has an answer its producer retries it after: none of its flow's later
        batches may reach an owner before that retry."""
        flow = batch.flow
        if flow is not None:
            if flow.failed is None or _before(batch.producer, flow.failed):
                flow.failed = batch.producer
            batch.finish(False)

    def _answer(self, batch: _Batch, answer: PartitionProduceResponse) -> None:
        self.results[batch.key] = answer
        if answer.error_code in RETRIED:
            self._retried(batch)
        else:
            batch.finish(True)

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
            response = await _ask(link, request, self.version, self.client_id)
        except Stalled:
            for batch in batches:
                if batch.flow is not None:
                    batch.flow.inflight -= 1
                self._time_out(batch)
            return
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
                for part in topic.partition_responses:
                    answers[(self.names.get(topic.name, topic.name), part.index)] = part
        held = []
        for batch in batches:
            if batch.flow is not None:
                batch.flow.inflight -= 1
            answer = answers.get(batch.key)
            if answer is None or answer.error_code in OWNER_STALE:
                self.targets.moved(*batch.key)
            # OUT_OF_ORDER_SEQUENCE_NUMBER for a batch whose predecessor is still held here:
            # both were in flight to the owner, which turned the predecessor away (it was
            # still opening the partition) and then took this one without it. Answered now,
            # after the predecessor's success, it tells librdkafka its next expected sequence
            # was refused: fatal. It goes after its predecessor instead, as on one leader.
            out_of_turn = (batch.flow is not None and answer is not None
                           and answer.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                           and batch.flow.waits_before(batch.seq))
            if answer is not None and (batch.flow is None or (
                    answer.error_code not in PARTITION_MOVING and not out_of_turn)):
                if batch.flow is not None and answer.error_code == ErrorCode.NONE:
                    batch.flow.confirmed = link
                self._answer(batch, answer)
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
        answer = None
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
            answer = await self._forward(batch)
        finally:
            flow.held -= 1
            if answer is not None:
                self._answer(batch, answer)
            else:
                self._time_out(batch)

    async def _forward(self, batch: _Batch) -> PartitionProduceResponse | None:
        """The answer of the partition's owner that took the batch, if one did in time."""
        loop = asyncio.get_running_loop()
        single = ProduceRequest(
            transactional_id=self.request.transactional_id, acks=self.request.acks,
            timeout_ms=self.request.timeout_ms,
            topic_data=[TopicProduceData(name=batch.topic.name, topic_id=batch.topic.topic_id,
                                         partition_data=[batch.data])])
        while loop.time() < self.deadline:
            owner = self.targets.owner(*batch.key)
            if owner is not None:
                link = self.links.get(*owner)
                try:
                    response = await _ask(link, single, self.version, self.client_id)
                except Stalled:
                    return None
                except (LinkError, OSError):
                    self.targets.moved(*batch.key)
                else:
                    assert response is not None     # held batches have acks != 0
                    answer = response.responses[0].partition_responses[0]
                    if answer.error_code in OWNER_STALE:
                        self.targets.moved(*batch.key)
                    if answer.error_code not in PARTITION_MOVING:
                        if answer.error_code == ErrorCode.NONE:
                            assert batch.flow is not None
                            batch.flow.confirmed = link
                        return answer
            await asyncio.sleep(HOLD_POLL_S)
        return None


async def route_produce(links: LinkPool, targets: ProduceTargets, request: ProduceRequest,
                        version: int, client_id: str | None = None) -> ProduceResponse | None:
    """Forward the request to its partitions' owners and return their merged answer (None for
    acks=0)."""
    routing = ProduceRouting(links, targets, request, version, client_id)
    await asyncio.gather(*routing.parts())
    return routing.response()
