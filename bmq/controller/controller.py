"""The controller: one active at a time (ZooKeeper election), it places partitions and drives them
through their states by writing ``/assignments``.

The partition state machine, per partition (the owner reports the middle states in its
registration, see ``bmq.broker.membership.cluster``)::

    assigned ──owner opens the log with the epoch──► recovering ──► writable
       ▲                                                               │ controller sets
       │  controller: new owner, epoch + 1                             ▼ "draining"
    released ◄──owner flushed its last batch and closed the log── draining

A partition whose owner's registration is gone skips draining: the controller gives it to a live
broker with epoch + 1 at once, and the storage epoch fence keeps anything the old owner might
still write invisible. A registration goes when the broker's ZooKeeper session expires (a frozen
or cut-off broker: its ack lease ran out before that), or at once when the broker's liveness
channel to this controller closes (its process died, ``bmq.controller.liveness``): the controller
deletes the registration itself.

Every write the controller makes is one ZooKeeper transaction that also checks
``/controller_epoch`` has not moved on, so a deposed controller cannot write anything.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import zlib
from typing import Any

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from bmq import metrics
from bmq.controller.liveness import ChannelSecurity, LivenessServer
from bmq.controller.placement import place
from bmq.metadata.views import is_view
from bmq.metadata.zookeeper import reports
from bmq.metadata.zookeeper.layout import (
    FENCED,
    RELEASED,
    RESYNC_INTERVAL_S,
    STATES,
    Paths,
    connect,
    dumps,
    ensure_cluster_id,
    ensure_layout,
    loads,
    start_retry,
    track_connection,
)
from bmq.metadata.zookeeper.state import states_of

log = logging.getLogger(__name__)

Assignment = dict[str, Any]

# The most a transaction of assignments carries, well under ZooKeeper's limit on a request
# (``jute.maxbuffer``, 1 MiB by default): a pass that moves a killed broker's share of 100,000
# partitions changes ~1,000 documents, some 6 MB, which as one transaction ZooKeeper refused, at
# every pass.
TRANSACTION_BYTES = 256 << 10


def next_assignments(topics: dict[str, int], assignments: dict[str, dict[str, Assignment]],
                     brokers: dict[int, tuple[int, dict[str, Any]]]
                     ) -> dict[str, dict[str, Assignment]]:
    """One step of the state machine for every partition: the assignment documents to write.

    ``topics``: partitions per topic; ``assignments``: current documents; ``brokers``: registered
    brokers, id -> (registration zxid, registration document with draining flag and reports).
    Returns the documents that change (an empty dict for a topic means delete it).
    """
    live = sorted(b for b, (_, doc) in brokers.items() if not doc.get("draining"))
    reported = {b: reports.decode(doc) for b, (_, doc) in brokers.items()}
    load: dict[int, int] = {}
    changes: dict[str, dict[str, Assignment]] = {}

    def alive(a: Assignment) -> bool:
        owner = int(a.get("owner", -1))
        return owner in brokers and brokers[owner][0] == a.get("reg")

    def give(owner: int | None, epoch: int) -> Assignment:
        if owner is None:
            return {"owner": -1, "reg": 0, "epoch": epoch, "draining": False}
        return {"owner": owner, "reg": brokers[owner][0], "epoch": epoch + 1, "draining": False}

    for name in sorted(topics):
        count = topics[name]
        doc = assignments.get(name, {})
        current: dict[int, int | None] = {}
        for p in range(count):
            a = doc.get(str(p))
            if a is not None and alive(a) and not a.get("draining") and a["owner"] in live:
                current[p] = int(a["owner"])
        desired = place(count, current, live, load, offset=zlib.crc32(name.encode()))
        new = {k: v for k, v in doc.items() if int(k) < count}
        for p in range(count):
            key = str(p)
            a = doc.get(key)
            target = desired[p]
            if a is None or int(a.get("owner", -1)) < 0:
                epoch = int(a["epoch"]) if a else 0
                if target is not None:
                    new[key] = give(target, epoch)
                elif a is None:
                    new[key] = give(None, 0)
                continue
            epoch = int(a["epoch"])
            if not alive(a):
                new[key] = give(target, epoch)
                continue
            owner = int(a["owner"])
            report = reported[owner].get(f"{name}/{p}")
            if (isinstance(report, list) and len(report) == 3 and report[0] == epoch
                    and report[1] == FENCED and not a.get("draining")):
                # The owner found a higher epoch on storage: reassign above it.
                new[key] = {**give(owner, max(epoch, int(report[2]))),
                            "owner": owner, "reg": a["reg"]}
                continue
            if target == owner and not a.get("draining"):
                continue
            if not a.get("draining"):
                new[key] = {**a, "draining": True}
                continue
            if report == [epoch, RELEASED]:
                new[key] = give(target, epoch)
        if new != doc:
            changes[name] = new
    for name in assignments:
        if name not in topics:
            changes[name] = {}
    return changes


class Controller:
    def __init__(self, zookeeper: str, root: str, session_timeout_ms: int,
                 storage_url: str = "", storage_options: dict[str, str] | None = None,
                 listen_host: str = "127.0.0.1", advertise_host: str = "",
                 channel_security: ChannelSecurity | None = None) -> None:
        self.zookeeper = zookeeper
        self.paths = Paths(root)
        self.session_timeout_ms = session_timeout_ms
        self.storage_url = storage_url
        self.storage_options = storage_options or {}
        self._stop = threading.Event()
        self._changed = threading.Event()
        self._lost = threading.Event()
        self._zk: KazooClient | None = None
        self._epoch_version = -1
        self._active = False
        self._registered: dict[int, tuple[int, bool]] = {}    # as the last pass read them
        # Brokers' liveness channels, on an ephemeral port of the listen host; brokers find
        # it in /controller. A wildcard listen address is advertised as the host name.
        # Secured as the inter-broker listener is (``channel_security``; None: PLAINTEXT).
        self._channel_security = channel_security
        self._liveness = LivenessServer(listen_host, self._on_hello, self._on_channel_closed,
                                        channel_security)
        self._channel_host = advertise_host or (
            listen_host if listen_host not in ("", "0.0.0.0", "::") else socket.gethostname())
        self._gauges = metrics.controller()
        self._gauges.active.set(0)

    # ------------------------------------------------------------------ lifecycle
    def stop(self) -> None:
        self._stop.set()
        self._changed.set()

    def run(self) -> None:
        """Campaign, lead while elected, campaign again; until ``stop``."""
        if self.storage_url:
            from bmq.storage.factory import open_storage, unusable_storage

            storage = open_storage(self.storage_url, self.storage_options)
            try:
                storage.makedirs("topics")   # fail early on a storage the brokers could not use
            except OSError as error:
                raise unusable_storage(self.storage_url, error) from error
            storage.close()
        zk = self._zk = connect(self.zookeeper, self.session_timeout_ms)
        track_connection(zk)
        zk.add_listener(self._on_state)
        start_retry()(ensure_layout, zk, self.paths)
        if self._channel_security is not None:
            # The credentials and ACLs brokers' channels are checked against, before any.
            self._channel_security.load(zk, self.paths)
        self._liveness.start()
        cluster_id = ensure_cluster_id(zk, self.paths)
        log.info("controller connected to %s (cluster %s)", self.zookeeper, cluster_id)
        try:
            while not self._stop.is_set():
                if self._campaign(zk):
                    self._lead(zk)
                else:
                    self._changed.wait(RESYNC_INTERVAL_S)
                    self._changed.clear()
        finally:
            self._liveness.stop()
            zk.stop()
            zk.close()
            log.info("controller stopped")

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._lost.set()
        self._changed.set()

    def _trigger(self, *_args: object) -> None:
        self._changed.set()

    def _campaign(self, zk: KazooClient) -> bool:
        self._lost.clear()
        me = dumps({"host": socket.gethostname(), "pid": os.getpid(),
                    "channel": f"{self._channel_host}:{self._liveness.port}"})
        try:
            zk.create(self.paths.controller, me, ephemeral=True, makepath=True)
        except NodeExistsError:
            if zk.exists(self.paths.controller, watch=self._trigger) is not None:
                return False
            return self._campaign(zk)
        except Exception as error:
            log.warning("election attempt failed: %s", error)
            return False
        # Bump the controller epoch; every later write checks it (fences a deposed controller).
        zk.ensure_path(self.paths.controller_epoch)
        _, stat = zk.get(self.paths.controller_epoch)
        stat = zk.set(self.paths.controller_epoch, str(stat.version + 1).encode(),
                      version=stat.version)
        self._epoch_version = stat.version
        log.info("this controller is active (controller epoch %d)", self._epoch_version)
        return True

    def _lead(self, zk: KazooClient) -> None:
        self._gauges.active.set(1)
        self._active = True
        try:
            self._lead_until_deposed(zk)
        finally:
            self._active = False
            self._liveness.close_all()   # brokers find the next active controller
            # A standby's view would go stale: it exports only that it is not active.
            self._gauges.active.set(0)
            self._gauges.brokers.clear()
            self._gauges.partitions.clear()

    def _lead_until_deposed(self, zk: KazooClient) -> None:
        self._changed.set()
        while not self._stop.is_set() and not self._lost.is_set():
            self._changed.wait(RESYNC_INTERVAL_S)
            self._changed.clear()
            if self._stop.is_set() or self._lost.is_set():
                break
            try:
                self.reconcile(zk)
            except Exception as error:
                log.warning("reconcile failed (will retry): %s", error)
                self._stop.wait(0.1)
                self._changed.set()
        if self._lost.is_set():
            log.warning("ZooKeeper session lost: no longer the active controller")
        elif not self._stop.is_set():
            return
        else:
            with contextlib.suppress(Exception):
                zk.delete(self.paths.controller)

    # ------------------------------------------------------------------ liveness channels
    def _leading(self) -> bool:
        return self._active and not self._lost.is_set() and not self._stop.is_set()

    def _on_hello(self, broker: int, reg: int) -> bool | None:
        """A broker opens its channel: accept it if ``reg`` is its current registration."""
        zk = self._zk
        if zk is None or not self._leading():
            return None
        # A registration made a moment ago may not have reached our ZooKeeper server yet:
        # refused, the broker would give up every partition and register again.
        zk.sync(self.paths.broker(broker))
        stat = zk.exists(self.paths.broker(broker))
        return stat is not None and stat.czxid == reg

    def _on_channel_closed(self, broker: int, reg: int) -> None:
        """A broker's channel ended: its process is gone. Remove that incarnation's
        registration now (as its session's expiry would, later) and move its partitions."""
        zk = self._zk
        path = self.paths.broker(broker)
        for _ in range(5):
            if zk is None or not self._leading():
                return
            try:
                stat = zk.exists(path)
                if stat is None or stat.czxid != reg:
                    return      # already gone, or a new incarnation registered
                txn = zk.transaction()
                txn.check(self.paths.controller_epoch, self._epoch_version)
                txn.delete(path, version=stat.version)
                results = txn.commit()
            except Exception as error:
                log.warning("broker %d: could not remove its registration: %s", broker, error)
                return
            if not any(isinstance(r, Exception) for r in results):
                log.warning("broker %d's liveness channel closed: registration %d removed, "
                            "its partitions move now", broker, reg)
                self._changed.set()
                return
            if not any(isinstance(r, BadVersionError) for r in results[1:]):
                return      # the controller epoch moved on: not ours to do
            # The broker updated its registration meanwhile: read it again.

    # ------------------------------------------------------------------ one reconcile pass
    def _children(self, zk: KazooClient, path: str, watch: bool) -> dict[str, tuple[Any, Any]]:
        """Data and stat of every child of ``path``, fetched in parallel."""
        trigger = self._trigger if watch else None
        names = zk.get_children(path, watch=trigger)
        pending = [(name, zk.get_async(f"{path}/{name}", watch=trigger)) for name in names]
        found = {}
        for name, result in pending:
            try:
                found[name] = result.get()
            except NoNodeError:
                continue
        return found

    def _read(self, zk: KazooClient) -> tuple[dict[str, int], dict[str, dict[str, Assignment]],
                                              dict[str, int],
                                              dict[int, tuple[int, dict[str, Any]]]]:
        brokers = {int(child): (stat.czxid, loads(data) or {}) for child, (data, stat)
                   in self._children(zk, self.paths.brokers, watch=True).items()}
        # An operator's drain request (`bmq cluster drain`) counts as the broker's own draining
        # flag: placement leaves it out and its partitions move away the same way.
        for child in zk.get_children(self.paths.drain_requests, watch=self._trigger):
            if child.isdigit() and int(child) in brokers:
                czxid, doc = brokers[int(child)]
                brokers[int(child)] = (czxid, {**doc, "draining": True})
        # Views have no partitions of their own to place: their source's serve them.
        docs = {name: loads(data) for name, (data, _)
                in self._children(zk, self.paths.topics, watch=True).items()}
        topics = {name: int(doc["partitions"]) for name, doc in docs.items()
                  if not is_view(doc.get("configs", {}))}
        assignments: dict[str, dict[str, Assignment]] = {}
        versions: dict[str, int] = {}
        for name, (data, stat) in self._children(zk, self.paths.assignments, False).items():
            assignments[name] = loads(data) or {}
            versions[name] = stat.version
        return topics, assignments, versions, brokers

    def _export(self, topics: dict[str, int], assignments: dict[str, dict[str, Assignment]],
                brokers: dict[int, tuple[int, dict[str, Any]]]) -> None:
        """Set the gauges from what this pass read (before it writes anything)."""
        draining = sum(1 for _, doc in brokers.values() if doc.get("draining"))
        self._gauges.brokers.labels("false").set(len(brokers) - draining)
        self._gauges.brokers.labels("true").set(draining)
        counts = dict.fromkeys(STATES, 0)
        for partition in states_of(topics, assignments,
                                   {b: doc for b, (_, doc) in brokers.items()}):
            counts[partition.state] = counts.get(partition.state, 0) + 1
        for state, count in counts.items():
            self._gauges.partitions.labels(state).set(count)

    def reconcile(self, zk: KazooClient) -> None:
        topics, assignments, versions, brokers = self._read(zk)
        self._export(topics, assignments, brokers)
        registered = {b: (reg, bool(doc.get("draining"))) for b, (reg, doc) in brokers.items()}
        if registered != self._registered:
            self._registered = registered
            log.info("registered brokers: %s", ", ".join(
                f"{b} (registration {reg}{', draining' if draining else ''})"
                for b, (reg, draining) in sorted(registered.items())) or "none")
        changes = next_assignments(topics, assignments, brokers)
        if not changes:
            return
        self._write(zk, changes, versions)
        log.info("assignments updated for %d topic(s) (%s): %s", len(changes),
                 describe_changes(assignments, changes), ", ".join(sorted(changes)[:10]))

    def _write(self, zk: KazooClient, changes: dict[str, dict[str, Assignment]],
               versions: dict[str, int]) -> None:
        """Write the changed documents in transactions of at most ``TRANSACTION_BYTES``, each
        checking the controller epoch. Each document is a step of its partitions' state machine
        on its own, so a pass cut short after some transactions leaves a valid state; the next
        pass reads it and goes on."""
        txn, size = None, 0
        for name, doc in changes.items():
            data = dumps(doc) if doc else b""
            if txn is None or size + len(data) > TRANSACTION_BYTES:
                if txn is not None:
                    _commit(txn)
                txn, size = zk.transaction(), 0
                txn.check(self.paths.controller_epoch, self._epoch_version)
            path = self.paths.assignment(name)
            if not doc:
                txn.delete(path, version=versions[name])
            elif name in versions:
                txn.set_data(path, data, version=versions[name])
            else:
                txn.create(path, data)
            size += len(data) + len(path)
        if txn is not None:
            _commit(txn)


def _commit(txn: TransactionRequest) -> None:
    results = txn.commit()
    failures = [r for r in results if isinstance(r, Exception)]
    if failures:
        raise RuntimeError(f"assignment transaction failed: {failures[0]!r}")


def describe_changes(before: dict[str, dict[str, Assignment]],
             changes: dict[str, dict[str, Assignment]]) -> str:
    """What a pass changed, by partition: how many each broker was given, how many are asked
    to drain (their owner must release them first) and how many have no owner."""
    given: dict[int, int] = {}
    draining = unowned = 0
    for name, doc in changes.items():
        for key, a in doc.items():
            old = before.get(name, {}).get(key)
            owner = int(a.get("owner", -1))
            if owner < 0:
                unowned += old is None or int(old.get("owner", -1)) >= 0
            elif old is not None and old.get("epoch") == a.get("epoch"):
                draining += bool(a.get("draining")) and not old.get("draining")
            else:
                given[owner] = given.get(owner, 0) + 1
    parts = [f"{count} to broker {owner}" for owner, count in sorted(given.items())]
    parts += [f"{draining} draining"] * bool(draining) + [f"{unowned} unowned"] * bool(unowned)
    return ", ".join(parts) or "no move"


def run_controller(zookeeper: str, root: str, session_timeout_ms: int, storage_url: str,
                   storage_options: dict[str, str], metrics_port: int = 0,
                   metrics_host: str = "", advertise_host: str = "",
                   channel_security: ChannelSecurity | None = None) -> None:
    """``metrics_host`` is the listen host: the metrics and the brokers' liveness channels
    (an ephemeral port, published in /controller as ``advertise_host``) bind it."""
    controller = Controller(zookeeper, root, session_timeout_ms, storage_url, storage_options,
                            metrics_host or "127.0.0.1", advertise_host, channel_security)
    server = metrics.serve_for_role(metrics_port, metrics_host) if metrics_port else None
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: controller.stop())
    try:
        controller.run()
    finally:
        metrics.stop(server)
