"""The read path inside every broker process (`bmq serve`, `bmq broker`): fetches sent to the
broker go through the same partition views, record cache and long poll as on a `bmq proxy`
(``bmq.readpath``), but the views read the broker's own logs (no second view of the files) and
wake on the broker's own flushes (no network notices)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

from bmq.config import Config
from bmq.metadata.topics import TopicInfo, TopicPartition, TopicRegistry
from bmq.readpath.cache import RecordCache
from bmq.readpath.partition_view import PartitionView
from bmq.readpath.views import FilteredView, ViewResolver
from bmq.writepath.partitions import Partition, PartitionManager

# How often a follower checks that its partition still exists when no data comes.
RECHECK_S = 5.0


class BrokerFetchViews:
    """The read path's source (``bmq.readpath.fetch.FetchServer``) over the broker's partitions.

    ``find_partition`` is the broker's lookup of a partition a client names: it raises the Kafka
    error to answer when this broker does not hold it."""

    def __init__(self, config: Config, topics: TopicRegistry, partitions: PartitionManager,
                 find_partition: Callable[[str, int], Awaitable[Partition]],
                 executor: Executor) -> None:
        self._topics = topics
        self._partitions = partitions
        self._find_partition = find_partition
        self._read_ahead_bytes = config.proxy_read_ahead_bytes
        self._executor = executor
        self.cache = RecordCache(config.proxy_cache_bytes)
        self._views: dict[TopicPartition, PartitionView] = {}
        self._followers: dict[TopicPartition, asyncio.Task[None]] = {}
        self.views = ViewResolver(topics, self.cache)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._topics.by_id(topic_id)

    def epoch(self, topic: str, index: int) -> int:
        partition = self._partitions.get(self.views.source(topic), index)
        return -1 if partition is None else partition.leader_epoch

    async def catch_up(self, view: PartitionView) -> bool:
        """Bring the view to its log's high watermark now. The view reads the broker's own log,
        but follows its flushes a step behind (``_follow``, and longer while it reads new data
        into the cache): a producer just acknowledged must find its records below the end
        offset a ListOffsets answers, as on Kafka's leader."""
        if view.high_watermark < view.reader.high_watermark:
            await view.apply(None)
        return True

    async def view(self, topic: str, index: int) -> PartitionView | FilteredView:
        """A partition as fetches see it (a view's, a lane's or a trunk's filtered)."""
        return await self.views.view(topic, index, self._source_view)

    async def _source_view(self, topic: str, index: int) -> PartitionView:
        partition = await self._find_partition(topic, index)
        key = (topic, index)
        view = self._views.get(key)
        if view is not None and view.reader is partition.log:
            return view
        if view is not None:            # the topic was deleted and made again meanwhile
            self._drop(key)
        view = self._views[key] = PartitionView(topic, index, partition.log, self.cache,
                                                self._executor, self._read_ahead_bytes)
        self._followers[key] = asyncio.get_running_loop().create_task(
            self._follow(partition, view))
        return view

    async def _follow(self, partition: Partition, view: PartitionView) -> None:
        """Apply every flush of the partition to its view, until the partition is closed."""
        while self._partitions.get(view.topic, view.index) is partition:
            new_data = partition.new_data()
            await asyncio.wait([new_data], timeout=RECHECK_S)
            if new_data.done():
                with contextlib.suppress(Exception):
                    await view.apply(None)
        if self._views.get(view.key) is view:
            del self._views[view.key]
            self._followers.pop(view.key, None)
        view.close()

    def _drop(self, key: TopicPartition) -> None:
        view = self._views.pop(key, None)
        follower = self._followers.pop(key, None)
        if follower is not None:
            follower.cancel()
        if view is not None:
            view.close()

    def stop(self) -> None:
        for key in list(self._views):
            self._drop(key)
