"""Partitions a broker took and released, logged as one INFO line per burst: a start, a drain
or a rebalance moves dozens at once (the 50 partitions of __consumer_offsets alone were 100
lines of a broker's start). Each partition is still logged, at DEBUG."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable

log = logging.getLogger("bmq.broker.membership.cluster")

# Moves within this long of the first one of a burst share its line.
BURST_S = 1.0


class MoveLog:
    def __init__(self, burst_s: float = BURST_S) -> None:
        self._burst_s = burst_s
        self._taken: list[tuple[str, int, float]] = []     # topic, partition, ms to take
        self._released: list[tuple[str, int]] = []
        self._flush: asyncio.TimerHandle | None = None

    def taken(self, topic: str, index: int, epoch: int, ms: float) -> None:
        log.debug("took %s-%d with leader epoch %d in %.0f ms", topic, index, epoch, ms)
        self._taken.append((topic, index, ms))
        self._schedule()

    def released(self, topic: str, index: int, epoch: int) -> None:
        log.debug("released %s-%d (epoch %d)", topic, index, epoch)
        self._released.append((topic, index))
        self._schedule()

    def _schedule(self) -> None:
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(self._burst_s, self.flush)

    def flush(self) -> None:
        """Log what was taken and released since the last line (also at stop)."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        if self._taken:
            slowest = max(self._taken, key=lambda move: move[2])
            log.info("took %d partition(s): %s; slowest %s-%d in %.0f ms", len(self._taken),
                     _by_topic(t for t, _, _ in self._taken), slowest[0], slowest[1],
                     slowest[2])
        if self._released:
            log.info("released %d partition(s): %s", len(self._released),
                     _by_topic(t for t, _ in self._released))
        self._taken, self._released = [], []


def _by_topic(topics: Iterable[str]) -> str:
    counts = Counter(topics)
    return ", ".join(f"{topic} x{count}" for topic, count in sorted(counts.items()))
