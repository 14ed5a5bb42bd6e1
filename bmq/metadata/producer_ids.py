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
        self._lock = threading.Lock()

    def allocate(self) -> int:
        with self._lock:
            if self._next >= self._block_end:
                self._next = self._reserve_block()
                self._block_end = self._next + self._block_size
            pid = self._next
            self._next += 1
            return pid

    @abstractmethod
    def _reserve_block(self) -> int:
        """Durably reserve the next ``_block_size`` ids; returns the first of them."""
