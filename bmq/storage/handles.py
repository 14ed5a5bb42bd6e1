"""The files partitions keep open, bounded: a partition that nobody writes or reads holds none.

A segment's append handle (its owner's) and read handle (any reader's) are opened on demand and
registered here, most recently used last. Past ``limit`` open handles the least recently used
are closed, and a sweeper thread closes those unused for a while (``IDLE_CLOSE_S``),
so a broker serves tens of thousands of partitions under the default limit of open files (one
descriptor per partition ran out at ~20,000 before). A handle busy at that moment (its
partition flushing, a read of its segment in progress) is left open and asked again later:
closing never waits, so it cannot deadlock with the flush or read that holds it.

File descriptors are the process's, so there is one pool per process (``OPEN_FILES``), which a
role sizes from its limit of open files at start-up (``bmq.limits``)."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

# Returns True once the handle is closed (or was already), False if it is busy now.
Closer = Callable[[], bool]

DEFAULT_LIMIT = 4096
IDLE_CLOSE_S = 60.0     # a handle unused this long is closed by the sweeper
SWEEP_S = 10.0          # how often the sweeper looks


class HandlePool:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        # key (the object holding the handle) -> (its closer, when it was last used)
        self._open: OrderedDict[object, tuple[Closer, float]] = OrderedDict()
        self._sweeper: threading.Thread | None = None
        os.register_at_fork(after_in_child=self._forked)

    def __len__(self) -> int:
        return len(self._open)

    def used(self, key: object, closer: Closer) -> None:
        """``key``'s handle was opened or used now; past the limit, close the least recently
        used others."""
        with self._lock:
            self._open[key] = (closer, time.monotonic())
            self._open.move_to_end(key)
            excess = len(self._open) - self.limit
            victims = list(itertools.islice(self._open.items(), max(0, excess)))
            if self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep, name="bmq-handles",
                                                 daemon=True)
                self._sweeper.start()
        self._close(victims, keep=key)

    def closed(self, key: object) -> None:
        """``key``'s handle was closed by its holder."""
        with self._lock:
            self._open.pop(key, None)

    def close_idle(self, idle_s: float = IDLE_CLOSE_S) -> int:
        """Close the handles unused for ``idle_s``; returns how many were closed."""
        cutoff = time.monotonic() - idle_s
        with self._lock:
            victims = []
            for key, (closer, last_used) in self._open.items():
                if last_used > cutoff:
                    break
                victims.append((key, (closer, last_used)))
        return self._close(victims)

    def _sweep(self) -> None:
        while True:
            time.sleep(SWEEP_S)
            self.close_idle()

    def _forked(self) -> None:
        """In a forked child: the parent's sweeper thread and lock holder did not come along."""
        self._lock = threading.Lock()
        self._sweeper = None

    def _close(self, victims: list[tuple[object, tuple[Closer, float]]],
               keep: object = None) -> int:
        """Close ``victims`` outside the pool's lock (a closer takes its partition's locks)."""
        count = 0
        for key, (closer, last_used) in victims:
            if key is keep or not closer():
                continue
            count += 1
            with self._lock:
                entry = self._open.get(key)
                if entry is not None and entry[1] == last_used:  # not used again meanwhile
                    del self._open[key]
        return count


OPEN_FILES = HandlePool()
