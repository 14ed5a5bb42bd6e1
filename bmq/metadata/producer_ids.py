"""Producer ids (InitProducerId), handed out from blocks reserved on durable metadata, so that
no id is ever given twice, across restarts and across brokers."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod


class ProducerIdAllocator(ABC):
    """Hands out ids from the current block; reserves the next block when it runs out.

    ``allocate`` may do I/O (reserving a block): call it off the event loop.
    """

    def __init__(self, block_size: int) -> None:
        self._block_size = block_size
        self._next = 0
        self._block_end = 0
        self._avoided = -1          # no id up to this one is handed out (``avoid``)
        self._lock = threading.Lock()

    def allocate(self) -> int:
        with self._lock:
            if self._next >= self._block_end:
                self._next = self._reserve_block()
                self._block_end = self._next + self._block_size
            pid = self._next
            self._next += 1
            return pid

    def may_hand_out(self, pid: int) -> bool:
        """Whether ``pid`` may still be handed out here (a quick check, without I/O)."""
        return pid >= self._next

    def avoid(self, pid: int) -> None:
        """Hand out no id up to ``pid`` from now on: a mirrored log holds another cluster's
        producer ids, whose state a new producer given one of them would inherit (its
        batches taken for that producer's duplicates, or out of sequence). Ids of the
        current block are skipped; past it, the next block is reserved from ``pid + 1`` on,
        durably, so no broker's later block holds it. May do I/O."""
        with self._lock:
            self._avoided = max(self._avoided, pid)
            if pid < self._next:
                return
            if pid < self._block_end:
                self._next = pid + 1
                return
            self._next = self._reserve_block(pid + 1)
            self._block_end = self._next + self._block_size

    def skip_through(self, pid: int) -> None:
        """Another allocator of the cluster avoided every id up to ``pid``: skip those of the
        current block (the next block is reserved past them already)."""
        with self._lock:
            self._avoided = max(self._avoided, pid)
            if pid >= self._next:
                self._next = min(pid + 1, self._block_end)

    @abstractmethod
    def _reserve_block(self, at_least: int = 0) -> int:
        """Durably reserve the next ``_block_size`` ids, none below ``at_least``; returns the
        first of them."""
