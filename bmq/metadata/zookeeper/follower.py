"""Following a cluster in ZooKeeper, for brokers and proxies alike: every live broker and proxy,
every topic and every partition assignment, re-read whenever a watch fires, the connection
changes, or ``RESYNC_INTERVAL_S`` passes (in case a watch was lost with a connection).

ZooKeeper calls are blocking (kazoo): reads run on worker threads; watches and connection
changes only wake the event loop, which re-reads everything and hands the result to the
follower's owner there, so every change to what a node knows happens on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss, SessionExpiredError

from bmq.metadata.nodes import BrokerNode
from bmq.metadata.topics import TopicInfo
from bmq.metadata.zookeeper.layout import RESYNC_INTERVAL_S, Paths, loads, read_children

log = logging.getLogger(__name__)

FIRST_READ_DEADLINE_S = 30.0    # as ``layout.start_retry``

# /assignments/<topic>: {"<partition>": {"owner", "reg", "epoch", "draining"}}
Assignment = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """One consistent-enough read of the cluster (each znode as of its own read)."""

    brokers: dict[int, BrokerNode]
    proxies: dict[int, BrokerNode]
    topics: list[TopicInfo]
    assignments: dict[str, dict[str, Assignment]]


def _topic(name: str, data: bytes) -> TopicInfo:
    return TopicInfo.from_json({"name": name, **loads(data)})


def _nodes(children: dict[str, bytes]) -> dict[int, BrokerNode]:
    nodes = {}
    for name, data in children.items():
        doc = loads(data) or {}
        nodes[int(name)] = BrokerNode.registered(int(name), doc)
    return nodes


class ClusterFollower:
    """Calls ``on_snapshot`` on the event loop with each new read of the cluster.

    ``before_read`` runs on the loop before each read (a broker registers again there after a
    lost session); when it returns False the read is skipped until the next wake-up.
    ``on_session_lost`` runs on the loop when the ZooKeeper session expires.
    """

    def __init__(self, zk: KazooClient, paths: Paths, executor: Executor,
                 on_snapshot: Callable[[ClusterSnapshot], None], *,
                 before_read: Callable[[], Awaitable[bool]] | None = None,
                 on_session_lost: Callable[[], None] | None = None) -> None:
        self._zk = zk
        self._paths = paths
        self._executor = executor
        self._on_snapshot = on_snapshot
        self._before_read = before_read
        self._on_session_lost = on_session_lost
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # The previous read's documents, parsed, by path: a document whose bytes did not change
        # is not parsed again (a read of 1,000 topics parsed ~6 MB of JSON, at every change).
        self._parsed: dict[str, tuple[bytes, Any]] = {}

    def start(self) -> None:
        """Follow from now on (the first read happens at once)."""
        self._loop = asyncio.get_running_loop()
        self._zk.add_listener(self._on_state)
        self._task = self._loop.create_task(self._follow())
        self._changed.set()

    def stop(self) -> None:
        self._loop = None   # closing the session reports it LOST: nothing to react to now
        if self._task is not None:
            self._task.cancel()

    def wake(self) -> None:
        """Read again soon (on the loop)."""
        self._changed.set()

    async def read_once(self) -> None:
        """Read the cluster now and apply it (before following, or to be sure of it)."""
        loop = asyncio.get_running_loop()
        if self._before_read is None or await self._before_read():
            self._on_snapshot(await loop.run_in_executor(self._executor, self._read))

    async def read_first(self, deadline_s: float = FIRST_READ_DEADLINE_S) -> None:
        """``read_once`` at start, retried over a lost connection for up to ``deadline_s``: an
        ensemble electing a leader (a ZooKeeper host cut off or restarting) must not stop a
        node that is starting (a proxy restarted then exited, and every client's traffic goes
        through it)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + deadline_s
        while True:
            try:
                return await self.read_once()
            except (ConnectionLoss, SessionExpiredError) as error:
                if loop.time() > deadline:
                    raise
                log.warning("reading cluster metadata failed (retrying): %r", error)
                await asyncio.sleep(0.5)

    def _on_state(self, state: str) -> None:
        """kazoo's thread: hand connection changes to the event loop."""
        loop = self._loop
        if loop is None:
            return
        if state == KazooState.LOST and self._on_session_lost is not None:
            loop.call_soon_threadsafe(self._on_session_lost)
        loop.call_soon_threadsafe(self._changed.set)

    def _watch(self, *_args: object) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._changed.set)

    async def _follow(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), RESYNC_INTERVAL_S)
            self._changed.clear()
            try:
                await self.read_once()
            except Exception as error:
                log.warning("reading cluster metadata failed (retrying): %s", error)
                await asyncio.sleep(0.2)
                self._changed.set()

    def _children(self, path: str) -> dict[str, bytes]:
        return read_children(self._zk, path, self._watch)

    def _read(self) -> ClusterSnapshot:
        """Worker thread: read everything, watches set on all of it. The documents it returns
        are shared with the previous snapshot where unchanged: nobody may modify them."""
        paths = self._paths
        previous, parsed = self._parsed, {}

        def parse(path: str, data: bytes, how: Callable[[bytes], Any]) -> Any:
            known = previous.get(path)
            value = known[1] if known is not None and known[0] == data else how(data)
            parsed[path] = (data, value)
            return value

        snapshot = ClusterSnapshot(
            brokers=_nodes(self._children(paths.brokers)),
            proxies=_nodes(self._children(paths.proxies)),
            topics=[parse(paths.topic(name), data, functools.partial(_topic, name))
                    for name, data in self._children(paths.topics).items()],
            assignments={name: parse(paths.assignment(name), data, lambda d: loads(d) or {})
                         for name, data in self._children(paths.assignments).items()})
        self._parsed = parsed
        return snapshot
