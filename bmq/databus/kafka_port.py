"""The agent's Kafka port: any Kafka client produces to it with nothing but
``bootstrap.servers``. It answers ApiVersions, Metadata (the agent is the only broker; each
stream is a topic of one partition, the agent partitions for the real topic), InitProducerId
(idempotent producers, the default of the Java client; transactions are refused) and Produce.

Records are taken out of the clients' batches (checked as a broker checks them: framing,
CRC-32C, magic) and merged into the agent's own. acks=1 is answered once they are spooled,
acks=all once the cluster took them; the offsets are the cluster's, in partitions the client
does not see, so the answer's base offset is -1 (unknown), as for acks=0 in Kafka.

An idempotent client's batches are checked as a Kafka leader checks them, per producer and
stream: the next sequence is taken, a retry of one of the last five is answered as the first
time (and never placed twice), any other gets OUT_OF_ORDER_SEQUENCE_NUMBER. The spool keeps
those five (``Spool.remember``), so a retry after the agent restarted is recognised too."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bmq.databus.batcher import Placement
from bmq.databus.intake import ACKS_CLUSTER, Intake, all_done, settle
from bmq.databus.pressure import MAX_REQUESTS, AdmissionMemory
from bmq.databus.sender import Sender
from bmq.databus.settings import DatabusSettings
from bmq.databus.spool import ClientBatch
from bmq.databus.workers import last_run_sent, spool_dir
from bmq.net.api import ApiSpec, supported_versions
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.headers import RequestHeader
from bmq.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from bmq.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData
from bmq.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from bmq.protocol.messages.produce_response import PartitionProduceResponse, TopicProduceResponse
from bmq.protocol.record_codec import Record, RecordDecodeError, decode_batch
from bmq.protocol.records import TRANSACTIONAL_FLAG, validate_batches

WAY = "kafka"
NODE_ID = 0
CLUSTER_ID = "bmq-databus"
STREAM_IDS = uuid.UUID("6d3f1c1e-6a0e-4f5e-9a53-5d1a2b7c0001")
MAX_FRAME_BYTES = 100 << 20
# A client's requests in progress before its connection is not read: each waits for a batch
# (linger, spool, the cluster), so a client producing faster than one request per wait needs
# many in flight (librdkafka pipelines them; answers leave in order). With 5, a client of
# 100 messages/s in requests of one message each queued for seconds.
MAX_INFLIGHT = 1000
PRODUCER_WINDOW = 5             # batches a producer may retry (Kafka's, per partition)


def _spec(request_name: str, handler: Any, max_version: int | None = None,
          min_version: int | None = None) -> ApiSpec:
    spec = ApiSpec(request_name, handler)
    if max_version is not None:
        spec.max_version = min(spec.max_version, max_version)
    if min_version is not None:
        spec.min_version = max(spec.min_version, min_version)
    return spec


@dataclass
class _Placed:
    """A batch of an idempotent client that was placed: a retry waits for the same."""

    base_sequence: int
    epoch: int
    placements: list[Placement] | None      # None: placed in the agent's last run ...
    worker: int = 0                         # ... by this worker, in these spooled batches
    batch_ids: tuple[int, ...] = ()


@dataclass
class _ProducerState:
    epoch: int = 0
    next_sequence: dict[str, int] = field(default_factory=dict)      # per stream
    recent: dict[str, deque[_Placed]] = field(default_factory=dict)


class ClientProducers:
    """The producer ids this agent gave its clients, and their sequences."""

    def __init__(self, worker: int = 0, workers: int = 1) -> None:
        # Ids of one agent run do not repeat those of the last (time-based first id), nor
        # those of another worker (every workers-th id is this worker's).
        self._ids = itertools.count((int(time.time() * 1000) % (1 << 40) << 8) * workers
                                    + worker, workers)
        self.states: OrderedDict[int, _ProducerState] = OrderedDict()

    def new(self, producer_id: int, epoch: int) -> tuple[int, int]:
        state = self.states.get(producer_id)
        if producer_id >= 0 and state is not None and epoch == state.epoch:
            state.epoch += 1                # KIP-360: the same id, the next epoch
            state.next_sequence.clear()
            state.recent.clear()
            return producer_id, state.epoch
        new_id = next(self._ids)
        self.states[new_id] = _ProducerState()
        while len(self.states) > 100_000:
            self.states.popitem(last=False)
        return new_id, 0

    def resume(self, taken: Iterable[ClientBatch], worker: int) -> None:
        """What the spool of ``worker`` remembers of a client's batches in a stream, oldest
        first (at start): the agent goes on from them, and a retry of one of them is
        recognised."""
        for batch in taken:
            state = self.states.get(batch.producer_id)
            if state is None or batch.epoch > state.epoch:
                state = self.states[batch.producer_id] = _ProducerState(epoch=batch.epoch)
            elif batch.epoch < state.epoch:
                continue
            state.recent.setdefault(batch.stream, deque(maxlen=PRODUCER_WINDOW)).append(
                _Placed(batch.base_sequence, batch.epoch, None, worker, batch.batch_ids))
            state.next_sequence[batch.stream] = (batch.base_sequence + batch.records) % (1 << 31)


class DatabusService:
    """The agent as one client connection sees it (``bmq.net.connection.Service``)."""

    max_frame_bytes = MAX_FRAME_BYTES
    max_inflight = MAX_INFLIGHT

    def __init__(self, port: KafkaPort) -> None:
        self.port = port
        self.handlers = port.handlers
        self.request_memory = port.memory

    def context(self, header: RequestHeader, client_host: str, frame: bytearray) -> KafkaPort:
        return self.port

    def close(self) -> None:
        pass

    def observe(self, api_key: int, api_name: str, request: Any, response: Any,
                seconds: float) -> None:
        pass


class KafkaPort:
    def __init__(self, intake: Intake, advertised: tuple[str, int], known_streams: Any,
                 sender: Sender, worker: int, settings: DatabusSettings) -> None:
        """``sender``: what the last run spooled here and is not sent yet; ``worker``: which
        of the agent's workers this is."""
        self.intake = intake
        self.sender = sender
        self.worker = worker
        self.settings = settings
        self.advertised = advertised
        self.known_streams = known_streams      # () -> the mapped stream names
        self.producers = ClientProducers(worker, settings.workers)
        self.memory = AdmissionMemory(256 << 20, MAX_REQUESTS)
        self.handlers: Mapping[int, ApiSpec] = {spec.api_key: spec for spec in (
            _spec("ApiVersionsRequest", _api_versions),
            _spec("MetadataRequest", _metadata, max_version=12),
            # v0-2 are Kafka 4's "listed but refused" (librdkafka needs them listed); v13
            # names topics by id.
            _spec("ProduceRequest", _produce, max_version=12, min_version=3),
            _spec("InitProducerIdRequest", _init_producer_id),
            # Listed because librdkafka takes a broker without Fetch v4 for one that cannot
            # store record batch v2 (its MSGVER2 feature): every fetch is refused.
            _spec("FetchRequest", _fetch, max_version=12),
        )}

    def service(self) -> DatabusService:
        return DatabusService(self)

    async def produce_partition(self, stream: str, index: int, records: Any, acks: int,
                                timeout_s: float) -> PartitionProduceResponse:
        answer = PartitionProduceResponse(index=index, base_offset=-1)
        try:
            if index != 0:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 "a stream has one partition, 0")
            view = memoryview(records or b"")
            headers = validate_batches(view, MAX_FRAME_BYTES)
            first = headers[0]
            if any(h.attributes & TRANSACTIONAL_FLAG for h in headers):
                raise KafkaError(ErrorCode.INVALID_REQUEST, "the databus takes no transactions")
            decoded: list[Record] = []
            position = 0
            for header in headers:
                decoded += decode_batch(view[position:position + header.size], header)
                position += header.size
        except RecordDecodeError as error:
            answer.error_code, answer.error_message = ErrorCode.CORRUPT_MESSAGE, str(error)
            self.intake.refused(ErrorCode.CORRUPT_MESSAGE, 1)
            return answer
        except KafkaError as error:
            answer.error_code, answer.error_message = error.code, error.message
            self.intake.refused(error.code, 1)
            return answer
        if first.producer_id < 0 or acks == 0:
            return await self._place(stream, decoded, acks, timeout_s, answer)
        return await self._place_once(stream, decoded, acks, timeout_s, answer,
                                      first.producer_id, first.producer_epoch,
                                      first.base_sequence)

    async def _place(self, stream: str, records: list[Record], acks: int, timeout_s: float,
                     answer: PartitionProduceResponse) -> PartitionProduceResponse:
        try:
            placements = await self.intake.put(stream, records, WAY)
            await settle(placements, acks, timeout_s)
        except KafkaError as error:
            answer.error_code, answer.error_message = error.code, error.message
        return answer

    async def _place_once(self, stream: str, records: list[Record], acks: int,
                          timeout_s: float, answer: PartitionProduceResponse, producer_id: int,
                          epoch: int, sequence: int) -> PartitionProduceResponse:
        state = self.producers.states.get(producer_id)
        if state is None:
            # Not one of this run's ids (the agent restarted under the client): its
            # sequence goes on from here.
            state = self.producers.states[producer_id] = _ProducerState(epoch=epoch)
        if epoch != state.epoch:
            answer.error_code = (ErrorCode.INVALID_PRODUCER_EPOCH if epoch < state.epoch
                                 else ErrorCode.UNKNOWN_PRODUCER_ID)
            return answer
        recent = state.recent.setdefault(stream, deque(maxlen=PRODUCER_WINDOW))
        for earlier in recent:
            if earlier.base_sequence == sequence and earlier.epoch == epoch:
                # A retry (its answer was lost, or timed out): placed the first time, so it
                # waits for the same batches, never placed again.
                if earlier.placements is None:
                    return await self._placed_last_run(acks, timeout_s, answer, earlier)
                return await self._settled(earlier.placements, acks, timeout_s, answer)
        expected = state.next_sequence.get(stream)
        if expected is not None and sequence != expected:
            answer.error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            answer.error_message = f"expected sequence {expected}, got {sequence}"
            return answer
        try:
            placements = await self.intake.put(stream, records, WAY)
        except KafkaError as error:
            answer.error_code, answer.error_message = error.code, error.message
            return answer
        # Placed: the sequence is used, whatever the wait below says.
        state.next_sequence[stream] = (sequence + len(records)) % (1 << 31)
        recent.append(_Placed(sequence, epoch, placements))
        self._remember_once_spooled(ClientBatch(producer_id, epoch, stream, sequence,
                                                len(records)), placements)
        return await self._settled(placements, acks, timeout_s, answer)

    def _remember_once_spooled(self, taken: ClientBatch, placements: list[Placement]) -> None:
        """Have the spool remember ``taken``, and the batches its records are in, once each
        of them is written there (not before: a restart would then take a retry of records
        it does not have)."""
        batches = list({id(p.batch): p.batch for p in placements}.values())
        unwritten = [batch for batch in batches if not batch.appended]
        left = len(unwritten)

        def remember() -> None:
            self.intake.batcher.spool.remember(dataclasses.replace(
                taken, batch_ids=tuple(batch.spool_id for batch in batches)))

        def written() -> None:
            nonlocal left
            left -= 1
            if left == 0:
                remember()

        if not unwritten:
            remember()
        for batch in unwritten:
            batch.on_appended.append(written)

    async def _placed_last_run(self, acks: int, timeout_s: float,
                               answer: PartitionProduceResponse, placed: _Placed
                               ) -> PartitionProduceResponse:
        """A retry of a batch the agent's last run took: it is in the spool (acks=1), and
        the cluster has it (acks=all, as Kafka answers it) once the spooled batches its
        records are in have been sent; if another worker spooled them, or an agent that did
        not say in which batches, once all that spool's batches of the last run have."""
        if acks != ACKS_CLUSTER:
            return answer
        if placed.worker != self.worker:
            sent = await last_run_sent(spool_dir(self.settings, placed.worker), timeout_s)
        elif placed.batch_ids:
            sent = await all_done(self.sender.last_run_left(placed.batch_ids), timeout_s)
        else:
            try:
                await asyncio.wait_for(self.sender.recovered_sent.wait(), timeout_s)
                sent = True
            except TimeoutError:
                sent = False
        if not sent:
            answer.error_code = ErrorCode.REQUEST_TIMED_OUT
        return answer

    @staticmethod
    async def _settled(placements: list[Placement], acks: int, timeout_s: float,
                       answer: PartitionProduceResponse) -> PartitionProduceResponse:
        try:
            await settle(placements, acks, timeout_s)
        except KafkaError as error:
            answer.error_code, answer.error_message = error.code, error.message
        return answer


async def _api_versions(port: KafkaPort, request: ApiVersionsRequest, version: int
                        ) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.NONE,
                               api_keys=supported_versions(port.handlers))


async def _metadata(port: KafkaPort, request: MetadataRequest, version: int
                    ) -> MetadataResponse:
    names = (sorted(port.known_streams()) if request.topics is None
             else [t.name or "" for t in request.topics])
    topics = []
    for name in names:
        answer = MetadataResponseTopic(name=name, topic_id=uuid.uuid5(STREAM_IDS, name))
        try:
            await port.intake.partitions(name)
        except KafkaError as error:
            answer.error_code = error.code
        else:
            answer.partitions = [MetadataResponsePartition(
                partition_index=0, leader_id=NODE_ID, leader_epoch=0,
                replica_nodes=[NODE_ID], isr_nodes=[NODE_ID])]
        topics.append(answer)
    host, port_number = port.advertised
    return MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=NODE_ID, host=host, port=port_number)],
        cluster_id=CLUSTER_ID, controller_id=NODE_ID, topics=topics)


async def _init_producer_id(port: KafkaPort, request: InitProducerIdRequest, version: int
                            ) -> InitProducerIdResponse:
    if request.transactional_id:
        return InitProducerIdResponse(error_code=ErrorCode.INVALID_REQUEST)
    producer_id, epoch = port.producers.new(request.producer_id, request.producer_epoch)
    return InitProducerIdResponse(producer_id=producer_id, producer_epoch=epoch)


async def _produce(port: KafkaPort, request: ProduceRequest, version: int
                   ) -> ProduceResponse | None:
    timeout_s = max(request.timeout_ms, 1) / 1000
    parts: list[tuple[str, Any]] = []
    for topic in request.topic_data:
        for data in topic.partition_data:
            if request.transactional_id:
                parts.append((topic.name, _refused(data.index, ErrorCode.INVALID_REQUEST,
                                                   "the databus takes no transactions")))
            else:
                parts.append((topic.name, port.produce_partition(
                    topic.name, data.index, data.records, request.acks, timeout_s)))
    # (one partition, the common case: awaited as it is, without gather's task)
    answers = ([await parts[0][1]] if len(parts) == 1
               else await asyncio.gather(*(part for _, part in parts)))
    if request.acks == 0:
        return None
    by_topic: dict[str, TopicProduceResponse] = {}
    for (name, _), answer in zip(parts, answers, strict=True):
        by_topic.setdefault(name, TopicProduceResponse(name=name)).partition_responses.append(
            answer)
    return ProduceResponse(responses=list(by_topic.values()))


async def _fetch(port: KafkaPort, request: FetchRequest, version: int) -> FetchResponse:
    """Streams are written through the agent, read from the cluster: every partition asked
    gets INVALID_REQUEST."""
    return FetchResponse(responses=[FetchableTopicResponse(topic=topic.topic, partitions=[
        PartitionData(partition_index=p.partition, error_code=ErrorCode.INVALID_REQUEST,
                      high_watermark=-1, records=b"")
        for p in topic.partitions]) for topic in request.topics])


async def _refused(index: int, code: ErrorCode, message: str) -> PartitionProduceResponse:
    return PartitionProduceResponse(index=index, base_offset=-1, error_code=code,
                                    error_message=message)
