"""Views on the read path: a partition of a view (or a lane, or the trunk of a topic with lanes,
``bmq.metadata.views``) served from its source partition's view, keeping only the records its
filter matches, in batches that keep the source's offsets (``_viewfilter.c``).

Filtered batches are cached in the role's record cache beside the source's, under a key of
their own per view partition and filter: every consumer of a view reads the filtered bytes
of a stretch once filtered, and tailing consumers of a view read the source's new batches from
the cache like any consumer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import lru_cache

from bmq import metrics
from bmq.metadata.topics import TopicRegistry
from bmq.metadata.views import read_filter, served_topic
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.readpath.cache import RecordCache
from bmq.readpath.filters import CompiledFilter, apply_filter, compile_filter
from bmq.readpath.partition_view import PartitionView, batches_before
from bmq.storage.log import LogReader, PartitionLog
from bmq.storage.producer_state import AbortedTxn

# A miss reads this much of the source at least: a view at low selectivity makes little of it.
SOURCE_READ_BYTES = 4 << 20


@lru_cache(maxsize=1024)
def _compiled(expression: str) -> CompiledFilter:
    return compile_filter(expression)


class FilteredView:
    """One partition of a filtered topic, as fetches and ListOffsets see it: the source
    partition's offsets, watermarks, transactions and long poll, with filtered reads."""

    def __init__(self, name: str, source: PartitionView, expression: str,
                 cache: RecordCache) -> None:
        self.topic = name
        self.index = source.index
        self.source = source
        self.expression = expression
        self._filter = _compiled(expression)
        self._cache = cache
        self.key = (name, source.index, expression)
        cache.drop(self.key)             # anything cached under it came from an older source

    @property
    def reader(self) -> LogReader | PartitionLog:
        """The source's log: offsets and leader epochs are the source's."""
        return self.source.reader

    @property
    def high_watermark(self) -> int:
        return self.source.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.source.log_start_offset

    def last_stable_offset(self) -> int:
        return self.source.last_stable_offset()

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        return self.source.aborted_transactions(start, end)

    def new_data(self) -> asyncio.Future[None]:
        return self.source.new_data()

    async def list_offset(self, timestamp: int) -> tuple[int, int]:
        # The source's offset: a consumer starting there gets the next matching record.
        return await self.source.list_offset(timestamp)

    async def read(self, offset: int, max_bytes: int,
                   end: int | None = None) -> bytes | memoryview:
        """Like ``PartitionView.read``: whole filtered batches from ``offset``."""
        if end is not None:
            if offset >= end:
                return b""
            return batches_before(await self.read(offset, max_bytes), end)
        if offset < self.log_start_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} is before the log start offset "
                             f"{self.log_start_offset}")
        self._cache.drop_before(self.key, self.log_start_offset)
        rewrites = self._follow_rewrites()
        cached = self._cache.get(self.key, offset, max_bytes)
        if cached is not None:
            metrics.VIEW_CACHE_HITS.inc()
            return cached
        data = await self.source.read(offset, max(max_bytes, SOURCE_READ_BYTES))
        if not data:
            return b""
        metrics.VIEW_FILTERED_BYTES.inc(len(data))
        filtered = apply_filter(self._filter, data)
        self._follow_rewrites()
        if self._cache.put(self.key, filtered, rewrites) is None:
            return filtered     # the source's cleaner swapped segments meanwhile: not cached
        metrics.PROXY_CACHE_BYTES.set(self._cache.size_bytes)
        cached = self._cache.get(self.key, offset, max_bytes)
        return cached if cached is not None else filtered

    def _follow_rewrites(self) -> int:
        """The source log's cleaner swaps so far; the filtered batches cached before one may
        hold records it removed: forgotten."""
        return self._cache.follow(self.key, self.reader.rewrites)


class ViewResolver:
    """What a role's fetch source (``FetchServer``) adds for views: which topic's partitions
    serve a name, and the filtered views of its partitions."""

    def __init__(self, topics: TopicRegistry, cache: RecordCache) -> None:
        self._topics = topics
        self._cache = cache
        self._views: dict[tuple[str, int], FilteredView] = {}

    def source(self, name: str) -> str:
        return served_topic(self._topics, name)

    async def view(self, name: str, index: int,
                   open_source: Callable[[str, int], Awaitable[PartitionView]]
                   ) -> PartitionView | FilteredView:
        """``name``'s partition ``index``: the source's view itself, or filtered."""
        how = read_filter(self._topics, name)
        if how.source != name and self._topics.get(how.source) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"{name} is a view of {how.source}, which does not exist")
        source = await open_source(how.source, index)
        if how.expression is None:
            return source
        view = self._views.get((name, index))
        if view is None or view.source is not source or view.expression != how.expression:
            view = self._views[(name, index)] = FilteredView(name, source, how.expression,
                                                             self._cache)
        return view
