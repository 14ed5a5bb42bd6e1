"""How `bmq serve` opens the partitions it holds: the internal topics' before it serves (their
coordinators load from them), every other one after, in the background, and any a client asks
for meanwhile at once.

Why: opening a partition reads its checkpoint, state document and the tail of its last segment;
at ~0.3 ms each, a broker of 50,000 partitions took 25 s before it answered anyone. Now it serves
within a second or two of starting, and a partition nobody asks for costs nothing until the
loader reaches it.

In cluster mode the controller's assignments drive the opening instead
(``bmq.broker.membership.cluster``): this loader then has nothing to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

from bmq.broker.topic_config import log_config
from bmq.config import Config
from bmq.metadata.topics import TopicInfo, TopicRegistry
from bmq.metadata.views import is_view
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.writepath.partitions import PartitionManager

log = logging.getLogger(__name__)

OPENS_IN_FLIGHT = 256     # partitions opened together: enough to keep the workers busy


class PartitionLoader:
    """Opens a standalone broker's partitions. Every open holds ``admin_lock`` (the broker's
    lock of topic creation, deletion and alteration) and looks the topic up again under it, so
    an open never brings back a partition of a topic deleted meanwhile."""

    def __init__(self, config: Config, topics: TopicRegistry, partitions: PartitionManager,
                 admin_lock: asyncio.Lock) -> None:
        self._config = config
        self._topics = topics
        self._partitions = partitions
        self._admin_lock = admin_lock
        self._background: asyncio.Task[None] | None = None
        self._stopped = False

    async def open_internal(self) -> None:
        """Open the internal topics' partitions (``__*``) now: their coordinators load next.
        One that cannot be opened stops the start-up, as it would stop their coordinator."""
        await self._open_batches((t for t in self._topics.all() if t.name.startswith("__")),
                                 strict=True)

    def start(self) -> None:
        """Open every other partition in the background."""
        self._background = asyncio.get_running_loop().create_task(self._open_the_rest())

    async def stop(self) -> None:
        """Open nothing more: the broker is closing its partitions (a fetch woken meanwhile
        must not open one again, beside the instance being closed)."""
        self._stopped = True
        if self._background is not None:
            self._background.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._background

    async def open_now(self, topic: str, indexes: Iterable[int]) -> None:
        """Open partitions a client asked for (or a deletion needs) before the loader reached
        them. Raises the Kafka error of one that cannot be opened."""
        async with self._admin_lock:
            await self.open_locked(topic, indexes)

    async def open_locked(self, topic: str, indexes: Iterable[int]) -> None:
        """``open_now`` for a caller holding the admin lock."""
        info = self._topics.get(topic)
        if info is not None and not self._stopped:
            await self._open(info, [i for i in indexes if 0 <= i < info.partitions],
                             strict=True)

    async def _open_the_rest(self) -> None:
        topics = [t for t in self._topics.all() if not t.name.startswith("__")]
        await self._open_batches(topics, strict=False)
        log.info("opened the partitions of %d topics", len(topics))

    async def _open_batches(self, topics: Iterable[TopicInfo], strict: bool) -> None:
        """Topics together, some hundreds of partitions at a time: the worker threads stay
        busy across small topics, and the opens in flight stay few."""
        batch: list[TopicInfo] = []
        in_batch = 0
        for topic in topics:
            batch.append(topic)
            in_batch += topic.partitions
            if in_batch >= OPENS_IN_FLIGHT:
                await self._open_batch(batch, strict)
                batch, in_batch = [], 0
        await self._open_batch(batch, strict)

    async def _open_batch(self, batch: list[TopicInfo], strict: bool) -> None:
        async with self._admin_lock:
            current = [self._topics.get(t.name) for t in batch]
            await asyncio.gather(*(self._open(info, range(info.partitions), strict)
                                   for info in current if info is not None))

    async def _open(self, info: TopicInfo, indexes: Iterable[int], strict: bool) -> None:
        """Open ``indexes`` of ``info`` (those not open yet). A partition that cannot be opened
        is logged and left closed, the others are served; ``strict``: its error is raised, as
        Kafka's KAFKA_STORAGE_ERROR for a storage failure."""
        if is_view(info.configs):
            return      # a view has no partitions of its own
        config = log_config(self._config, info.configs)
        indexes = [i for i in indexes if self._partitions.get(info.name, i) is None]
        opened = await asyncio.gather(
            *(self._partitions.open(info.name, i, config) for i in indexes),
            return_exceptions=True)
        for index, result in zip(indexes, opened, strict=True):
            if not isinstance(result, BaseException):
                continue
            if strict and isinstance(result, OSError):
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                                 f"could not open {info.name}/{index}: {result}") from result
            if strict:
                raise result
            log.error("could not open %s/%d (it is opened again when asked for): %s",
                      info.name, index, result)
