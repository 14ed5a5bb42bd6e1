"""The batches themselves: fetched from the source's partition leaders (read_uncommitted, so
transactional batches and their markers come along) and handed, as they are, to the target
partitions' owners (BmqMirrorAppend), which append them at the same offsets.

Progress needs no log of its own: a target partition's log end offset is where its mirroring
goes on from. At start (and for each new partition) it is read from the target; each append
is answered with it, once durable; an append that starts before it is refused with it, and
the mirror fetches from there. A kill -9 of the mirror thus loses nothing and writes nothing
twice. Rounds overlap: the next fetch (from the end of the batches being appended) is under
way while the target appends; its batches are handed over only if that append ended where
the fetch started. Offsets a compacted source no longer has are gaps on the target too.

The target's log start follows the source's (DeleteRecords, retention): each append carries
the source's log start, and so does an append of no batches when only that moved. A source
whose log starts past the target's end (it deleted what the target lacks) is fetched from its
log start on, and the target starts over there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from bmq import metrics
from bmq.client.requests import Address
from bmq.mirror.cluster import EARLIEST, Cluster
from bmq.net.client import LinkError
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    BmqMirrorAppendRequest,
    BmqMirrorAppendResponse,
    FetchRequest,
    FetchResponse,
)
from bmq.protocol.messages.bmq_mirror_append_request import MirrorPartition, MirrorTopic
from bmq.protocol.messages.fetch_request import FetchPartition, FetchTopic
from bmq.protocol.records import iter_batches

log = logging.getLogger(__name__)

FETCH_VERSION = 12              # topic names (v13 has ids only); Kafka 2.7 and later
APPEND_VERSION = 0
FETCH_MAX_WAIT_MS = 500
APPEND_TIMEOUT_MS = 30_000
BACKOFF_FIRST_S = 0.1           # an unreachable cluster is asked again after this long,
BACKOFF_MAX_S = 5.0             # twice as long each time up to this
RETRY_S = 1.0                   # a partition that failed is fetched again after this long
# Errors after which the cluster's metadata is looked at again (the partition moved).
MOVED = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
         ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH}

Key = tuple[str, int]


@dataclass
class PartitionProgress:
    """One mirrored partition: how far the target has it and what the source has."""

    topic: str
    index: int
    mirrored_to: int = -1       # the target's log end offset (-1: not read yet)
    target_start: int = -1      # the target's log start offset, as its last append answered
    source_start: int = -1      # the source's log start offset, as its last fetch answered
    fetch_from: int = -1        # where the next fetch starts (past batches being appended)
    source_end: int = -1        # the source's high watermark, as its last fetch answered
    oldest_unmirrored_ms: int = -1   # timestamp of the first batch fetched and not yet there
    error: str = ""             # why it does not move now ("" if nothing is wrong)
    retry_at: float = 0.0       # (monotonic time) not fetched before, after a failure

    @property
    def lag_records(self) -> int:
        return max(0, self.source_end - self.mirrored_to) if self.mirrored_to >= 0 else -1

    def lag_seconds(self, now_ms: int) -> float:
        if self.lag_records == 0 or self.oldest_unmirrored_ms < 0:
            return 0.0
        return max(0.0, (now_ms - self.oldest_unmirrored_ms) / 1000)

    def continued_by(self, start: int) -> bool:
        """Whether batches fetched from ``start`` go next on the target: they start at its
        end, or at the source's log start past its end (the target starts over there)."""
        return start == self.mirrored_to or start == self.source_start > self.mirrored_to

    def failed(self, error: str) -> None:
        """Nothing of what was fetched is appended: fetch again from the target's end."""
        if error != self.error and error:
            log.warning("mirroring %s-%d: %s", self.topic, self.index, error)
        self.error = error
        self.fetch_from = self.mirrored_to
        if error:
            self.retry_at = time.monotonic() + RETRY_S


@dataclass
class Fetched:
    """Whole batches a fetch from ``start`` found for one partition, up to ``end`` (none: only
    the source's log start moved)."""

    progress: PartitionProgress
    start: int
    end: int
    records: memoryview


class Copier:
    def __init__(self, name: str, source: Cluster, target: Cluster, fetch_max_bytes: int,
                 partition_max_bytes: int) -> None:
        """``fetch_max_bytes``: of a fetch from one source broker, and so of an append to
        one target broker (less than the target's socket.request.max.bytes);
        ``partition_max_bytes``: of one partition in a fetch."""
        self.name = name
        self.fetch_max_bytes = fetch_max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.source = source
        self.target = target
        self.partitions: dict[Key, PartitionProgress] = {}
        self.source_up = True
        self._backoff = 0.0

    def assign(self, wanted: set[Key]) -> None:
        """Mirror exactly these partitions."""
        for key in set(self.partitions) - wanted:
            del self.partitions[key]
            metrics.forget_mirror_partition(*key)
        for key in sorted(wanted - set(self.partitions)):
            self.partitions[key] = PartitionProgress(*key)

    async def run(self) -> None:
        """Copy until cancelled; never fails (errors are each partition's ``error``)."""
        appending: asyncio.Task[None] | None = None
        try:
            while True:
                await self._read_target_ends()
                fetched = await self._fetch_round()
                if appending is not None:
                    await appending
                ready = []
                for found in fetched:
                    if found.progress.continued_by(found.start) and \
                            self._assigned(found.progress):
                        ready.append(found)
                    else:   # fetched past an append that failed: again from the target's end
                        found.progress.fetch_from = found.progress.mirrored_to
                appending = asyncio.get_running_loop().create_task(self._append_round(ready))
                if self._backoff:
                    await asyncio.sleep(self._backoff)
        finally:
            if appending is not None:
                appending.cancel()

    async def _read_target_ends(self) -> None:
        """Where the partitions not started yet go on from: the target's log end offsets."""
        new = [p for p in self.partitions.values() if p.mirrored_to < 0]
        if not new:
            return
        ends = await self.target.end_offsets((p.topic, p.index) for p in new)
        for progress in new:
            end = ends.get((progress.topic, progress.index))
            if isinstance(end, ErrorCode):
                self._moved(self.target, progress, end)
            elif end is not None:
                progress.mirrored_to = progress.fetch_from = end
                progress.error = ""
                log.info("mirroring %s-%d from offset %d", progress.topic, progress.index, end)

    async def _fetch_round(self) -> list[Fetched]:
        """One Fetch to each source leader, at once; the whole batches each partition got."""
        now = time.monotonic()
        started = [p for p in self.partitions.values()
                   if p.fetch_from >= 0 and p.retry_at <= now]
        by_leader = self._by_leader(self.source, started)
        if not by_leader:
            await asyncio.sleep(FETCH_MAX_WAIT_MS / 1000)
            return []
        answers = await asyncio.gather(*(self._fetch(address, group)
                                         for address, group in by_leader.items()))
        reached = any(answer is not None for answer in answers)
        self._set_source_up(reached)
        return [found for answer in answers if answer for found in answer]

    async def _fetch(self, address: Address, group: list[PartitionProgress]
                     ) -> list[Fetched] | None:
        request = FetchRequest(
            replica_id=-1, max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=1,
            max_bytes=self.fetch_max_bytes, isolation_level=0, session_epoch=-1,
            topics=[FetchTopic(topic=topic, partitions=[
                FetchPartition(partition=p.index, fetch_offset=p.fetch_from,
                               partition_max_bytes=self.partition_max_bytes) for p in parts])
                for topic, parts in _by_topic(group).items()])
        try:
            response: FetchResponse = await self.source.ask(
                address, request, FETCH_VERSION, timeout=FETCH_MAX_WAIT_MS / 1000 + 30)
        except (LinkError, OSError, TimeoutError) as error:
            for progress in group:
                progress.failed(f"source unreachable: {error or 'timed out'}")
                self.source.metadata.moved(progress.topic, progress.index)
            return None
        found = []
        out_of_range = []
        for topic in response.responses:
            for data in topic.partitions:
                asked = self.partitions.get((topic.topic, data.partition_index))
                if asked is None:
                    continue
                if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    out_of_range.append(asked)
                    continue
                if data.error_code != ErrorCode.NONE:
                    self._moved(self.source, asked, data.error_code)
                    continue
                asked.source_end = data.high_watermark
                if data.log_start_offset >= 0:
                    asked.source_start = data.log_start_offset
                batches = _whole_batches(asked, data.records)
                if batches is not None:
                    found.append(batches)
                    asked.fetch_from = batches.end
                elif _log_start_moved(asked):
                    found.append(Fetched(asked, asked.fetch_from, asked.fetch_from,
                                         memoryview(b"")))
        if out_of_range:
            await self._out_of_range(out_of_range)
        return found

    async def _out_of_range(self, partitions: list[PartitionProgress]) -> None:
        """Partitions fetched from an offset the source does not have: past its log end (it
        lost data, or the target has another log), or below its log start (deleted since):
        then the next fetch starts there, and so does the target. (Kafka's fetch answers no
        log start with the error: ListOffsets asks it, as Kafka's consumers do.)"""
        starts = await self.source.end_offsets(((p.topic, p.index) for p in partitions),
                                               EARLIEST)
        for progress in partitions:
            start = starts.get((progress.topic, progress.index))
            if start is None:
                self._moved(self.source, progress, ErrorCode.OFFSET_OUT_OF_RANGE,
                            f"offset {progress.fetch_from} is out of the source's range, "
                            f"whose log start could not be read")
            elif isinstance(start, ErrorCode):
                self._moved(self.source, progress, start)
            elif start > progress.fetch_from:
                log.info("mirroring %s-%d: the source's log starts at %d, past %d: the "
                         "target starts over there", progress.topic, progress.index, start,
                         progress.fetch_from)
                progress.source_start = progress.fetch_from = start
            else:
                self._moved(self.source, progress, ErrorCode.OFFSET_OUT_OF_RANGE,
                            f"offset {progress.fetch_from} is past the source's log end")

    async def _append_round(self, ready: list[Fetched]) -> None:
        by_leader: dict[Address, list[Fetched]] = defaultdict(list)
        for found in ready:
            address = self.target.leader(found.progress.topic, found.progress.index)
            if address is None:
                found.progress.failed("the target names no leader for it now")
            else:
                by_leader[address].append(found)
        await asyncio.gather(*(self._append(address, group)
                               for address, group in by_leader.items()))

    async def _append(self, address: Address, group: list[Fetched]) -> None:
        topics: dict[str, list[MirrorPartition]] = defaultdict(list)
        for found in group:
            topics[found.progress.topic].append(MirrorPartition(
                partition_index=found.progress.index, records=found.records or None,
                log_start_offset=found.progress.source_start))
        request = BmqMirrorAppendRequest(
            source=self.name, timeout_ms=APPEND_TIMEOUT_MS,
            topics=[MirrorTopic(name=name, partitions=parts) for name, parts in topics.items()])
        try:
            response: BmqMirrorAppendResponse = await self.target.ask(
                address, request, APPEND_VERSION, timeout=APPEND_TIMEOUT_MS / 1000 + 5)
        except (LinkError, OSError, TimeoutError) as error:
            for found in group:
                found.progress.failed(f"target unreachable: {error or 'timed out'}")
                self.target.metadata.moved(found.progress.topic, found.progress.index)
            return
        sent = {(found.progress.topic, found.progress.index): found for found in group}
        for topic in response.topics:
            for answer in topic.partitions:
                appended = sent.get((topic.name, answer.partition_index))
                if appended is not None:
                    self._appended(appended, answer.error_code, answer.error_message or "",
                                   answer.log_start_offset, answer.log_end_offset)

    def _appended(self, found: Fetched, code: int, message: str, log_start: int,
                  log_end: int) -> None:
        progress = found.progress
        if log_end >= 0:
            progress.mirrored_to = log_end
            progress.target_start = log_start
        if code == ErrorCode.NONE:
            progress.error = ""
            if found.records:
                progress.oldest_unmirrored_ms = -1
                metrics.count_mirrored(progress.topic, progress.index, found.records)
        elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
            log.info("mirroring %s-%d: the target ends at %d, going on from there",
                     progress.topic, progress.index, log_end)
            progress.failed("")
        else:
            self._moved(self.target, progress, code, f"the target refused: "
                        f"{ErrorCode(code).name} {message}")

    def _moved(self, cluster: Cluster, progress: PartitionProgress, code: int,
               why: str = "") -> None:
        if code in MOVED:
            cluster.metadata.moved(progress.topic, progress.index)
        progress.failed(why or ErrorCode(code).name)
        metrics.MIRROR_ERRORS.labels(ErrorCode(code).name).inc()

    def _assigned(self, progress: PartitionProgress) -> bool:
        return self.partitions.get((progress.topic, progress.index)) is progress

    def _by_leader(self, cluster: Cluster, partitions: Iterable[PartitionProgress]
                   ) -> dict[Address, list[PartitionProgress]]:
        grouped: dict[Address, list[PartitionProgress]] = defaultdict(list)
        for progress in partitions:
            address = cluster.leader(progress.topic, progress.index)
            if address is not None:
                grouped[address].append(progress)
        return grouped

    def _set_source_up(self, reached: bool) -> None:
        if reached != self.source_up:
            log.warning("source %s %s", self.source.bootstrap,
                        "answers again" if reached else "unreachable: retrying with back-off")
        self.source_up = reached
        metrics.MIRROR_SOURCE_UP.set(1 if reached else 0)
        self._backoff = 0.0 if reached else min(BACKOFF_MAX_S,
                                                max(BACKOFF_FIRST_S, self._backoff * 2))

    def report(self) -> None:
        """The per-partition gauges (lag in records and seconds, failing or not)."""
        now = int(time.time() * 1000)
        for progress in self.partitions.values():
            metrics.set_mirror_partition(progress.topic, progress.index, progress.lag_records,
                                         progress.lag_seconds(now), bool(progress.error))


def _by_topic(partitions: Iterable[PartitionProgress]) -> dict[str, list[PartitionProgress]]:
    grouped: dict[str, list[PartitionProgress]] = defaultdict(list)
    for progress in partitions:
        grouped[progress.topic].append(progress)
    return grouped


def _log_start_moved(progress: PartitionProgress) -> bool:
    """Whether the target's log start must follow the source's with no batches: the target
    holds the new start (a DeleteRecords on the source), or the source holds nothing from it
    on (the target starts over there; if the source had a batch holding it, the target would
    start at that batch instead)."""
    start = progress.source_start
    return start > progress.target_start and (start <= progress.mirrored_to
                                              or start >= progress.source_end)


def _whole_batches(progress: PartitionProgress, records: object) -> Fetched | None:
    """The whole batches of a fetch answer from ``progress.fetch_from`` on (a source may answer
    a batch that began before it, and cut the last one short; offsets between them that a
    compacted source no longer has stay gaps): None if there are none."""
    if not isinstance(records, (bytes, bytearray, memoryview)) or not records:
        return None
    view = memoryview(records)
    start = progress.fetch_from
    first = end = -1
    last_offset = start
    for position, header in iter_batches(view):
        if header.next_offset <= start:
            continue
        if first < 0:
            first = position
            progress.oldest_unmirrored_ms = header.base_timestamp
        end = position + header.size
        last_offset = header.next_offset
    if first < 0:
        return None
    return Fetched(progress, start, last_offset, view[first:end])
