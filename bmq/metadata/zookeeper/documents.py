"""The cluster's security documents as znodes: ``<root>/security/<name>`` (see
bmq/metadata/documents.py). ZooKeeper's znodes hold up to 1 MB by default (jute.maxbuffer):
about 5,000 ACLs or SCRAM users; beyond that ZooKeeper's limit must be raised."""

from __future__ import annotations

from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import DataWatch

from bmq.metadata.documents import Change
from bmq.metadata.zookeeper.layout import Paths


class ZkDocuments:
    def __init__(self, zk: KazooClient, paths: Paths) -> None:
        self._zk = zk
        self._paths = paths
        self._watches: list[DataWatch] = []

    def read(self, name: str) -> bytes | None:
        try:
            data: bytes = self._zk.get(self._paths.security_document(name))[0]
        except NoNodeError:
            return None
        return data

    def change(self, name: str, change: Change) -> bytes:
        path = self._paths.security_document(name)
        while True:
            try:
                current, stat = self._zk.get(path)
            except NoNodeError:
                data = change(None)
                try:
                    self._zk.create(path, data, makepath=True)
                    return data
                except NodeExistsError:
                    continue      # another node made it first: change what it wrote
            data = change(current)
            try:
                self._zk.set(path, data, version=stat.version)
                return data
            except (BadVersionError, NoNodeError):
                continue          # changed meanwhile: apply ours to the newer document

    def watch(self, name: str, on_change: Callable[[bytes | None], None]) -> None:
        def fired(data: bytes | None, _stat: object) -> None:
            on_change(data)
        self._watches.append(DataWatch(self._zk, self._paths.security_document(name), fired))
