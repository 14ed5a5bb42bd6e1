"""What a proxy knows of its cluster, followed from ZooKeeper: live brokers and proxies, topics,
and each partition's owner and leader epoch. It also registers the proxy itself.

A proxy's node id must differ from every broker's (clients key connections by node id, and
FindCoordinator names brokers), and should survive restarts (so partitions route back to it):
it is allocated once per advertised address, from ``PROXY_ID_BASE`` up, and kept in ZooKeeper.

ZooKeeper calls block (kazoo): they run on worker threads; watches only wake the event loop,
which re-reads everything (``bmq.metadata.zookeeper.follower``, as brokers do; fine for tens of
topics, see docs/cluster.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError

from bmq.metadata.nodes import PROXY_ID_BASE, BrokerNode
from bmq.metadata.zookeeper.follower import ClusterFollower, ClusterSnapshot
from bmq.metadata.zookeeper.layout import Paths, dumps, join_cluster, start_retry
from bmq.metadata.zookeeper.topics import ZkTopicRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Owner:
    """The broker that owns a partition now, and its leader epoch."""

    node: BrokerNode
    epoch: int


class ClusterView:
    def __init__(self, zookeeper: str, root: str, session_timeout_ms: int,
                 executor: Executor) -> None:
        self._hosts = zookeeper
        self._timeout_ms = session_timeout_ms
        self.paths = Paths(root)
        self._executor = executor
        self.zk: KazooClient | None = None
        self.topics: ZkTopicRegistry
        self.cluster_id = ""
        self.brokers: dict[int, BrokerNode] = {}
        self.proxies: dict[int, BrokerNode] = {}
        self._assignments: dict[str, dict[str, dict[str, Any]]] = {}
        self.me: BrokerNode | None = None
        self._follower: ClusterFollower | None = None
        self._registered = False
        self._announced = False   # listening: may register (and re-register after a lost session)
        self._registering = threading.Lock()
        self.listeners: list[Callable[[], None]] = []   # called on the loop after each change

    # ------------------------------------------------------------------ startup / shutdown
    def connect(self, host: str, port: int, endpoints: tuple[tuple[str, str, int], ...]) -> None:
        """Blocking: connect, read the cluster id and topics, find this proxy's node id."""
        zk, self.cluster_id = join_cluster(self._hosts, self._timeout_ms, self.paths)
        self.zk = zk
        self.topics = ZkTopicRegistry(zk, self.paths)
        retry = start_retry()       # over a connection lost meanwhile, as join_cluster's
        retry(self.topics.load)
        self.me = BrokerNode(retry(self._allocate_id, f"{host}:{port}"), host, port,
                             endpoints=endpoints)

    def _allocate_id(self, address: str) -> int:
        assert self.zk is not None
        path = f"{self.paths.root}/proxy_ids/{address}"
        with contextlib.suppress(NoNodeError):
            return int(self.zk.get(path)[0])
        made = self.zk.create(f"{self.paths.root}/proxy_ids/seq-", b"", sequence=True,
                              makepath=True)
        candidate = PROXY_ID_BASE + int(made.rsplit("-", 1)[1])
        # The number is all it was for: ZooKeeper never hands out a sequence number twice
        # under one parent, even once the node is gone.
        self.zk.delete(made)
        with contextlib.suppress(NodeExistsError):
            self.zk.create(path, str(candidate).encode(), makepath=True)
        return int(self.zk.get(path)[0])

    async def start(self) -> None:
        """Read the cluster and follow it; registering waits for ``announce``."""
        assert self.zk is not None
        self._follower = ClusterFollower(self.zk, self.paths, self._executor, self._apply,
                                         before_read=self._register_if_announced,
                                         on_session_lost=self._lose_session)
        await self._follower.read_first()
        self._follower.start()

    async def announce(self) -> None:
        """Register this proxy, once it accepts connections: clients learn of it from
        Metadata, and a connection refused would make them back off from it."""
        self._announced = True
        await asyncio.get_running_loop().run_in_executor(self._executor, self._ensure_registered)

    def _ensure_registered(self) -> None:
        """Worker thread: register unless registered (the announce and a follow-up re-read of
        the cluster may both get here)."""
        assert self.zk is not None
        with self._registering:
            if self._announced and not self._registered and \
                    self.zk.state == KazooState.CONNECTED:
                self._register()

    async def stop(self) -> None:
        if self._follower is not None:
            self._follower.stop()   # before closing the session, which reports it LOST
        if self.zk is not None:
            zk = self.zk
            await asyncio.get_running_loop().run_in_executor(self._executor, zk.stop)
            zk.close()

    def _register(self) -> None:
        assert self.zk is not None and self.me is not None
        me = self.me
        path = self.paths.proxy(me.node_id)
        doc = dumps(me.registration())
        try:
            self.zk.create(path, doc, ephemeral=True, makepath=True)
        except NodeExistsError:
            # Our previous session's node: replace it (the address owns the id).
            self.zk.delete(path)
            self.zk.create(path, doc, ephemeral=True, makepath=True)
        self._registered = True
        log.info("registered as proxy %d (%s:%d)", me.node_id, me.host, me.port)

    # ------------------------------------------------------------------ following
    def _lose_session(self) -> None:
        self._registered = False

    async def _register_if_announced(self) -> bool:
        """Before each read of the cluster: register again after a lost session."""
        await asyncio.get_running_loop().run_in_executor(self._executor,
                                                         self._ensure_registered)
        return True

    def _apply(self, snapshot: ClusterSnapshot) -> None:
        self.brokers = snapshot.brokers
        proxies = dict(snapshot.proxies)
        if self.me is not None:
            proxies.setdefault(self.me.node_id, self.me)
        self.proxies = proxies
        self.topics.replace_all(snapshot.topics)
        self._assignments = snapshot.assignments
        for listener in self.listeners:
            listener()

    # ------------------------------------------------------------------ queries
    def owner(self, topic: str, index: int) -> Owner | None:
        """The live broker that owns a partition, if any."""
        a = self._assignments.get(topic, {}).get(str(index))
        if a is None:
            return None
        node = self.brokers.get(int(a.get("owner", -1)))
        return None if node is None else Owner(node, int(a["epoch"]))

    def epoch(self, topic: str, index: int) -> int:
        """The partition's current leader epoch (-1 if never assigned)."""
        a = self._assignments.get(topic, {}).get(str(index))
        return -1 if a is None else int(a["epoch"])
