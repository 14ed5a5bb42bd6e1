"""The cluster's security documents as znodes: ``<root>/security/<name>`` (see
bmq/metadata/documents.py). ZooKeeper's znodes hold up to 1 MB by default (jute.maxbuffer):
about 5,000 ACLs or SCRAM users; beyond that ZooKeeper's limit must be raised."""

from __future__ import annotations

from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import DataWatch

from bmq.metadata.documents import Change, Versioned
from bmq.metadata.zookeeper.layout import Paths

# The version of a document not made yet (ZooKeeper's first is 0).
NO_NODE = -1


class ZkDocuments:
    def __init__(self, zk: KazooClient, paths: Paths) -> None:
        self._zk = zk
        self._paths = paths
        self._watches: list[DataWatch] = []

    def read(self, name: str) -> Versioned:
        try:
            data, stat = self._zk.get(self._paths.security_document(name))
        except NoNodeError:
            return None, NO_NODE
        return data, stat.version

    def change(self, name: str, change: Change) -> Versioned:
        path = self._paths.security_document(name)
        while True:
            try:
                current, stat = self._zk.get(path)
            except NoNodeError:
                data = change(None)
                try:
                    self._zk.create(path, data, makepath=True)
                    return data, 0
                except NodeExistsError:
                    continue      # another node made it first: change what it wrote
            data = change(current)
            try:
                return data, self._zk.set(path, data, version=stat.version).version
            except (BadVersionError, NoNodeError):
                continue          # changed meanwhile: apply ours to the newer document

    def watch(self, name: str, on_change: Callable[[bytes | None, int], None]) -> None:
        def fired(data: bytes | None, stat: ZnodeStat | None) -> None:
            on_change(data, NO_NODE if stat is None else stat.version)
        self._watches.append(DataWatch(self._zk, self._paths.security_document(name), fired))
