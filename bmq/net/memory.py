"""The memory a server role gives the requests it has read and not yet answered
(``queued.max.request.bytes``, as Kafka's broker names it).

Each request frame takes its size from one pool of the process before it is read; its answer
gives it back. A connection whose next frame does not fit stops reading (its client waits, as on
a Kafka broker whose memory pool is exhausted) until answers free enough. A frame larger than the
whole pool is read once nothing else holds any, so every request the frame limit
(``socket.request.max.bytes``) lets in is served in the end.

Why: without it, clients sending many large Produce requests at once made the broker allocate
them all; past the process's memory the allocation failed (MemoryError), connections dropped
and other work failed with them. All of it runs on the event loop's thread: no lock.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable


class RequestMemory:
    def __init__(self, limit: int) -> None:
        """``limit``: bytes; -1 (Kafka's default) for no limit."""
        self.limit = limit
        self.used = 0
        self._waiting: deque[Callable[[], None]] = deque()

    def take(self, size: int) -> bool:
        """Take ``size`` bytes if they fit (or nothing is taken at all); False otherwise."""
        if self.limit >= 0 and self.used > 0 and self.used + size > self.limit:
            return False
        self.used += size
        return True

    def give_back(self, size: int) -> None:
        self.used -= size
        # Wake the connections waiting, oldest first: each tries again and waits again (at
        # the end of the line) if its frame still does not fit.
        for _ in range(len(self._waiting)):
            if self.limit >= 0 and self.used >= self.limit:
                break
            self._waiting.popleft()()

    def wait(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` once some memory is given back."""
        self._waiting.append(wake)

    def forget(self, wake: Callable[[], None]) -> None:
        """A closed connection waits no more."""
        with contextlib.suppress(ValueError):
            self._waiting.remove(wake)
