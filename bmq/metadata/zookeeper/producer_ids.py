"""Producer-id blocks of a cluster, reserved in ZooKeeper by compare-and-set."""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from bmq.metadata.producer_ids import ProducerIdAllocator
from bmq.metadata.zookeeper.layout import Paths, dumps, loads


class ZkProducerIdAllocator(ProducerIdAllocator):
    """Blocks taken from ``/producer_ids`` by compare-and-set: never handed out twice, whichever
    broker asks."""

    def __init__(self, zk: KazooClient, paths: Paths, block_size: int) -> None:
        super().__init__(block_size)
        self._zk = zk
        self._path = paths.producer_ids

    def _reserve_block(self, at_least: int = 0) -> int:
        while True:
            try:
                data, stat = self._zk.get(self._path)
            except NoNodeError:
                try:
                    self._zk.create(self._path, dumps(
                        {"next_block_start": at_least + self._block_size}), makepath=True)
                    return at_least
                except NodeExistsError:
                    continue
            start = max(int(loads(data)["next_block_start"]), at_least)
            try:
                self._zk.set(self._path, dumps({"next_block_start": start + self._block_size}),
                             version=stat.version)
            except BadVersionError:
                continue
            return start
