"""The cluster as the agent sees it, a Kafka client through ``bmq.client``: links, metadata
(partition counts of the topics streams go to, remembered in the spool directory so a
restarted agent can spool for a cluster it cannot reach), producer ids, and reading and
writing the stream mappings."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

from bmq.client.login import login
from bmq.client.metadata import MetadataCache, bootstrap_addresses
from bmq.client.produce import route_produce
from bmq.client.requests import ask_first
from bmq.databus.streams import STREAMS_TOPIC, StreamMapping, StreamTable
from bmq.net.client import LinkError, LinkPool
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import (
    CreateTopicsRequest,
    FetchRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from bmq.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig
from bmq.protocol.messages.fetch_request import FetchPartition, FetchTopic
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.record_codec import RecordDecodeError, build_batch, iter_records

log = logging.getLogger(__name__)

CLIENT_ID = "bmq-databus"
REQUEST_TIMEOUT_S = 10.0
METADATA_MAX_AGE_S = 30.0
PRODUCE_VERSION = 11            # topics by name (v13 names them by id)
INIT_PRODUCER_ID_VERSION = 4
CREATE_TOPICS_VERSION = 5
FETCH_VERSION = 12              # topics by name
PARTITION_COUNTS_FILE = "partition-counts.json"


class Cluster:
    def __init__(self, bootstrap: str, properties: dict[str, str],
                 state_dir: Path | None = None) -> None:
        self.bootstrap = bootstrap
        self.links = LinkPool(CLIENT_ID, login(properties))
        # Metadata of the topics the agent writes only: a cluster of 100,000 partitions
        # answers every topic's in megabytes.
        self._wanted = {STREAMS_TOPIC}
        self.metadata = MetadataCache(bootstrap_addresses(bootstrap), self.links,
                                      topics=sorted(self._wanted),
                                      max_age_s=METADATA_MAX_AGE_S,
                                      request_timeout_s=REQUEST_TIMEOUT_S)
        self._counts_path = None if state_dir is None else state_dir / PARTITION_COUNTS_FILE
        self._counts: dict[str, int] = {}
        if self._counts_path is not None and self._counts_path.exists():
            self._counts = {str(k): int(v) for k, v in
                            json.loads(self._counts_path.read_text()).items()}

    def addresses(self) -> list[tuple[str, int]]:
        return [*self.metadata.brokers.values(), *self.metadata.bootstrap]

    async def partitions(self, topic: str, look: bool = True) -> int | None:
        """How many partitions ``topic`` has: as the cluster's metadata says (asked again if
        it does not know the topic and ``look``), else as last seen; None if never seen."""
        info = self.metadata.topics.get(topic)
        if (info is not None and info.error == ErrorCode.NONE and info.partitions
                and topic in self._wanted and self._counts.get(topic) == len(info.partitions)):
            return len(info.partitions)       # (known and unchanged: every message's case)
        if self.want([topic]):
            info = None             # asked for the first time
        if (info is None or info.error != ErrorCode.NONE) and look:
            # Twice at most: a refresh already under way (joined) may have asked before
            # this topic was wanted, and its answer does not name it.
            for _ in range(2):
                with contextlib.suppress(LinkError, OSError, TimeoutError):
                    await asyncio.wait_for(self.metadata.refresh(), REQUEST_TIMEOUT_S)
                info = self.metadata.topics.get(topic)
                if info is not None:
                    break
        if info is not None and info.error == ErrorCode.NONE and info.partitions:
            count = len(info.partitions)
            if self._counts.get(topic) != count:
                self._counts[topic] = count
                self._save_counts()
            return count
        if info is not None and self.metadata.topics:
            return None         # the cluster answered: the topic is not there (any more)
        return self._counts.get(topic)

    def want(self, topics: Iterable[str]) -> bool:
        """Add ``topics`` to those whose metadata is asked for; whether any is new."""
        new = set(topics) - self._wanted
        if new:
            self._wanted |= new
            self.metadata.wanted = sorted(self._wanted)
        return bool(new)

    def _save_counts(self) -> None:
        if self._counts_path is None:
            return
        temporary = self._counts_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self._counts))
        os.replace(temporary, self._counts_path)

    async def init_producer_id(self) -> tuple[int, int]:
        """A new idempotent producer id and epoch from the cluster."""
        response = await ask_first(self.links, self.addresses(), InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=-1), INIT_PRODUCER_ID_VERSION,
            REQUEST_TIMEOUT_S)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(response.error_code))
        return response.producer_id, response.producer_epoch

    async def produce(self, request: ProduceRequest) -> object:
        """The request routed to its partitions' owners (``bmq.client.produce``)."""
        if self.want(topic.name for topic in request.topic_data):
            await self.metadata.refresh()       # (batches spooled by an earlier run: a
            await self.metadata.refresh()       # refresh under way may not name them)
        await self.metadata.fresh()
        return await route_produce(self.links, self.metadata, request, PRODUCE_VERSION)

    # -- the stream mappings ----------------------------------------------------------------
    async def read_mappings(self, table: StreamTable) -> None:
        """Apply the mapping records written since the last read."""
        await self.metadata.fresh()
        address = self.metadata.owner(STREAMS_TOPIC, 0)
        if address is None:
            await self.metadata.refresh()       # made since the last look?
            address = self.metadata.owner(STREAMS_TOPIC, 0)
            if address is None:
                return
        while True:
            response = await asyncio.wait_for(self.links.get(*address).request(FetchRequest(
                max_wait_ms=0, min_bytes=0, max_bytes=8 << 20, topics=[FetchTopic(
                    topic=STREAMS_TOPIC, partitions=[FetchPartition(
                        partition=0, fetch_offset=table.next_offset,
                        partition_max_bytes=8 << 20)])]), FETCH_VERSION), REQUEST_TIMEOUT_S)
            answer = response.responses[0].partitions[0]
            if answer.error_code != ErrorCode.NONE:
                if answer.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    table.next_offset = 0
                    table.mappings.clear()
                    continue
                self.metadata.moved(STREAMS_TOPIC, 0)
                raise KafkaError(ErrorCode(answer.error_code))
            records = bytes(answer.records or b"")
            before = table.next_offset
            try:
                for record in iter_records(records):
                    if record.offset < table.next_offset:
                        continue
                    complaint = table.apply(record.key, record.value)
                    if complaint:
                        log.warning("%s", complaint)
                    table.next_offset = record.offset + 1
            except RecordDecodeError as error:
                log.warning("%s: unreadable records at %d: %s", STREAMS_TOPIC,
                            table.next_offset, error)
                return
            if table.next_offset == before or table.next_offset >= answer.high_watermark:
                return

    async def write_mapping(self, stream: str, mapping: StreamMapping | None) -> None:
        """Store ``stream``'s mapping (None: remove it) on the cluster, making the mappings
        topic first if it is not there."""
        await self.metadata.refresh()
        known = self.metadata.topics.get(STREAMS_TOPIC)
        if known is None or known.error != ErrorCode.NONE:
            response = await ask_first(self.links, self.addresses(), CreateTopicsRequest(
                topics=[CreatableTopic(name=STREAMS_TOPIC, num_partitions=1,
                                       replication_factor=-1, configs=[
                                           CreatableTopicConfig("cleanup.policy", "compact")])],
                timeout_ms=int(REQUEST_TIMEOUT_S * 1000)), CREATE_TOPICS_VERSION,
                REQUEST_TIMEOUT_S)
            code = response.topics[0].error_code
            if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                raise KafkaError(ErrorCode(code), response.topics[0].error_message)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REQUEST_TIMEOUT_S
        batch, _ = build_batch([(stream.encode(),
                                 None if mapping is None else mapping.to_json())],
                               timestamp=int(time.time() * 1000))
        while True:
            await self.metadata.refresh()
            response = await route_produce(self.links, self.metadata, ProduceRequest(
                acks=-1, timeout_ms=int(REQUEST_TIMEOUT_S * 1000), topic_data=[
                    TopicProduceData(name=STREAMS_TOPIC, partition_data=[
                        PartitionProduceData(index=0, records=bytes(batch))])]),
                PRODUCE_VERSION)
            assert response is not None
            answer = response.responses[0].partition_responses[0]
            if answer.error_code == ErrorCode.NONE:
                return
            if loop.time() > deadline:
                raise KafkaError(ErrorCode(answer.error_code), answer.error_message)
            await asyncio.sleep(0.2)     # a topic just made may have no owner yet

    def close(self) -> None:
        self.metadata.close()
        self.links.close()
