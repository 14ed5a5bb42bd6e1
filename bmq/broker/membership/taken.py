"""Partitions a cluster broker took but has not opened yet: moving a partition is a change of
metadata, and its storage is claimed when it is first used.

Why: taking a partition over on storage (a claim, the previous owner's tail recovered, a new
segment and a checkpoint: six syncs and a dozen file operations, 2-3 ms of CPU on the benchmark
machine) made a killed broker's 10,000 partitions writable elsewhere only after 15-20 s, one
after the other, whether anyone wrote to them or not. Now the new owner reports them writable
as soon as the controller assigns them, opens any a request needs at once (``open``), and the
others in the background, a few at a time (retention and compaction run on open partitions).

Safe because the fence is the claim (``bmq.storage.log.append_layout``): whatever the previous
owner acknowledged before the claim is recovered by it, whenever it comes, and the new owner
writes nothing before it. (A previous owner cut off from ZooKeeper stops acknowledging when
its lease runs out, before the controller moves anything.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from bmq.metadata.topics import TopicPartition
from bmq.storage.log.fencing import FencedEpochError

log = logging.getLogger(__name__)

OPENS_IN_FLIGHT = 32    # background opens at a time: a request's own open waits behind these
RETRY_FIRST_S = 0.5     # pauses between rounds of opens that failed, doubling up to
RETRY_MAX_S = 8.0


class TakenPartitions:
    """The partitions taken and not opened, with their leader epochs; ``open_partition`` opens
    one for an epoch (raising ``FencedEpochError`` if storage has seen a higher one, after
    telling the controller)."""

    def __init__(self, open_partition: Callable[[TopicPartition, int], Awaitable[None]]
                 ) -> None:
        self._open_partition = open_partition
        self._epochs: dict[TopicPartition, int] = {}
        self._opening: dict[TopicPartition, asyncio.Task[None]] = {}
        self._background: asyncio.Task[None] | None = None

    def __bool__(self) -> bool:
        return bool(self._epochs)

    def keys(self) -> list[TopicPartition]:
        return list(self._epochs)

    def epoch(self, tp: TopicPartition) -> int | None:
        return self._epochs.get(tp)

    def take(self, tp: TopicPartition, epoch: int) -> None:
        self._epochs[tp] = epoch
        if self._background is None or self._background.done():
            self._background = asyncio.get_running_loop().create_task(self._open_the_rest())

    async def open(self, tp: TopicPartition) -> None:
        """Open ``tp`` now if it is taken (or wait for its open under way). Raises what the
        open raised; a request given up meanwhile does not stop the open."""
        task = self._opening.get(tp)
        if task is None:
            epoch = self._epochs.get(tp)
            if epoch is None:
                return
            task = self._opening[tp] = asyncio.get_running_loop().create_task(
                self._open(tp, epoch))
        await asyncio.shield(task)

    async def _open(self, tp: TopicPartition, epoch: int) -> None:
        try:
            await self._open_partition(tp, epoch)
            self._forget(tp, epoch)
        except FencedEpochError:
            self._forget(tp, epoch)     # the controller assigns a higher epoch
            raise
        # Other errors leave it taken: the next request tries again.
        finally:
            if self._opening.get(tp) is asyncio.current_task():
                del self._opening[tp]

    def _forget(self, tp: TopicPartition, epoch: int) -> None:
        if self._epochs.get(tp) == epoch:
            del self._epochs[tp]

    async def drop(self, tp: TopicPartition) -> None:
        """No longer ours: forget ``tp`` once an open under way has ended (the caller then
        closes it if it was opened)."""
        task = self._opening.get(tp)
        if task is not None:
            await asyncio.wait([task])
        self._epochs.pop(tp, None)

    async def _open_the_rest(self) -> None:
        """Open every taken partition, a few at a time; those that fail (storage out of reach)
        again, after a pause that grows while they keep failing: not every user of a
        partition asks for it to be opened, and one never opened is never written."""
        warned: set[TopicPartition] = set()
        pause_s = RETRY_FIRST_S
        while True:
            pending = sorted(self._epochs)
            for start in range(0, len(pending), OPENS_IN_FLIGHT):
                chunk = pending[start:start + OPENS_IN_FLIGHT]
                results = await asyncio.gather(*(self.open(tp) for tp in chunk),
                                               return_exceptions=True)
                for tp, result in zip(chunk, results, strict=True):
                    if isinstance(result, Exception) and tp not in warned and \
                            not isinstance(result, FencedEpochError):
                        warned.add(tp)
                        log.warning("could not open %s-%d (tried again until it opens): %s",
                                    *tp, result)
            if not self._epochs:
                return
            if not set(self._epochs) - set(pending):    # none taken meanwhile: all failed
                await asyncio.sleep(pause_s)
                pause_s = min(pause_s * 2, RETRY_MAX_S)

    def clear(self) -> None:
        """Forget everything, stopping the opens under way (the session is lost, or the
        broker stops)."""
        for task in [*self._opening.values(),
                     *([self._background] if self._background is not None else [])]:
            task.cancel()
        self._epochs.clear()
        self._opening.clear()
        self._background = None
