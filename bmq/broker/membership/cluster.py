"""One broker's membership in a cluster (`bmq broker`).

* registers itself (an ephemeral znode with its advertised address, its draining flag and a
  report of its partitions' states), keeps the ack lease alive and holds a liveness channel to
  the active controller (``channel``: its close tells the controller this process died);
* watches ZooKeeper and keeps the metadata cache the handlers read: live brokers, topics (through
  ``ZkTopicRegistry``) and partition assignments (owner + leader epoch);
* owns partitions as the controller assigns them: one small worker per partition opens the log
  with the assignment's epoch (take the write right, repair the tail), loads a partition of an
  internal topic into that topic's coordinator, and on a move flushes, closes and reports the
  partition released;
* on SIGTERM drains: marks itself draining and waits until the controller moved every partition.

ZooKeeper calls are blocking (kazoo); they run on worker threads, and watches only wake the
event loop, which re-reads the cluster (``bmq.metadata.zookeeper.follower``, as proxies do).
Every cache change happens on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor
from typing import Any

from kazoo.client import KazooClient, KazooState

from bmq.broker.membership import Membership
from bmq.broker.membership.channel import ControllerChannel
from bmq.broker.membership.drive_scope import DriveScope
from bmq.broker.membership.handover import Handover
from bmq.broker.membership.lease import Lease, LeaseKeeper
from bmq.broker.membership.moves import MoveLog
from bmq.broker.membership.registration import register
from bmq.broker.membership.taken import TakenPartitions
from bmq.broker.topic_config import log_config
from bmq.config import Config
from bmq.coordinators.base import InternalLogCoordinator
from bmq.metadata.nodes import BrokerNode
from bmq.metadata.routing import proxy_for
from bmq.metadata.topics import TopicPartition
from bmq.metadata.zookeeper import reports
from bmq.metadata.zookeeper.follower import Assignment, ClusterFollower, ClusterSnapshot
from bmq.metadata.zookeeper.layout import (
    FENCED,
    RELEASED,
    WRITABLE,
    Paths,
    dumps,
    join_cluster,
    start_retry,
)
from bmq.metadata.zookeeper.producer_ids import ZkProducerIdAllocator
from bmq.metadata.zookeeper.topics import ZkTopicRegistry
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.security.link import link_security
from bmq.storage import FencedEpochError
from bmq.storage.log import LogConfig
from bmq.writepath.partitions import PartitionManager

log = logging.getLogger(__name__)


class ClusterMembership(Membership):
    controller_assigns_partitions = True

    def __init__(self, config: Config, node: BrokerNode, executor: Executor) -> None:
        super().__init__(node)
        self.config = config
        self.paths = Paths(config.zookeeper_root)
        self._executor = executor
        self.lease = Lease(config.zookeeper_session_timeout_ms, config.zookeeper_lease_margin_ms)
        self.zk: KazooClient | None = None
        self.topics: ZkTopicRegistry
        self.producer_ids: ZkProducerIdAllocator
        # Set by start: the broker's open partitions and its coordinators by internal topic.
        self._partitions: PartitionManager | None = None
        self._coordinators: Mapping[str, InternalLogCoordinator] = {}
        self.brokers: dict[int, BrokerNode] = {}
        self.proxies: dict[int, BrokerNode] = {}   # the proxy tier, if any (bmq/proxy/)
        self.assignments: dict[str, dict[str, Assignment]] = {}
        self.reg = 0                      # creation zxid of our registration; 0 = unregistered
        self.draining = False
        self._reports: dict[str, list[Any]] = {}
        self._workers: dict[TopicPartition, asyncio.Task[None]] = {}
        self._taken = TakenPartitions(self._open_taken)   # taken, opened on first use
        self._handover: Handover | None = None            # set by start
        self._moves = MoveLog()
        self._scope = DriveScope()      # which partitions a read may have changed
        self._follower: ClusterFollower | None = None
        self._publish = asyncio.Event()
        self._publisher_task: asyncio.Task[None] | None = None
        self._keeper: LeaseKeeper | None = None
        self._channel: ControllerChannel | None = None
        self._registering = False
        self._session_lost = False

    # ================================================================== startup / shutdown
    def connect(self) -> None:
        """Blocking: connect to ZooKeeper, read the cluster id and the topics."""
        zk, self.cluster_id = join_cluster(self.config.zookeeper,
                                           self.config.zookeeper_session_timeout_ms, self.paths)
        self.zk = zk
        self.topics = ZkTopicRegistry(zk, self.paths)
        self.producer_ids = ZkProducerIdAllocator(zk, self.paths,
                                                  self.config.producer_id_block_size)
        self._keeper = LeaseKeeper(zk, self.lease, self.paths.brokers,
                                   self.config.zookeeper_session_timeout_ms / 6000)
        self._keeper.start()

    def load(self) -> None:
        start_retry()(self.topics.load)     # over a connection lost meanwhile (join_cluster)

    async def start(self, partitions: PartitionManager,
                    coordinators: Mapping[str, InternalLogCoordinator]) -> None:
        """Register (the listener is up by now) and start following ZooKeeper; from then on
        open and close ``partitions`` as the controller assigns them."""
        assert self.zk is not None
        self._partitions = partitions
        self._coordinators = coordinators
        self._handover = Handover(self.config, self.topics, partitions, coordinators,
                                  self._moves, self._report)
        self._follower = ClusterFollower(self.zk, self.paths, self._executor, self._apply,
                                         before_read=self._registered,
                                         on_session_lost=self._lose_session)
        await self._register()
        loop = asyncio.get_running_loop()
        self._publisher_task = loop.create_task(self._publisher())
        self._follower.start()
        self._channel = ControllerChannel(
            self.zk, self.paths, self.node.node_id, lambda: self.reg,
            lambda: loop.call_soon_threadsafe(self._lose_session, "the controller removed "
                                              "this broker's registration"),
            link_security(self.config, self.config.listener_list[0]))
        self._channel.start()

    async def drain(self, timeout_s: float) -> bool:
        """Ask for our partitions to be moved away; wait until they are. True if all moved."""
        log.info("draining: asking the controller to move this broker's partitions")
        self.draining = True
        await self._write_registration()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self._owned_assignments() and not self._workers and not self._taken \
                    and self._partitions is not None and not list(self._partitions.all()):
                self._moves.flush()
                log.info("drained: every partition was handed over")
                return True
            await asyncio.sleep(0.05)
        log.warning("drain timed out after %.0fs; closing the remaining partitions", timeout_s)
        return False

    async def stop(self) -> None:
        self._moves.flush()
        if self._follower is not None:
            self._follower.stop()   # before closing the session, which reports it LOST
        if self._publisher_task is not None:
            self._publisher_task.cancel()
        for task in list(self._workers.values()):
            task.cancel()
        self._taken.clear()
        if self._keeper is not None:
            self._keeper.stop()
        if self._channel is not None:   # after the partitions closed: nothing left to move
            await asyncio.get_running_loop().run_in_executor(self._executor, self._channel.stop)
        if self.zk is not None:
            zk = self.zk
            await asyncio.get_running_loop().run_in_executor(self._executor, zk.stop)
            zk.close()

    # ================================================================== cache used by handlers
    def nodes(self) -> list[BrokerNode]:
        # Before it follows ZooKeeper (answering a first request), the broker knows itself only.
        nodes = dict(self.brokers)
        nodes.setdefault(self.node.node_id, self.node)
        return [nodes[i] for i in sorted(nodes)]

    def metadata_nodes(self) -> list[BrokerNode]:
        return self.nodes() + [self.proxies[i] for i in sorted(self.proxies)]

    @property
    def controller_id(self) -> int:
        """Any broker accepts admin requests; clients get the lowest live broker id."""
        return min((n.node_id for n in self.nodes()), default=-1)

    def controller_description(self) -> str:
        return self._channel.describe() if self._channel is not None else "none active"

    def leader(self, topic: str, index: int) -> tuple[int, int] | None:
        """(owner broker id, leader epoch) of a partition, if it has a live owner."""
        a = self.assignments.get(topic, {}).get(str(index))
        if a is None:
            return None
        owner = int(a.get("owner", -1))
        if owner < 0 or (owner not in self.brokers and owner != self.node.node_id):
            return None
        if owner == self.node.node_id and (a.get("reg") != self.reg
                                           or not self.can_acknowledge()):
            # Our own partition while our right to it may be gone (a frozen broker resumed
            # with its lease run out, its session lost, its channel suspended): our cache may
            # be stale, and naming ourselves would send clients straight back to us. No
            # leader (LEADER_NOT_AVAILABLE) makes them ask again, elsewhere if need be.
            return None
        return owner, int(a["epoch"])

    def partition_leader(self, topic: str, index: int, local_epoch: int | None
                         ) -> tuple[int, int] | None:
        """The owner, or with proxies the proxy routing picks, as the proxies themselves answer
        (bmq.metadata.routing): clients produce and fetch through proxies."""
        owner = self.leader(topic, index)
        if self.proxies and owner is not None:
            return proxy_for(topic, index, self.proxies), owner[1]
        return owner

    def leaders_token(self, topic: str) -> object:
        # What ``leader`` and ``partition_leader`` read: the assignment document, which
        # brokers and proxies are live (key views: each read replaces these dicts, never
        # changes them), the registration and the ack right. The follower shares a document
        # between reads while its bytes do not change, so comparing it is mostly an identity
        # check.
        return (self.assignments.get(topic), self.brokers.keys(), self.proxies.keys(),
                self.reg, self.can_acknowledge())

    def owner_node(self, topic: str, index: int) -> BrokerNode | None:
        leader = self.leader(topic, index)
        if leader is None:
            return None
        return self.node if leader[0] == self.node.node_id else self.brokers.get(leader[0])

    def write_guard(self) -> Callable[[], bool]:
        return self.can_acknowledge

    def can_acknowledge(self) -> bool:
        """False once the ack lease ran out (see bmq.broker.membership.lease), and while the
        liveness channel is suspended (see bmq.broker.membership.channel)."""
        channel = self._channel
        return (self.reg != 0 and self.lease.valid()
                and not (channel is not None and channel.suspended))

    # ================================================================== registration
    def _registration(self) -> bytes:
        node = self.node
        return dumps({**node.registration(), "draining": self.draining,
                      "reports": reports.encode(self._reports)})

    async def _register(self) -> None:
        if self._registering:
            return
        self._registering = True
        try:
            loop = asyncio.get_running_loop()
            while True:
                try:
                    await loop.run_in_executor(self._executor, self._register_blocking)
                    break
                except Exception as error:
                    log.warning("registration failed (retrying): %s", error)
                    await asyncio.sleep(0.5)
        finally:
            self._registering = False
        self._session_lost = False
        if self._follower is not None:
            self._follower.wake()
        if self._channel is not None:
            self._channel.wake()

    def _register_blocking(self) -> None:
        assert self.zk is not None
        self.reg = register(self.zk, self.paths.broker(self.node.node_id), self.node.node_id,
                            self._registration, self.lease,
                            self.config.zookeeper_session_timeout_ms)

    async def _write_registration(self) -> None:
        if self.zk is None or self.reg == 0:
            return
        zk = self.zk
        path = self.paths.broker(self.node.node_id)
        data = self._registration()
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, zk.set, path, data)
        except Exception as error:
            log.warning("could not update registration: %s", error)

    async def _publisher(self) -> None:
        """Write state reports to the registration, coalescing bursts of changes."""
        while True:
            await self._publish.wait()
            self._publish.clear()
            await self._write_registration()

    def _report(self, tp: TopicPartition, epoch: int, state: str) -> None:
        # Only changes are written: every registration write fires every node's watch, and
        # each node's re-read drives its partitions again (which reports again).
        key, report = f"{tp[0]}/{tp[1]}", [epoch, state]
        if self._reports.get(key) != report:
            self._reports[key] = report
            self._publish.set()

    def _forget(self, tp: TopicPartition) -> None:
        if self._reports.pop(f"{tp[0]}/{tp[1]}", None) is not None:
            self._publish.set()

    # ================================================================== following ZooKeeper
    def _lose_session(self, why: str = "ZooKeeper session lost") -> None:
        """The session expired, or the controller removed our registration (it saw our liveness
        channel close): every right the registration carried is gone. Drop all partitions
        unflushed (what was acknowledged is durable already) and register again."""
        if self._session_lost:
            return
        log.error("%s: giving up every partition and registering again", why)
        self._session_lost = True
        self.lease.revoke()
        self.reg = 0
        self._reports.clear()
        for task in list(self._workers.values()):
            task.cancel()
        self._workers.clear()
        self._taken.clear()
        if self._channel is not None:
            self._channel.wake()
        if self._follower is not None:
            self._follower.wake()       # registers again once connected
        partitions = self._partitions
        if partitions is not None:
            for partition in list(partitions.all()):
                coordinator = self._coordinators.get(partition.topic)
                if coordinator is not None:
                    coordinator.unload_partition(partition.index)
                partitions.abandon(partition.topic, partition.index)

    async def _registered(self) -> bool:
        """Before each read: register again after a lost session, once connected."""
        if self.reg == 0:
            if self.zk is None or self.zk.state != KazooState.CONNECTED:
                return False
            await self._register()
        return True

    def _apply(self, snapshot: ClusterSnapshot) -> None:
        assert self._partitions is not None
        if self.reg != 0 and self.node.node_id not in snapshot.brokers:
            # Read after we registered, in our session: only a delete removes it, and only
            # the controller deletes another's registration (our channel closed).
            self._lose_session("this broker's registration was removed")
            return
        self.topics.replace_all(snapshot.topics)
        self.brokers = snapshot.brokers
        self.proxies = snapshot.proxies
        self.assignments = snapshot.assignments
        configs: dict[str, LogConfig | None] = {}     # a topic's, worked out once a read
        for partition in self._partitions.all():
            if partition.topic not in configs:
                info = self.topics.get(partition.topic)
                configs[partition.topic] = None if info is None else log_config(self.config,
                                                                                 info.configs)
            config = configs[partition.topic]
            if config is not None:
                partition.log.config = config
        self._drive_all()

    # ================================================================== ownership
    def _mine(self, topic: str, index: int) -> Assignment | None:
        a = self.assignments.get(topic, {}).get(str(index))
        if a is None or self.reg == 0:
            return None
        if int(a.get("owner", -1)) != self.node.node_id or a.get("reg") != self.reg:
            return None
        return a

    def _owned_assignments(self, topics: set[str] | None = None) -> list[TopicPartition]:
        return [(t, int(p)) for t, doc in self.assignments.items()
                if topics is None or t in topics for p in doc if self._mine(t, int(p)) is not None]

    def _drive_all(self) -> None:
        assert self._partitions is not None
        topics = self._scope.topics(self.assignments, self.reg)
        if topics == set():     # no document changed: nothing to look at
            return
        wanted: set[TopicPartition] = set(self._owned_assignments(topics))
        held = {(p.topic, p.index) for p in self._partitions.all()} | set(self._taken.keys()) \
            | {(k.rsplit("/", 1)[0], int(k.rsplit("/", 1)[1])) for k in self._reports}
        for tp in wanted | (held if topics is None else {t for t in held if t[0] in topics}):
            if tp not in self._workers and not self._settled(tp):
                self._workers[tp] = asyncio.get_running_loop().create_task(self._drive(tp))

    def _settled(self, tp: TopicPartition) -> bool:
        """Whether ``_drive`` would find ``tp`` as its assignment wants it and leave it so (it
        is not started then: a task for each of 30,000 partitions at every read of the
        cluster kept the event loop busy and starved the ZooKeeper session)."""
        assert self._partitions is not None
        a = self._mine(*tp)
        partition = self._partitions.get(*tp)
        key = f"{tp[0]}/{tp[1]}"
        if a is None:
            return partition is None and self._taken.epoch(tp) is None \
                and key not in self._reports
        epoch = int(a["epoch"])
        held = partition.leader_epoch if partition is not None else self._taken.epoch(tp)
        return (not a.get("draining") and held == epoch
                and self._reports.get(key) == [epoch, WRITABLE])

    async def _drive(self, tp: TopicPartition) -> None:
        """Move one partition towards what its assignment says, one step at a time."""
        assert self._partitions is not None
        partitions = self._partitions
        topic, index = tp
        try:
            while True:
                a = self._mine(topic, index)
                partition = partitions.get(topic, index)
                taken = self._taken.epoch(tp)
                if a is not None and not a.get("draining"):
                    epoch = int(a["epoch"])
                    held = partition.leader_epoch if partition is not None else taken
                    if held == epoch:
                        self._report(tp, epoch, WRITABLE)
                        return
                    if partition is not None:
                        await self._handing().release(tp, partition.leader_epoch, delete=False)
                        continue
                    if taken is not None:       # for an older epoch
                        await self._taken.drop(tp)
                        continue
                    if self._handing().opened_on_first_use(topic):
                        self._taken.take(tp, epoch)
                        self._report(tp, epoch, WRITABLE)
                        return
                    try:
                        await self._handing().acquire(tp, epoch)
                    except FencedEpochError as error:
                        self._fenced(tp, epoch, error)
                        await asyncio.sleep(0.5)
                    except Exception as error:
                        log.warning("could not take %s-%d with epoch %d: %s",
                                    topic, index, epoch, error)
                        await asyncio.sleep(0.5)
                    continue
                if taken is not None:
                    await self._taken.drop(tp)      # (an open under way may have ended)
                    if partitions.get(topic, index) is None and a is None \
                            and await self._topic_deleted(topic):
                        # Its data goes with the topic: claimed now, it is deleted below as
                        # an open partition's is (a previous owner's files are there).
                        try:
                            await self._handing().open(tp, taken, deleted=True)
                        except Exception as error:
                            log.warning("%s-%d of a deleted topic not claimed to be deleted: "
                                        "%s", topic, index, error)
                    continue
                if partition is not None:
                    deleted = a is None and await self._topic_deleted(topic)
                    await self._handing().release(tp, partition.leader_epoch, delete=deleted)
                    continue
                if a is not None:   # draining: tell the controller it is ours no more
                    self._report(tp, int(a["epoch"]), RELEASED)
                else:
                    self._forget(tp)
                return
        finally:
            if self._workers.get(tp) is asyncio.current_task():
                del self._workers[tp]

    def _fenced(self, tp: TopicPartition, epoch: int, error: FencedEpochError) -> None:
        """Storage has seen a higher epoch (ZooKeeper state older than the data): tell the
        controller, which assigns an epoch above it."""
        top = error.current_epoch
        log.warning("%s-%d: epoch %d is fenced on storage (highest %d)", *tp, epoch, top)
        self._reports[f"{tp[0]}/{tp[1]}"] = [epoch, FENCED, top]
        self._publish.set()

    async def open_taken(self, topic: str, index: int) -> None:
        try:
            await self._taken.open((topic, index))
        except FencedEpochError:
            pass            # not ours: the request is answered NOT_LEADER_OR_FOLLOWER
        except OSError as error:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"could not open {topic}/{index}: {error}") from error

    async def _open_taken(self, tp: TopicPartition, epoch: int) -> None:
        try:
            await self._handing().open(tp, epoch)
        except FencedEpochError as error:
            self._fenced(tp, epoch, error)
            raise

    async def _topic_deleted(self, topic: str) -> bool:
        """Whether ``topic`` is gone from ZooKeeper itself. Not the cache: a watcher's re-read
        that started before the delete can put the topic back into it for a moment, and a
        released partition of a deleted topic must take its data with it."""
        assert self.zk is not None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, self.zk.exists, self.paths.topic(topic)) is None

    def _handing(self) -> Handover:
        assert self._handover is not None, "started"
        return self._handover

    def owned(self) -> Iterable[TopicPartition]:
        return list(self._owned_assignments())
