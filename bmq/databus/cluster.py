"""The cluster as the agent sees it, a Kafka client through ``bmq.client``: links, metadata
(partition counts of the topics streams go to, remembered in the spool directory so a
restarted agent can spool for a cluster it cannot reach), producer ids, and reading and
writing the stream mappings its brokers keep (BmqDescribeDatabusStreams,
BmqAlterDatabusStreams)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from bmq.client.login import login
from bmq.client.metadata import MetadataCache, bootstrap_addresses
from bmq.client.produce import route_produce
from bmq.client.requests import ask_first
from bmq.databus.streams import StreamTable
from bmq.metadata.databus_streams import MappingError, StreamMapping, from_wire, to_wire
from bmq.net.client import LinkError, LinkPool
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import (
    ApiVersionsRequest,
    BmqAlterDatabusStreamsRequest,
    BmqDescribeDatabusStreamsRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from bmq.protocol.messages.bmq_alter_databus_streams_request import AlterableDatabusStream

log = logging.getLogger(__name__)

CLIENT_ID = "bmq-databus"
REQUEST_TIMEOUT_S = 10.0
METADATA_MAX_AGE_S = 30.0
PRODUCE_VERSION = 11            # topics by name (v13 names them by id)
INIT_PRODUCER_ID_VERSION = 4
PARTITION_COUNTS_FILE = "partition-counts.json"


class MappingsNotServed(Exception):
    """The cluster keeps no databus stream mappings (Apache Kafka, say)."""


class Cluster:
    def __init__(self, bootstrap: str, properties: dict[str, str],
                 state_dir: Path | None = None) -> None:
        self.bootstrap = bootstrap
        self.links = LinkPool(CLIENT_ID, login(properties))
        # Metadata of the topics the agent writes only: a cluster of 100,000 partitions
        # answers every topic's in megabytes.
        self._wanted: set[str] = set()
        self.metadata = MetadataCache(bootstrap_addresses(bootstrap), self.links,
                                      topics=sorted(self._wanted),
                                      max_age_s=METADATA_MAX_AGE_S,
                                      request_timeout_s=REQUEST_TIMEOUT_S)
        self._counts_path = None if state_dir is None else state_dir / PARTITION_COUNTS_FILE
        self._counts: dict[str, int] = {}
        self._mappings_served = False
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
    async def mappings_served(self) -> bool:
        """Whether the cluster keeps stream mappings: its ApiVersions lists BMQ's APIs for
        them (Apache Kafka's does not). Asked again at each call until it does."""
        if not self._mappings_served:
            response = await ask_first(self.links, self.addresses(), ApiVersionsRequest(), 0,
                                       REQUEST_TIMEOUT_S)
            self._mappings_served = any(
                api.api_key == BmqDescribeDatabusStreamsRequest.API_KEY
                for api in response.api_keys)
        return self._mappings_served

    async def read_mappings(self, table: StreamTable) -> bool:
        """The cluster's stream mappings into ``table`` if they changed since its last read;
        False if the cluster keeps none (``mappings_served``)."""
        if not await self.mappings_served():
            return False
        response = await ask_first(self.links, self.addresses(), BmqDescribeDatabusStreamsRequest(
            known_version=table.version), 0, REQUEST_TIMEOUT_S)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(response.error_code))
        if response.version != table.version:
            mappings = {}
            for described in response.streams:
                try:
                    mappings[described.name] = from_wire(described)
                except MappingError as error:       # (one this agent cannot use)
                    log.warning("stream %s: mapping ignored: %s", described.name, error)
            table.replace(response.version, mappings)
        return True

    async def write_mapping(self, stream: str, mapping: StreamMapping | None) -> None:
        """Store ``stream``'s mapping (None: remove it) through any broker; KafkaError if it
        is refused, MappingsNotServed if the cluster keeps no mappings."""
        if not await self.mappings_served():
            raise MappingsNotServed(
                f"the cluster at {self.bootstrap} keeps no databus stream mappings (its "
                f"ApiVersions does not list BmqAlterDatabusStreams: not a BMQ cluster)")
        entry = (AlterableDatabusStream(name=stream, topic=None) if mapping is None
                 else AlterableDatabusStream(name=stream, **to_wire(mapping)))
        response = await ask_first(self.links, self.addresses(), BmqAlterDatabusStreamsRequest(
            streams=[entry]), 0, REQUEST_TIMEOUT_S)
        result = response.results[0]
        if result.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(result.error_code), result.error_message)

    def close(self) -> None:
        self.metadata.close()
        self.links.close()
