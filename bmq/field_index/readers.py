"""The log of a partition as a process can read it for queries: the owner's own
``PartitionLog`` (always current) or, for partitions owned elsewhere, a ``LogReader`` of the
shared storage, kept open and refreshed at most every ``REFRESH_S``."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from bmq.storage.base import Storage
from bmq.storage.log import LogReader, PartitionLog

REFRESH_S = 0.5
MAX_READERS = 1000

OwnedLog = Callable[[str, int], PartitionLog | None]


class PartitionLogs:
    def __init__(self, storage: Storage, owned: OwnedLog | None = None) -> None:
        self._storage = storage
        self._owned = owned
        self._readers: OrderedDict[tuple[str, int], tuple[LogReader, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, topic: str, partition: int) -> PartitionLog | LogReader:
        own = self._owned(topic, partition) if self._owned is not None else None
        if own is not None:
            return own
        key = (topic, partition)
        with self._lock:   # opening and refreshing are a listing and a small read
            reader, refreshed = self._readers.pop(key, (None, 0.0))
            now = time.monotonic()
            if reader is None:
                reader, refreshed = PartitionLog.open_reader(self._storage, topic, partition), now
            elif now - refreshed > REFRESH_S:
                reader.refresh()
                refreshed = now
            self._readers[key] = (reader, refreshed)
            while len(self._readers) > MAX_READERS:
                self._readers.popitem(last=False)[1][0].close()
        return reader

    def close(self) -> None:
        with self._lock:
            for reader, _ in self._readers.values():
                reader.close()
            self._readers.clear()
