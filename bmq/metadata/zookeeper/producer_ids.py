"""Producer-id blocks of a cluster, reserved in ZooKeeper by compare-and-set; the ids avoided
(``ProducerIdAllocator.avoid``) by any broker, kept there too and followed by every broker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from bmq.metadata.producer_ids import ProducerIdAllocator
from bmq.metadata.zookeeper.layout import Paths, dumps, loads


class ZkProducerIdAllocator(ProducerIdAllocator):
    """Blocks taken from ``/producer_ids`` by compare-and-set: never handed out twice, whichever
    broker asks. ``avoided`` there is the highest id any broker avoided: every broker watches
    it and skips what its current block has up to it (that block was reserved before)."""

    def __init__(self, zk: KazooClient, paths: Paths, block_size: int) -> None:
        super().__init__(block_size)
        self._zk = zk
        self._path = paths.producer_ids
        zk.DataWatch(self._path, self._follow)

    def may_hand_out(self, pid: int) -> bool:
        """Whether ``pid`` may be handed out by any broker of the cluster: ids below this one's
        next may be in another's block."""
        return pid > self._avoided

    def _follow(self, data: bytes | None, _stat: ZnodeStat | None) -> None:
        if data:
            self.skip_through(int(loads(data).get("avoided", -1)))

    def avoid(self, pid: int) -> None:
        """Also in ZooKeeper, before the ids are skipped here: every other broker skips them
        in its current block once its watch fires (before a promotion lets any producer write
        the mirrored partitions)."""
        if pid <= self._avoided:
            return
        self._change(lambda state: {
            **state, "next_block_start": max(int(state["next_block_start"]), pid + 1),
            "avoided": max(int(state.get("avoided", -1)), pid)}, {
            "next_block_start": pid + 1, "avoided": pid})
        super().avoid(pid)

    def _reserve_block(self, at_least: int = 0) -> int:
        before = self._change(lambda state: {
            **state, "next_block_start": max(int(state["next_block_start"]), at_least)
            + self._block_size}, {"next_block_start": at_least + self._block_size})
        return at_least if before is None else max(int(before["next_block_start"]), at_least)

    def _change(self, change: Callable[[dict[str, Any]], dict[str, Any]],
                first: dict[str, Any]) -> dict[str, Any] | None:
        """Replace the document by ``change`` of it (``first`` if there is none yet), by
        compare-and-set; returns the document it replaced."""
        while True:
            try:
                data, stat = self._zk.get(self._path)
            except NoNodeError:
                try:
                    self._zk.create(self._path, dumps(first), makepath=True)
                    return None
                except NodeExistsError:
                    continue
            state = loads(data)
            try:
                self._zk.set(self._path, dumps(change(state)), version=stat.version)
            except BadVersionError:
                continue
            return dict(state)
