"""A BMQ cluster of real hosts on one machine, for the fault tests: a ZooKeeper ensemble of
three servers (so its leader can be cut off), two controllers (one active), three brokers, a
proxy and SeaweedFS (S3 storage, so a broker can be cut off from it), each process on its own
host (``hosts.py``) listening on its host's address only.

The BMQ processes run under ``clock.py``'s clock, so a nemesis can jump it; ``FaultCluster``
is also the ``Processes`` of ``nemesis.py`` (kill -9, restart, SIGSTOP, SIGCONT by host)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient

from bmq.local.zookeeper import CLASSPATH, MAIN
from bmq.metadata.zookeeper.layout import WRITABLE, Paths, loads
from bmq.metadata.zookeeper.state import PartitionState, partition_states
from tests.conftest import bmq_command
from tests.faults.clock import Clock
from tests.faults.history import History
from tests.faults.hosts import Host, Network
from tests.faults.nemesis import Nemesis
from tests.faults.workload import Endpoints
from tests.seaweedfs import SeaweedFS

ZOOKEEPERS = ("zk1", "zk2", "zk3")
CONTROLLERS = ("controller1", "controller2")
BROKERS = ("broker1", "broker2", "broker3")
PROXY = "proxy"
S3 = "s3"
HOSTS = (*ZOOKEEPERS, *CONTROLLERS, *BROKERS, PROXY, S3)
BMQ_HOSTS = (*CONTROLLERS, *BROKERS, PROXY)

KAFKA_PORT = 9092
ZOOKEEPER_PORT = 2181
SESSION_TIMEOUT_MS = 3000
_ZK_TICK_MS = 500
_START_TIMEOUT_S = 60.0
_PATHS = Paths("/bmq")


@dataclass
class HostProcess:
    """The process a host runs, started again with the same command after a kill."""

    host: Host
    command: list[str]
    log: Path
    ready: Callable[[], bool]
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    paused: bool = False
    killed: bool = False    # by kill(): its exit is the nemesis's doing
    exits: list[int] = field(default_factory=list)    # exit codes of the exits nobody caused

    def start(self) -> None:
        assert not self.running(), f"{self.host.name} runs already"
        if self.proc is not None and not self.killed:
            self.exits.append(self.proc.returncode)
        self.killed = False
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            log.write(f"\n===== start: {' '.join(self.command)}\n".encode())
        self.proc = self.host.popen(self.command, env=self.env, log=self.log,
                                    cwd=self.log.parent)
        self.paused = False

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout: float = _START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if not self.running():
                raise RuntimeError(f"{self.host.name} exited:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.host.name} not ready within {timeout} s:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.1)

    def signal(self, signum: int) -> None:
        if self.running():
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signum)

    def kill(self) -> None:
        self.killed = True
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(10)
        self.paused = False

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-chars:]
        return ""


def accepts(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False


def four_letter_word(address: str, word: str) -> str:
    """ZooKeeper's answer to ``ruok``, ``srvr``, ``mntr`` ('' when it does not answer)."""
    try:
        with socket.create_connection((address, ZOOKEEPER_PORT), timeout=2) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class FaultCluster:
    """Start with ``FaultCluster.start(directory)``; ``stop()`` removes everything."""

    def __init__(self, directory: Path, network: Network, storage: str = "s3") -> None:
        self.directory = directory
        self.network = network
        self.hosts = network.hosts
        self.processes: dict[str, HostProcess] = {}
        self.clocks = {name: Clock(self._dir(name)) for name in BMQ_HOSTS}
        self.seaweedfs: SeaweedFS | None = None
        self.zookeeper = ",".join(f"{self.hosts[zk].address}:{ZOOKEEPER_PORT}"
                                  for zk in ZOOKEEPERS)
        # file://: a directory every host shares (no host of its own: cannot be cut off).
        self.storage = "s3://bmq/faults" if storage == "s3" else f"file://{directory}/storage"
        self.storage_options: dict[str, str] = {}
        self._zk: KazooClient | None = None
        self._nemeses: list[Nemesis] = []
        self.start_seconds = 0.0
        self.start_phases: dict[str, float] = {}    # seconds from the start to each one up

    def _dir(self, name: str) -> Path:
        path = self.directory / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    @classmethod
    def start(cls, directory: Path, storage: str = "s3") -> FaultCluster:
        """``storage``: "s3" (SeaweedFS on a host of its own) or "file"."""
        began = time.monotonic()
        cluster = cls(directory, Network(HOSTS), storage)
        try:
            cluster._start()
        except BaseException:
            cluster.stop()
            raise
        cluster.start_seconds = time.monotonic() - began
        return cluster

    def _start(self) -> None:
        began = time.monotonic()
        for index, name in enumerate(ZOOKEEPERS, start=1):
            self._add_zookeeper(index, name)
        if self.storage.startswith("s3://"):
            self.seaweedfs = SeaweedFS.start(self._dir(S3), host=self.hosts[S3].address,
                                             launch=self._launch_s3)
            self.storage_options = self.seaweedfs.storage_options()
        self.start_phases["s3"] = time.monotonic() - began
        for name in ZOOKEEPERS:
            self.processes[name].wait_ready()
        self.wait_for(lambda: self.zookeeper_leader() is not None, "a ZooKeeper leader")
        self._zk = KazooClient(hosts=self.zookeeper, timeout=10)
        self._zk.start(30)
        self.start_phases["zookeeper"] = time.monotonic() - began
        for name in BMQ_HOSTS:
            self._add_bmq(name)
        self.wait_ready()
        self.start_phases["bmq"] = time.monotonic() - began

    def _launch_s3(self, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        address = self.hosts[S3].address
        port = int(next(arg for arg in args if arg.startswith("-s3.port=")).split("=")[1])
        process = HostProcess(self.hosts[S3], args, log, lambda: accepts(address, port))
        self.processes[S3] = process
        process.start()
        assert process.proc is not None
        return process.proc

    def _add_zookeeper(self, my_id: int, name: str) -> None:
        host = self.hosts[name]
        workdir = self._dir(name)
        (workdir / "data").mkdir(exist_ok=True)
        (workdir / "data" / "myid").write_text(f"{my_id}\n")
        settings = {
            "tickTime": _ZK_TICK_MS, "initLimit": 20, "syncLimit": 6,
            "dataDir": workdir / "data", "clientPort": ZOOKEEPER_PORT,
            "clientPortAddress": host.address, "minSessionTimeout": 2 * _ZK_TICK_MS,
            "maxSessionTimeout": 60000, "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,mntr", "forceSync": "no",
            **{f"server.{index}": f"{self.hosts[zk].address}:2888:3888"
               for index, zk in enumerate(ZOOKEEPERS, start=1)},
        }
        config = workdir / "zoo.cfg"
        config.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        command = ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   f"-Dzookeeper.log.dir={workdir}", "-Dzookeeper.root.logger=INFO,CONSOLE",
                   "-Dzookeeper.console.threshold=INFO", "-cp", CLASSPATH, MAIN, str(config)]
        process = HostProcess(host, command, workdir / "zookeeper.log",
                              lambda: four_letter_word(host.address, "ruok") == "imok")
        self.processes[name] = process
        process.start()

    def _add_bmq(self, name: str) -> None:
        host = self.hosts[name]
        role = name.rstrip("0123456789")
        listen = f"{host.address}:{KAFKA_PORT}"
        command = [*bmq_command(), role, "--zookeeper", self.zookeeper, "--storage",
                   self.storage, "--session-timeout-ms", str(SESSION_TIMEOUT_MS)]
        for key, value in self.storage_options.items():
            command += ["--storage-option", f"{key}={value}"]
        if role != "controller":
            command += ["--listen", listen]
        if role == "broker":
            command += ["--broker-id", name.removeprefix("broker")]
        env = {key: value for key, value in os.environ.items() if not key.startswith("BMQ_")}
        env.update(self.clocks[name].env())
        env.update({
            "PYTHONUNBUFFERED": "1",
            "BMQ_LISTEN": listen,      # the controller's liveness channel binds its host
            "BMQ_OFFSETS_TOPIC_NUM_PARTITIONS": "6",
            "BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
            "BMQ_LOG_CHECKPOINT_INTERVAL_MS": "1000",
            "BMQ_DRAIN_TIMEOUT_MS": "5000",
        })
        ready = ((lambda: True) if role == "controller"
                 else (lambda: accepts(host.address, KAFKA_PORT)))
        process = HostProcess(host, command, self._dir(name) / f"{name}.log", ready, env)
        self.processes[name] = process
        process.start()

    # ------------------------------------------------------------------ what clients use
    def endpoints(self) -> Endpoints:
        bootstrap = ",".join(f"{self.hosts[b].address}:{KAFKA_PORT}" for b in BROKERS)
        proxy = f"{self.hosts[PROXY].address}:{KAFKA_PORT}"
        # Admin clients go through the proxy, as an application's would: bootstrapped on the
        # brokers, whose Metadata names only the proxy, librdkafka drops the bootstrap
        # connections and may fail a first request sent on one (_DESTROY_BROKER, seen once).
        return Endpoints(bootstrap=bootstrap, proxy=proxy, admin=proxy)

    def broker_id(self, name: str) -> int:
        return int(name.removeprefix("broker"))

    # ------------------------------------------------------------------ what the cluster knows
    @property
    def zk(self) -> KazooClient:
        assert self._zk is not None
        return self._zk

    def zookeeper_leader(self) -> str | None:
        """The host of ZooKeeper's leader, None while there is none (no quorum)."""
        for name in ZOOKEEPERS:
            if "Mode: leader" in four_letter_word(self.hosts[name].address, "srvr"):
                return name
        return None

    def active_controller(self) -> str | None:
        with contextlib.suppress(Exception):
            pid = loads(self.zk.get(_PATHS.controller)[0])["pid"]
            for name in CONTROLLERS:
                proc = self.processes[name].proc
                if proc is not None and proc.pid == pid:
                    return name
        return None

    def registered_brokers(self) -> set[int]:
        return {int(child) for child in self.zk.get_children(_PATHS.brokers)}

    def states(self, topic: str | None = None) -> list[PartitionState]:
        return [s for s in partition_states(self.zk, _PATHS)
                if topic is None or s.topic == topic]

    def owners(self, topic: str) -> dict[int, int]:
        return {s.partition: s.owner for s in self.states(topic)}

    def wait_writable(self, topic: str, owners: set[int] | None = None,
                      timeout: float = 30.0) -> float:
        """Seconds until every partition of ``topic`` is writable (on one of ``owners``)."""
        def check() -> bool:
            states = self.states(topic)
            return bool(states) and all(s.state == WRITABLE and (owners is None or
                                                                 s.owner in owners)
                                        for s in states)
        return self.wait_for(check, f"{topic} writable on {owners}", timeout)

    def wait_for(self, check: Callable[[], bool], what: str,
              timeout: float = _START_TIMEOUT_S) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            with contextlib.suppress(Exception):
                if check():
                    return time.monotonic() - start
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{self.logs()}")

    def wait_ready(self, timeout: float = _START_TIMEOUT_S) -> None:
        """Every process up, an active controller, every broker registered."""
        for process in self.processes.values():
            process.wait_ready(timeout)
        self.wait_for(lambda: self.active_controller() is not None, "an active controller",
                   timeout)
        self.wait_for(lambda: self.registered_brokers() == {self.broker_id(b) for b in BROKERS},
                   "every broker registered", timeout)

    def logs(self, chars: int = 2000) -> str:
        return "\n".join(f"--- {name} ({process.log})\n{process.log_tail(chars)}"
                         for name, process in self.processes.items())

    # ------------------------------------------------------------------ faults
    def nemesis(self, history: History | None = None) -> Nemesis:
        """A nemesis of this cluster's hosts and processes; ``heal()`` heals it too."""
        nemesis = Nemesis(self.network, self, history)
        self._nemeses.append(nemesis)
        return nemesis

    def kill(self, host: str) -> None:
        self.processes[host].kill()

    def unexpected_exits(self) -> dict[str, list[int]]:
        """The exit codes of the processes that exited without a kill (then restarted by the
        nemesis or ``heal()``), or are not running now though nobody killed them, by host."""
        found = {}
        for name, process in self.processes.items():
            codes = list(process.exits)
            if not process.running() and not process.killed and process.proc is not None:
                codes.append(process.proc.returncode)
            if codes:
                found[name] = codes
        return found

    def restart(self, host: str) -> None:
        """Start the host's process again if it is not running (not waiting for it: a fault
        may still cut it off; ``heal()`` waits)."""
        if not self.processes[host].running():
            self.processes[host].start()

    def pause(self, host: str) -> None:
        self.processes[host].pause()

    def resume(self, host: str) -> None:
        self.processes[host].resume()

    def clock(self, host: str) -> Clock:
        return self.clocks[host]

    def heal(self, timeout: float = _START_TIMEOUT_S) -> None:
        """Undo every fault, resume and restart every process, wall clocks back to true, and
        wait until the cluster is whole again. A process that exited by itself is started
        again too: ``unexpected_exits()`` still tells."""
        errors = []
        for nemesis in self._nemeses:
            try:
                nemesis.heal()
            except Exception as exc:
                errors.append(exc)
        for clock in self.clocks.values():
            clock.set(0)
        for name, process in self.processes.items():
            if process.paused:
                process.resume()
            self.restart(name)
        self.wait_ready(timeout)
        if errors:
            raise errors[0]

    def stop(self) -> None:
        """Kill everything and remove the hosts."""
        for nemesis in self._nemeses:
            with contextlib.suppress(Exception):
                nemesis.heal()
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()
        for process in self.processes.values():
            process.resume()
            process.kill()
        self.network.close()
