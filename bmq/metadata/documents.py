"""Where the cluster's security metadata lives: a few small JSON documents (SCRAM credentials,
ACLs, client quotas), each read whole and changed whole.

`bmq serve` keeps them as files in its data directory's ``meta/`` storage (it is their one
writer while it runs: the data directory's lock says so). In cluster mode every broker may change
them (CreateAcls reaches any broker) and every broker and proxy must see the change, so they are
znodes in ZooKeeper (bmq/metadata/zookeeper/documents.py): a change is a compare-and-set on the
znode's version, retried, so two brokers changing ACLs at once both land; a watch tells every
node of each change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from bmq.storage import Storage

# A change to a document: its current bytes (None: there is none yet) -> the new bytes.
Change = Callable[[bytes | None], bytes]


class Documents(Protocol):
    def read(self, name: str) -> bytes | None:
        """The document's bytes, or None if there is none (blocking)."""

    def change(self, name: str, change: Change) -> bytes:
        """Apply ``change`` to the current bytes atomically (blocking); the new bytes.
        ``change`` may be called more than once (each time with newer bytes)."""

    def watch(self, name: str, on_change: Callable[[bytes | None], None]) -> None:
        """Call ``on_change`` (on a thread of the store's) whenever another node changes the
        document; a store with one writer never calls it."""


class StorageDocuments:
    """The documents of `bmq serve`: files in ``meta/``, replaced atomically."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._lock = threading.Lock()

    def read(self, name: str) -> bytes | None:
        return self._storage.read_all(name) if self._storage.exists(name) else None

    def change(self, name: str, change: Change) -> bytes:
        with self._lock:
            data = change(self.read(name))
            self._storage.write_atomic(name, data)
            return data

    def watch(self, name: str, on_change: Callable[[bytes | None], None]) -> None:
        """One writer: nothing else changes these files while the broker runs."""
