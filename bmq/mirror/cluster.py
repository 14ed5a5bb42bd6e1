"""One side of a mirror (the source or the target cluster), as a Kafka client sees it: links to
its brokers (secured as its librdkafka-style properties say), its metadata, and the requests
the mirror sends that need no routing by partition."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from bmq.client.login import login
from bmq.client.metadata import MetadataCache, bootstrap_addresses
from bmq.client.requests import Address
from bmq.net.client import LinkError, LinkPool
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import FindCoordinatorRequest, ListOffsetsRequest
from bmq.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic

REQUEST_TIMEOUT_S = 30.0
FIND_COORDINATOR_VERSION = 4
GROUP_KEY = 0
COORDINATOR_MOVED = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
LIST_OFFSETS_VERSION = 7
LATEST, EARLIEST = -1, -2


class Cluster:
    def __init__(self, bootstrap: str, properties: dict[str, str], client_id: str) -> None:
        self.bootstrap = bootstrap
        self.links = LinkPool(client_id, login(properties))
        self.metadata = MetadataCache(bootstrap_addresses(bootstrap), self.links,
                                      request_timeout_s=REQUEST_TIMEOUT_S)
        self._coordinators: dict[str, Address] = {}     # group -> its coordinator

    async def ask(self, address: Address, request: Any, version: int,
                  timeout: float = REQUEST_TIMEOUT_S) -> Any:
        """One request to one broker: its decoded response; LinkError or TimeoutError."""
        return await asyncio.wait_for(self.links.get(*address).request(request, version),
                                      timeout)

    async def ask_any(self, request: Any, version: int) -> Any:
        """A request any broker answers (admin requests: each forwards or answers them)."""
        await self.metadata.fresh()
        addresses = [*self.metadata.brokers.values(), *self.metadata.bootstrap]
        failures = []
        for address in dict.fromkeys(addresses):
            try:
                return await self.ask(address, request, version)
            except (LinkError, OSError, TimeoutError) as error:
                failures.append(f"{address[0]}:{address[1]}: {error or 'timed out'}")
        raise LinkError(f"no broker of {self.bootstrap} answered ({'; '.join(failures)})")

    async def ask_coordinator(self, group: str, request: Any, version: int,
                              timeout: float = REQUEST_TIMEOUT_S) -> Any:
        """A request to ``group``'s coordinator: found once, and again after a request to it
        failed or it said it is not the coordinator any more (``coordinator_moved``)."""
        address = self._coordinators.get(group)
        if address is None:
            address = self._coordinators[group] = await self._find_coordinator(group)
        try:
            return await self.ask(address, request, version, timeout)
        except (LinkError, OSError, TimeoutError):
            self._coordinators.pop(group, None)
            raise

    def coordinator_moved(self, group: str, code: int) -> None:
        """A coordinator's answer: after NOT_COORDINATOR and the like it is looked up again."""
        if code in COORDINATOR_MOVED:
            self._coordinators.pop(group, None)

    async def _find_coordinator(self, group: str) -> Address:
        response = await self.ask_any(FindCoordinatorRequest(
            key_type=GROUP_KEY, coordinator_keys=[group]), FIND_COORDINATOR_VERSION)
        found = response.coordinators[0]
        if found.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(found.error_code), found.error_message)
        return found.host, found.port

    async def end_offsets(self, partitions: Iterable[tuple[str, int]], at: int = LATEST
                          ) -> dict[tuple[str, int], int | ErrorCode]:
        """Each partition's log end offset (its high watermark; with ``at=EARLIEST`` its log
        start offset), or the error its leader answered; partitions whose leader is unknown or
        unreachable are left out."""
        by_leader: dict[Address, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for topic, index in partitions:
            address = self.leader(topic, index)
            if address is not None:
                by_leader[address][topic].append(index)
        ends: dict[tuple[str, int], int | ErrorCode] = {}
        for address, topics in by_leader.items():
            try:
                response = await self.ask(address, ListOffsetsRequest(replica_id=-1, topics=[
                    ListOffsetsTopic(name=topic, partitions=[
                        ListOffsetsPartition(partition_index=index, timestamp=at)
                        for index in indexes]) for topic, indexes in topics.items()]),
                    LIST_OFFSETS_VERSION)
            except (LinkError, OSError, TimeoutError):
                continue
            for topic_answer in response.topics:
                for answer in topic_answer.partitions:
                    ends[(topic_answer.name, answer.partition_index)] = (
                        answer.offset if answer.error_code == ErrorCode.NONE
                        else ErrorCode(answer.error_code))
        return ends

    def leader(self, topic: str, index: int) -> Address | None:
        """The address of the partition's leader, as last known (None: not known now)."""
        return self.metadata.owner(topic, index)

    def close(self) -> None:
        self.metadata.close()
        self.links.close()
