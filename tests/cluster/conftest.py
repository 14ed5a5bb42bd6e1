"""Real clusters for the cluster-mode tests: a ZooKeeper server, `bmq controller` and several
`bmq broker` processes on one shared storage, all on 127.0.0.1 with free ports.

Fixtures: ``zookeeper`` (one server per module), ``cluster_factory`` (``cluster_factory(brokers=3,
storage=...)`` starts a controller and brokers; everything is killed when the test ends),
``shared_storage`` (each test that takes it runs on a shared directory and on S3: the session's
SeaweedFS, ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from bmq.metadata.zookeeper.layout import WRITABLE, Paths, connect, ensure_layout
from bmq.metadata.zookeeper.state import PartitionState, partition_states
from tests.cluster.zookeeper import ZooKeeper, available
from tests.conftest import _LIVE_PROCESSES, BrokerProcess, bmq_command, free_port
from tests.hdfs import MiniHdfs
from tests.seaweedfs import SeaweedFS

SESSION_TIMEOUT_MS = 2000

@dataclass(frozen=True)
class SharedStorage:
    """Where a test cluster keeps its partitions: ``None`` for a fresh shared directory."""

    url: str | None
    options: dict[str, str]


@pytest.fixture(params=["file", "s3", pytest.param("hdfs", marks=pytest.mark.slow)])
def shared_storage(request: pytest.FixtureRequest) -> SharedStorage:
    """A directory every broker shares, S3 (SeaweedFS) or HDFS (MiniDFSCluster, with the
    NameNode's web address: readers of a segment another process writes need it). On HDFS a
    test runs in the slow set unless it asks for it (``indirect`` parametrization)."""
    if request.param == "file":
        return SharedStorage(None, {})
    if request.param == "hdfs":
        hdfs: MiniHdfs = request.getfixturevalue("mini_hdfs")
        return SharedStorage(hdfs.url(f"c-{time.time_ns()}"), hdfs.storage_options())
    server: SeaweedFS = request.getfixturevalue("seaweedfs")
    return SharedStorage(server.url(f"c-{time.time_ns()}"), server.storage_options())


@pytest.fixture
def zk(zookeeper: ZooKeeper) -> Iterator[tuple[KazooClient, Paths]]:
    """A client of the module's ZooKeeper and a fresh root laid out for a cluster."""
    client = connect(zookeeper.hosts, 5000)
    paths = Paths(f"/unit-{uuid.uuid4().hex[:8]}")
    ensure_layout(client, paths)
    try:
        yield client, paths
    finally:
        client.stop()
        client.close()


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeper]:
    # No skipping: scripts/setup.sh --tests installs Debian's zookeeper package.
    assert available(), "ZooKeeper is not installed (apt-get install zookeeper)"
    server = ZooKeeper.start(tmp_path_factory.mktemp("zk"))
    try:
        yield server
    finally:
        server.stop()


def _env(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    env: dict[str, Any] = {
        "BMQ_ZOOKEEPER_SESSION_TIMEOUT_MS": SESSION_TIMEOUT_MS,
        "BMQ_OFFSETS_TOPIC_NUM_PARTITIONS": 6,
        "BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": 0,
        "BMQ_LOG_CHECKPOINT_INTERVAL_MS": 1000,
        "BMQ_DRAIN_TIMEOUT_MS": 20000,
    }
    env.update(extra or {})
    return env


class ClusterBroker(BrokerProcess):
    """`bmq broker --broker-id N` on the cluster's ZooKeeper and storage."""

    def __init__(self, workdir: Path, broker_id: int, zk_hosts: str, storage: str,
                 storage_options: dict[str, str], root: str, env: dict[str, Any]) -> None:
        super().__init__(workdir, env={**env, "BMQ_ZOOKEEPER_ROOT": root})
        self.metrics_port = 0
        self.broker_id = broker_id
        self.zk_hosts = zk_hosts
        self.storage = storage
        self.storage_options = storage_options

    def command(self) -> list[str]:
        cmd = [*self.limited(), *bmq_command(), "broker", "--zookeeper", self.zk_hosts,
               "--storage", self.storage,
               "--listen", self.bootstrap, "--broker-id", str(self.broker_id)]
        for key, value in self.storage_options.items():
            cmd += ["--storage-option", f"{key}={value}"]
        return cmd + self.extra_args

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)


class Cluster:
    def __init__(self, base: Path, zk: ZooKeeper, storage: str,
                 storage_options: dict[str, str], env: dict[str, Any]) -> None:
        self.base = base
        self.zk_server = zk
        # Unique per cluster: tests of one module share a ZooKeeper server, and a cluster must
        # not find the previous test's topics, assignments and not-yet-expired registrations.
        self.root = f"/bmq-{base.parent.name}-{base.name}"
        self.paths = Paths(self.root)
        self.storage = storage
        self.storage_options = storage_options
        self.env = env
        self.brokers: dict[int, ClusterBroker] = {}
        self.controllers: list[subprocess.Popen[bytes]] = []
        self.controller_metrics_ports: list[int] = []
        self.zk = KazooClient(hosts=zk.hosts, timeout=10)
        self.zk.start(15)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.is_running())

    def start_controller(self, metrics: bool = False) -> subprocess.Popen[bytes]:
        """A `bmq controller`; with ``metrics`` its port is in ``controller_metrics_ports``."""
        log_path = self.base / f"controller{len(self.controllers)}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("BMQ_")}
        env.update({k: str(v) for k, v in self.env.items()})
        env.update(BMQ_ZOOKEEPER_ROOT=self.root, PYTHONUNBUFFERED="1")
        cmd = [*bmq_command(), "controller", "--zookeeper", self.zk_server.hosts,
               "--storage", self.storage]
        for key, value in self.storage_options.items():
            cmd += ["--storage-option", f"{key}={value}"]
        if metrics:
            self.controller_metrics_ports.append(free_port())
            cmd += ["--metrics-port", str(self.controller_metrics_ports[-1])]
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    env=env, start_new_session=True)
        _LIVE_PROCESSES.add(proc)
        self.controllers.append(proc)
        return proc

    def add_broker(self, broker_id: int, start: bool = True,
                   metrics: bool = False) -> ClusterBroker:
        broker = ClusterBroker(self.base / f"broker{broker_id}", broker_id, self.zk_server.hosts,
                               self.storage, self.storage_options, self.root, self.env)
        if metrics:
            broker.metrics_port = free_port()
            broker.extra_args += ["--metrics-port", str(broker.metrics_port)]
        self.brokers[broker_id] = broker
        if start:
            broker.start()
        return broker

    def states(self, topic: str | None = None) -> list[PartitionState]:
        return [s for s in partition_states(self.zk, self.paths)
                if topic is None or s.topic == topic]

    def wait_for(self, check: Callable[[], bool], timeout: float, what: str) -> float:
        """Poll ``check`` until true; returns the seconds it took."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            with contextlib.suppress(Exception):
                if check():
                    return time.monotonic() - start
            time.sleep(0.02)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; states: "
                             f"{self.states()}\n{self.logs()}")

    def wait_writable(self, topic: str, owners: set[int] | None = None,
                      timeout: float = 30.0) -> float:
        def check() -> bool:
            states = self.states(topic)
            return bool(states) and all(
                s.state == WRITABLE and (owners is None or s.owner in owners) for s in states)
        return self.wait_for(check, timeout, f"{topic} writable on {owners}")

    def owners(self, topic: str) -> dict[int, int]:
        return {s.partition: s.owner for s in self.states(topic)}

    def logs(self, chars: int = 3000) -> str:
        parts = []
        for path in sorted(self.base.glob("controller*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-chars:]}")
        for broker in self.brokers.values():
            parts.append(f"--- broker {broker.broker_id}\n{broker.log_tail(chars)}")
        return "\n".join(parts)

    def cleanup(self) -> None:
        for broker in self.brokers.values():
            with contextlib.suppress(Exception):
                broker.resume() if broker.is_running() else None
            broker.cleanup()
        for proc in self.controllers:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            _LIVE_PROCESSES.discard(proc)
        self.zk.stop()
        self.zk.close()


class ClusterFactory:
    def __init__(self, base: Path, zk: ZooKeeper) -> None:
        self.base = base
        self.zk = zk
        self.clusters: list[Cluster] = []

    def __call__(self, brokers: int = 3, storage: SharedStorage | None = None,
                 env: dict[str, Any] | None = None, metrics: bool = False) -> Cluster:
        """With ``metrics`` every process gets a free ``--metrics-port`` (``.metrics_port``)."""
        base = self.base / f"c{len(self.clusters)}"
        base.mkdir()
        url, options = (storage.url, storage.options) if storage else (None, {})
        if url is None:
            (base / "shared").mkdir()
            url = f"file://{base / 'shared'}"
        cluster = Cluster(base, self.zk, url, options, _env(env))
        self.clusters.append(cluster)
        cluster.start_controller(metrics)
        for broker_id in range(1, brokers + 1):
            cluster.add_broker(broker_id, metrics=metrics)
        return cluster

    def cleanup(self) -> None:
        for cluster in self.clusters:
            cluster.cleanup()


@pytest.fixture
def cluster_factory(tmp_path_factory: pytest.TempPathFactory,
                    zookeeper: ZooKeeper) -> Iterator[ClusterFactory]:
    factory = ClusterFactory(tmp_path_factory.mktemp("cluster"), zookeeper)
    try:
        yield factory
    finally:
        factory.cleanup()
