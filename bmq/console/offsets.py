"""Partitions' earliest and latest offsets, asked with BMQ's own Kafka client (``bmq.client``):
one ListOffsets request per partition owner for all its partitions. confluent-kafka's
``AdminClient.list_offsets`` took ~12 s for 10,000 partitions of a `bmq serve` (a future and a
callback per partition, bench/console.py); one request per owner is bounded by the owner's own
work. The client's links live on an event loop of its own, in a thread, so the console's worker
threads can ask it as they ask AdminClient; ``ask`` sends other requests AdminClient has no
call for (share groups, transactions) on the same links."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from bmq.client.login import login
from bmq.client.requests import Address, ask_each
from bmq.net.client import LinkPool
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ListOffsetsRequest
from bmq.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic

# Kafka's special timestamps of ListOffsets.
TIMESTAMPS = {"earliest": -2, "latest": -1}
# Version 7 (Kafka 3.0): every Kafka-compatible broker of the last years speaks it.
LIST_OFFSETS_VERSION = 7
CLIENT_ID = "bmq-console"

Partition = tuple[str, int]


class OffsetReader:
    def __init__(self, properties: Mapping[str, str], timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._links = LinkPool(CLIENT_ID, login(dict(properties)))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="bmq-console-offsets")
        self._thread.start()

    def offsets(self, owners: Mapping[Partition, Address | None], *which: str | int
                ) -> list[dict[Partition, int]]:
        """For each of ``which`` ("earliest", "latest" or a time in ms: the first offset whose
        timestamp is at or after it), each partition's offset, asked of its owner
        (``owners``) all at once; -1 where it has no owner, the owner did not answer or
        answered an error, and for a time after every record."""
        async def ask_all() -> list[dict[Partition, int]]:
            return list(await asyncio.gather(*(
                self._ask(owners, kind if isinstance(kind, int) else TIMESTAMPS[kind])
                for kind in which)))

        future = asyncio.run_coroutine_threadsafe(ask_all(), self._loop)
        return future.result(self._timeout_s + 1)

    def ask_each(self, requests: Sequence[tuple[Address, Any]], version: int) -> list[Any]:
        """Requests a page sends brokers besides ListOffsets, all at once on these links (each
        to its broker): the answers in order, None for a broker that did not answer in time
        or closed the link."""
        async def ask_all() -> list[Any]:
            try:
                return await asyncio.wait_for(ask_each(self._links, requests, version),
                                              self._timeout_s)
            except TimeoutError:
                return [None] * len(requests)

        return asyncio.run_coroutine_threadsafe(ask_all(), self._loop).result(
            self._timeout_s + 1)

    async def _ask(self, owners: Mapping[Partition, Address | None], timestamp: int
                   ) -> dict[Partition, int]:
        found = dict.fromkeys(owners, -1)
        by_owner: dict[Address, dict[str, list[ListOffsetsPartition]]] = defaultdict(
            lambda: defaultdict(list))
        for (topic, partition), address in owners.items():
            if address is not None:
                by_owner[address][topic].append(
                    ListOffsetsPartition(partition_index=partition, timestamp=timestamp))
        requests = [(address, ListOffsetsRequest(replica_id=-1, topics=[
                        ListOffsetsTopic(name=name, partitions=parts)
                        for name, parts in topics.items()]))
                    for address, topics in by_owner.items()]
        try:
            answers = await asyncio.wait_for(
                ask_each(self._links, requests, LIST_OFFSETS_VERSION), self._timeout_s)
        except TimeoutError:
            return found
        for answer in answers:
            for topic in answer.topics if answer is not None else []:
                for part in topic.partitions:
                    if part.error_code == ErrorCode.NONE:
                        found[(topic.name, part.partition_index)] = part.offset
        return found

    def close(self) -> None:
        async def shut() -> None:     # the links' readers end with their loop, not after it
            self._links.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
