"""Snapshots: how a coordinator keeps its internal log about as small as its live state
(``Compaction.SNAPSHOTS`` in ``bmq.metadata.topics``), instead of the log cleaner.

A shard keeps the live state of its partition in memory anyway. Once a segment's worth of
records (the partition's ``segment.bytes``) has been appended since the last snapshot, it
appends all of its live state again, back to back, and then deletes the records before the
snapshot (``delete_records``): whole old segments go away and a replay starts at the snapshot.
Keys deleted by tombstones are simply not in it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Generic, TypeVar

from bmq.protocol.errors import KafkaError
from bmq.writepath.partitions import Partition

log = logging.getLogger(__name__)

LiveT = TypeVar("LiveT")


class Snapshots(Generic[LiveT]):
    """The snapshots of one shard: ``live`` lists what a snapshot holds, ``append`` appends
    one batch of it now (returning its durability; raises KafkaError)."""

    def __init__(self, name: str, partition: Partition, executor: Executor,
                 live: Callable[[], list[LiveT]],
                 append: Callable[[list[LiveT]], asyncio.Future[None]],
                 batch_size: int) -> None:
        self._name = name
        self._partition = partition
        self._executor = executor
        self._live = live
        self._append = append
        self._batch_size = batch_size
        self._appended = 0      # bytes since the last snapshot
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def appended(self, size: int) -> None:
        """``size`` bytes of records were appended (not a snapshot's)."""
        self._appended += size

    def start_if_due(self) -> None:
        """Start a snapshot if a segment's worth was appended since the last one."""
        if self._appended >= self._partition.log.config.segment_bytes and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.snapshot())

    def cancel(self) -> None:
        """The shard is closing: a snapshot under way stops (the next owner makes its own)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def snapshot(self) -> None:
        """Append a snapshot of everything live, then drop everything before it."""
        try:
            log_ = self._partition.log
            start = log_.log_end_offset
            live = self._live()
            # All appends happen now, back to back: the snapshot is contiguous in the log.
            waits = [self._append(live[i : i + self._batch_size])
                     for i in range(0, len(live), self._batch_size)]
            if not waits and start > 0:
                waits.append(self._partition.durable(start - 1))
            self._appended = 0
            for wait in waits:
                await asyncio.shield(wait)
            loop = asyncio.get_running_loop()
            new_start = await loop.run_in_executor(self._executor, log_.delete_records, start)
            log.info("snapshot of %s: %d live entries, log starts at %d", self._name, len(live),
                     new_start)
        except KafkaError as error:
            log.warning("snapshot of %s failed: %s", self._name, error)
        finally:
            self._task = None
