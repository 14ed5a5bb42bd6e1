"""The processes of a local cluster: started in order (ZooKeeper, the controller, the brokers,
the proxy), each checked to be up before the next, watched while they run, and stopped in the
reverse order."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bmq.local.zookeeper import ZooKeeperServer
from bmq.startup import ExitCode, StartupError

# A broker stopping moves its partitions to the others first (drain.timeout.ms, 30 s by
# default); when the whole cluster stops there is no other broker to move them to.
_DRAIN_TIMEOUT_MS = 2000
_UP_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 20.0


@dataclass
class Process:
    """One ``bmq`` role of the cluster."""

    name: str                # "controller", "broker 1", "proxy"
    args: list[str]          # after ``bmq``
    address: str = ""        # HOST:PORT clients use; empty for the controller
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()


class LocalCluster:
    """ZooKeeper, a controller, ``brokers`` brokers on ports ``port``, ``port + 1``, ... and,
    with ``proxy``, a proxy on the next port; ``file://`` storage, ZooKeeper's data and every
    log under ``directory``."""

    def __init__(self, directory: Path, brokers: int, proxy: bool, port: int,
                 zookeeper_port: int, log_level: str = "INFO") -> None:
        self.directory = directory.resolve()
        self.zookeeper_port = zookeeper_port
        self.storage = f"file://{self.directory / 'storage'}"
        self.logs = self.directory / "logs"
        self.log_level = log_level
        self.zookeeper: ZooKeeperServer | None = None
        zookeeper = f"127.0.0.1:{zookeeper_port}"
        shared = ["--zookeeper", zookeeper, "--storage", self.storage, "--log-level", log_level]
        self.processes = [Process("controller", ["controller", *shared])]
        for broker_id in range(1, brokers + 1):
            address = f"127.0.0.1:{port + broker_id - 1}"
            self.processes.append(Process(
                f"broker {broker_id}",
                ["broker", *shared, "--broker-id", str(broker_id), "--listen", address],
                address))
        if proxy:
            address = f"127.0.0.1:{port + brokers}"
            self.processes.append(Process("proxy", ["proxy", *shared, "--listen", address],
                                          address))

    @property
    def brokers(self) -> list[Process]:
        return [p for p in self.processes if p.name.startswith("broker")]

    @property
    def proxy(self) -> Process | None:
        return next((p for p in self.processes if p.name == "proxy"), None)

    def log_path(self, process: Process) -> Path:
        return self.logs / f"{process.name.replace(' ', '')}.log"

    def start(self) -> None:
        """Start everything, each up before the next; on a failure what was started is stopped
        and a ``StartupError`` names the process and ends with its log's last lines."""
        for port in [self.zookeeper_port, *(_port(p.address) for p in self.processes if p.address)]:
            if not _free(port):
                raise StartupError(f"port {port} of 127.0.0.1 is in use (a bmq serve or another "
                                   f"bmq local running?); choose others with --port and "
                                   f"--zookeeper-port", ExitCode.ADDRESS_IN_USE)
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.directory / "storage").mkdir(exist_ok=True)
        try:
            self.zookeeper = ZooKeeperServer.start(self.directory / "zookeeper",
                                                   self.zookeeper_port)
            for process in self.processes:
                self._start(process)
            for process in self.processes:
                self._wait_up(process)
        except BaseException:
            self.stop()
            raise

    def _start(self, process: Process) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "BMQ_DRAIN_TIMEOUT_MS": str(_DRAIN_TIMEOUT_MS)}
        with open(self.log_path(process), "ab") as log:
            process.proc = subprocess.Popen(
                [sys.executable, "-m", "bmq", *process.args], stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, env=env, start_new_session=True)

    def _wait_up(self, process: Process) -> None:
        deadline = time.monotonic() + _UP_TIMEOUT_S
        while True:
            code = process.exit_code
            if code is not None:
                known = code in ExitCode._value2member_map_
                raise StartupError(self.exited(process), ExitCode(code) if known else
                                   ExitCode.FAILED)
            if not process.address or _accepts(process.address):
                return
            if time.monotonic() > deadline:
                raise StartupError(f"{process.name} did not accept connections on "
                                   f"{process.address} within {_UP_TIMEOUT_S:.0f} s; its log, "
                                   f"{self.log_path(process)}:\n{self._tail(process)}",
                                   ExitCode.FAILED)
            time.sleep(0.1)

    def exited(self, process: Process) -> str:
        return (f"{process.name} exited with code {process.exit_code}; its log, "
                f"{self.log_path(process)}:\n{self._tail(process)}")

    def _tail(self, process: Process, lines: int = 15) -> str:
        try:
            text = self.log_path(process).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def watch(self, stopping: threading.Event, interval: float = 0.5) -> Process | None:
        """Until ``stopping`` is set: None; or the first process that exited meanwhile."""
        while not stopping.wait(interval):
            for process in self.processes:
                if process.exit_code is not None:
                    return process
        return None

    def stop(self) -> None:
        """The proxy and the brokers together, then the controller, then ZooKeeper: SIGTERM
        first, SIGKILL for whatever is still running after a while."""
        stages = [[p for p in self.processes if p.name != "controller"],
                  [p for p in self.processes if p.name == "controller"]]
        for stage in stages:
            running = [p.proc for p in stage if p.proc is not None and p.proc.poll() is None]
            for proc in running:
                _signal(proc, signal.SIGTERM)
            deadline = time.monotonic() + _STOP_TIMEOUT_S
            for proc in running:
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    _signal(proc, signal.SIGKILL)
                    proc.wait(5)
        if self.zookeeper is not None:
            self.zookeeper.stop()


def _signal(proc: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signum)


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _accepts(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False
