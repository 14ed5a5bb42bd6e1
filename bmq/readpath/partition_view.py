"""One partition as a proxy serves it: a read-only view of its log on shared storage, the
shared record cache in front of it, and the fetches waiting for its next durable data.

* Reads: the cache first; a miss reads ``read_ahead_bytes`` from storage (on a worker thread)
  into the cache, so a catch-up consumer makes one large sequential read per few fetches.
* Freshness: the owning broker's notice (``BmqWatchPartitions``) carries the new high watermark
  and the storage tail; ``apply`` extends the view with it, reads the new bytes into the cache
  at once if consumers read this partition lately (so tailing consumers always hit the cache),
  then wakes the waiting fetches. Nothing here polls storage.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Executor

from bmq import metrics
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import iter_batches
from bmq.readpath.cache import RecordCache
from bmq.storage.log import LogReader, PartitionLog
from bmq.storage.offsets import list_offset
from bmq.storage.producer_state import AbortedTxn

# A partition fetched within this many seconds gets its new data read into the cache eagerly.
INTEREST_S = 30.0


def batches_before(data: bytes | memoryview, end: int) -> bytes | memoryview:
    """The whole batches of ``data`` that begin before offset ``end``."""
    for pos, header in iter_batches(data):
        if header.base_offset >= end:
            return data[:pos]
    return data


def next_offset_of(data: bytes | memoryview) -> int:
    """The offset after the last whole batch of ``data`` (-1 if none)."""
    last = -1
    for _, header in iter_batches(data):
        last = header.next_offset
    return last


class PartitionView:
    def __init__(self, topic: str, index: int, reader: LogReader | PartitionLog,
                 cache: RecordCache, executor: Executor, read_ahead_bytes: int) -> None:
        self.topic = topic
        self.index = index
        self.key = (topic, index)
        self.reader = reader
        self._cache = cache
        self._executor = executor
        self._read_ahead = read_ahead_bytes
        self._waiter: asyncio.Future[None] | None = None
        self.last_fetch = 0.0             # monotonic time of the last fetch (interest)
        self.closed = False
        # What fetches see: moves only once new data is in the cache (see apply), so fetches
        # arriving meanwhile do not all miss and read the same bytes from storage.
        self.high_watermark = reader.high_watermark

    @property
    def source(self) -> PartitionView:
        """The partition view itself (a view's or lane's ``FilteredView`` names its source)."""
        return self

    @property
    def log_start_offset(self) -> int:
        return self.reader.log_start_offset

    def interested(self) -> bool:
        return time.monotonic() - self.last_fetch < INTEREST_S

    # ------------------------------------------------------------------ reads
    def last_stable_offset(self) -> int:
        """The LSO as fetches see it (never past what the view serves)."""
        return min(self.reader.last_stable_offset(), self.high_watermark)

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        return self.reader.aborted_transactions(start, end)

    async def read(self, offset: int, max_bytes: int,
                   end: int | None = None) -> bytes | memoryview:
        """Whole batches from ``offset`` (at least one), durable data only; with ``end`` (the
        LSO, for read_committed) none at or past ``end``."""
        self.last_fetch = time.monotonic()
        # Out of range only past what this view has served, too: its reader can fall back to
        # an older state document than its high watermark came from, and a consumer told
        # OFFSET_OUT_OF_RANGE for its next offset resets by its policy (librdkafka: to the
        # earliest offset). Kafka's leader answers it only past its log end.
        last = max(self.reader.log_end_offset, self.high_watermark)
        if offset < self.log_start_offset or offset > last:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} not in [{self.log_start_offset}, {last}]")
        if end is not None:
            if offset >= end:
                return b""
            return batches_before(await self.read(offset, max_bytes), end)
        if offset >= self.high_watermark:
            # Nothing new; or new data on its way into the cache; or (the writer's own log,
            # acks=1) appended but not yet durable, which Kafka answers with no data either.
            return b""
        rewrites = self._follow_rewrites()
        data = self._cache.get(self.key, offset, max_bytes)
        if data is not None:
            metrics.PROXY_CACHE_HITS.inc()
            return data
        metrics.PROXY_CACHE_MISSES.inc()
        loop = asyncio.get_running_loop()
        try:
            read = await loop.run_in_executor(self._executor, self.reader.read, offset,
                                              max(max_bytes, self._read_ahead))
        except KafkaError as error:
            if error.code != ErrorCode.OFFSET_OUT_OF_RANGE or offset < self.log_start_offset:
                raise
            return b""      # below what this view served, past its reader for now: no data yet
        if self._cache_read(read, rewrites) is not None:
            cached = self._cache.get(self.key, offset, max_bytes)
            if cached is not None:
                return cached
        # Not cacheable (larger than the whole cache, or read while the cleaner swapped
        # segments): read just what was asked.
        return await loop.run_in_executor(self._executor, self.reader.read, offset, max_bytes)

    def _follow_rewrites(self) -> int:
        """The log's cleaner swaps so far; the cache forgets what it held before one."""
        return self._cache.follow(self.key, self.reader.rewrites)

    def _cache_read(self, data: bytes | memoryview, rewrites: int) -> int | None:
        """Cache what a read returned unless the cleaner swapped segments since ``rewrites``
        (``RecordCache.put``); the cache's end after it, or None."""
        self._follow_rewrites()
        end = self._cache.put(self.key, data, rewrites)
        metrics.PROXY_CACHE_BYTES.set(self._cache.size_bytes)
        return end

    def end_offset_for_epoch(self, epoch: int, current_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch from this view: the reader's epoch history, where the last
        epoch ends no earlier than what the view has served. Its reader can be behind the view
        (a state document older than the owner's notices; a reader that has not read the
        partition's segments yet answers "ends at 0"), and an end offset below a consumer's
        position is, to librdkafka, a truncated log: it seeks back to that offset silently (seen
        in the fault runs as a consumer reading a partition again from 0). Kafka's leader
        answers from its own log, never behind what it served."""
        answered, end = self.reader.end_offset_for_epoch(epoch, current_epoch)
        if answered >= 0 and end >= self.reader.high_watermark:
            end = max(end, self.high_watermark)
        return answered, end

    async def list_offset(self, timestamp: int) -> tuple[int, int]:
        self.last_fetch = time.monotonic()
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, list_offset, self.reader, timestamp)

    # ------------------------------------------------------------------ freshness
    def new_data(self) -> asyncio.Future[None]:
        """A future done at the next advance of the high watermark (shared by all fetchers)."""
        if self._waiter is None or self._waiter.done():
            self._waiter = asyncio.get_running_loop().create_future()
        return self._waiter

    async def apply(self, tail: bytes | None) -> None:
        """The owner made more data durable: extend the view (a ``LogReader``; the writer's
        own log, in `bmq serve`, is always current), fill the cache, wake fetchers."""
        before = self.high_watermark
        loop = asyncio.get_running_loop()
        reader = self.reader
        if isinstance(reader, LogReader):
            await loop.run_in_executor(self._executor, reader.advance, tail)
        if self.reader.high_watermark > before and self.interested():
            await self._fill(max(before, self._cache.end(self.key)))
        self.high_watermark = max(self.high_watermark, self.reader.high_watermark)
        self._cache.drop_before(self.key, self.log_start_offset)
        self.wake()

    async def _fill(self, start: int) -> None:
        """Read [start, high watermark) into the cache: what tailing consumers fetch next."""
        loop = asyncio.get_running_loop()
        offset = start
        rewrites = self._follow_rewrites()
        while self.log_start_offset <= offset < self.reader.high_watermark:
            data = await loop.run_in_executor(self._executor, self.reader.read, offset,
                                              self._read_ahead)
            next_offset = self._cache_read(data, rewrites)
            if next_offset is None or next_offset <= offset:
                break
            offset = next_offset

    def wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def close(self) -> None:
        self.closed = True
        self.wake()
        self._cache.drop(self.key)
        if isinstance(self.reader, LogReader):   # the writer's log belongs to the broker
            self.reader.close()
