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

import json
import threading
from collections.abc import Callable
from typing import ClassVar, Generic, Protocol, Self, TypeVar

from bmq.storage import Storage

# A change to a document: its current bytes (None: there is none yet) -> the new bytes.
Change = Callable[[bytes | None], bytes]
# A document's bytes (None: there is none) and its version, which grows with every change.
Versioned = tuple[bytes | None, int]
T = TypeVar("T")


class Documents(Protocol):
    def read(self, name: str) -> Versioned:
        """The document now (blocking)."""

    def change(self, name: str, change: Change) -> Versioned:
        """Apply ``change`` to the current bytes atomically (blocking); the document after.
        ``change`` may be called more than once (each time with newer bytes)."""

    def watch(self, name: str, on_change: Callable[[bytes | None, int], None]) -> None:
        """Call ``on_change`` (on a thread of the store's) whenever another node changes the
        document; a store with one writer never calls it."""


class StorageDocuments:
    """The documents of `bmq serve`: files in ``meta/``, replaced atomically. The process is
    their one writer, so versions are counted in memory."""

    def __init__(self, storage: Storage) -> None:
        """Made by the directory's one writer (it holds the data directory's lock): an atomic
        write that kill -9 cut short left its temporary file behind, removed now."""
        self._storage = storage
        self._lock = threading.Lock()
        self._versions: dict[str, int] = {}
        for name in storage.list(""):
            if ".tmp." in name:
                storage.delete(name)

    def read(self, name: str) -> Versioned:
        data = self._storage.read_all(name) if self._storage.exists(name) else None
        return data, self._versions.get(name, 0)

    def change(self, name: str, change: Change) -> Versioned:
        with self._lock:
            data = change(self.read(name)[0])
            self._storage.write_atomic(name, data)
            version = self._versions[name] = self._versions.get(name, 0) + 1
            return data, version

    def watch(self, name: str, on_change: Callable[[bytes | None, int], None]) -> None:
        """One writer: nothing else changes these files while the broker runs."""


class DocumentStore(Generic[T]):
    """One document as a node holds it, parsed. Changes made through this node and those a
    watch reports arrive on different threads in any order: the newest version wins, so an
    older one never replaces a newer one (``state``, replaced whole, is (version, value))."""

    PATH: ClassVar[str]

    def __init__(self, documents: Documents) -> None:
        self._documents = documents
        self._lock = threading.Lock()
        self.state: tuple[int, T] = (-2, self._parse(None))

    @property
    def value(self) -> T:
        return self.state[1]

    def load(self) -> Self:
        self.reload(*self._documents.read(self.PATH))
        return self

    def follow(self) -> Self:
        """Load now (blocking) and apply every later change another node makes."""
        self.load()
        self._documents.watch(self.PATH, self.reload)
        return self

    def reload(self, data: bytes | None, version: int) -> None:
        """The document as stored at ``version`` (read at start, changed here or elsewhere)."""
        value = self._parse(data)
        with self._lock:
            if version > self.state[0]:
                self.state = (version, value)

    def _change(self, change: Callable[[T], T]) -> None:
        """Save ``change(current value)`` (blocking: a worker thread's); ``change`` may run
        more than once, each time on a newer value."""
        self.reload(*self._documents.change(
            self.PATH, lambda data: self._serialize(change(self._parse(data)))))

    def _parse(self, data: bytes | None) -> T:
        raise NotImplementedError

    def _serialize(self, value: T) -> bytes:
        raise NotImplementedError


# Resource name -> config name -> value.
ConfigsByResource = dict[str, dict[str, str]]


class ResourceConfigStore(DocumentStore[ConfigsByResource]):
    """Config values set on resources of one kind (brokers, groups), by resource name."""

    KEY: ClassVar[str]      # the document's top-level key

    def of(self, resource: str) -> dict[str, str]:
        """The values set on one resource."""
        return dict(self.value.get(resource, {}))

    def change(self, resource: str, change: Callable[[dict[str, str]], None]) -> None:
        """Let ``change`` edit the resource's values in place and save them (blocking: a worker
        thread's); ``change`` may run more than once, each time on newer values."""

        def changed(value: ConfigsByResource) -> ConfigsByResource:
            configs = value.setdefault(resource, {})
            change(configs)
            if not configs:
                del value[resource]
            return value

        self._change(changed)

    def _parse(self, data: bytes | None) -> ConfigsByResource:
        if data is None:
            return {}
        return {str(r): {str(n): str(v) for n, v in c.items()}
                for r, c in json.loads(data).get(self.KEY, {}).items()}

    def _serialize(self, value: ConfigsByResource) -> bytes:
        return json.dumps({self.KEY: value}, indent=1, sort_keys=True).encode()
