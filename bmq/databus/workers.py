"""An agent of several processes (``workers``): one Python event loop is one core, and one
agent process served about 3,700 one-message requests a second on a 2-core machine.

The first process binds the ports (a port in use stops it before anything else: each is bound
once without SO_REUSEPORT first, so another agent on it is refused) and starts workers 1..N-1
as processes of their own (``python -m bmq.databus.worker``). Each worker gets sockets of its
own bound to the ports with SO_REUSEPORT, so the kernel spreads new connections over them (one
socket shared by all went to whichever accepted first: every connection of a burst to one
worker); the Unix socket is one shared by all. Each serves its connections with an intake,
batcher, spool and sender of its own: worker I's spool is ``SPOOL_DIR/worker-I``. A
connection stays on the worker that accepted it, so the order of a connection's messages (per
key) holds as with one process; two connections' messages, on two workers, are batched and
sent independently.

An idempotent client's producer id is known to the worker that gave it or took its first
batch; ids of different workers never collide. After a restart, a client's retry may reach
another worker than the one that spooled it: every worker reads the others' remembered client
batches at its start, and answers such a retry as its own worker would (acks=all once that
worker has sent its last run's spool: it says so with a file, ``LAST_RUN_SENT``).

The first process watches the others (one that dies is started again: its spool is then sent
by its successor) and stops them when it stops; they die with it if it is killed
(PR_SET_PDEATHSIG). ``GET /status`` and the metrics port answer for all the workers: each
writes its status to ``STATUS_FILE`` in its spool every second, and the worker answering adds
the others' to its own."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import json
import logging
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bmq.databus.settings import DatabusSettings
from bmq.listeners import split_host_port
from bmq.net.listening import bind_listeners, cannot_listen
from bmq.startup import ExitCode, StartupError

log = logging.getLogger(__name__)

WORKER_ENV = "BMQ_DATABUS_WORKER"
STATUS_FILE = "status.json"
STATUS_INTERVAL_S = 1.0
LAST_RUN_SENT = "last-run-sent"
WATCH_INTERVAL_S = 0.5
READY_S = 60.0
RESTART_DELAY_MAX_S = 30.0
STOP_WAIT_S = 30.0
_PR_SET_PDEATHSIG = 1


@dataclass
class AgentSockets:
    """A worker's listening sockets, bound before anything else."""

    kafka: list[socket.socket] = field(default_factory=list)
    http: list[socket.socket] = field(default_factory=list)
    unix: socket.socket | None = None

    def all(self) -> list[socket.socket]:
        return [*self.kafka, *self.http, *([self.unix] if self.unix else [])]


def bind_sockets(settings: DatabusSettings) -> list[AgentSockets]:
    """Bind the Kafka port, the HTTP port and the Unix socket, the ports once for each worker
    (StartupError if one cannot be bound)."""
    kafka = _bind_port(settings.listen, settings.workers)
    http = _bind_port(settings.http_listen, settings.workers) if settings.http_listen else []
    unix = None
    if settings.unix_socket:
        _remove_stale_socket(settings.unix_socket)
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(settings.unix_socket)
    return [AgentSockets(kafka[worker], http[worker] if http else [], unix)
            for worker in range(settings.workers)]


def _bind_port(listen: str, workers: int) -> list[list[socket.socket]]:
    """For each worker, sockets bound to every address of ``listen``."""
    host, port = split_host_port(listen)
    probe = bind_listeners(host, port)          # in use: StartupError
    if workers == 1:
        return [probe]
    addresses = [(sock.family, sock.getsockname()) for sock in probe]
    for sock in probe:
        sock.close()
    bound: list[list[socket.socket]] = []
    try:
        for _ in range(workers):
            bound.append([])
            for family, address in addresses:
                sock = socket.socket(family, socket.SOCK_STREAM)
                bound[-1].append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
    except OSError as error:
        for sock in (s for group in bound for s in group):
            sock.close()
        raise cannot_listen(host, port, error) from error
    return bound


def _remove_stale_socket(path: str) -> None:
    """A socket file nothing listens on (left by an agent killed -9) is removed; one another
    process serves is left, and binding it fails (address in use)."""
    if not os.path.exists(path) or not stat.S_ISSOCK(os.stat(path).st_mode):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)
    except OSError:
        pass
    finally:
        probe.close()


def spool_dir(settings: DatabusSettings, worker: int) -> Path:
    """Worker ``worker``'s spool: the spool directory itself for an agent of one process."""
    root = Path(settings.spool_dir)
    return root if settings.workers == 1 else root / f"worker-{worker}"


def other_spools(settings: DatabusSettings) -> list[tuple[Path, int]]:
    """Spools in the spool directory that no worker of this agent reads (those of a run with
    more workers, or of one process, which spools in the directory itself), each with the
    number of workers that reads it."""
    root = Path(settings.spool_dir)
    ours = {spool_dir(settings, worker) for worker in range(settings.workers)}
    found = [(path, int(path.name.removeprefix("worker-")) + 1)
             for path in sorted(root.glob("worker-*"))
             if path.is_dir() and path.name.removeprefix("worker-").isdigit()]
    if any(root.glob("*.spool")):
        found.append((root, 1))
    return [(path, workers) for path, workers in found if path not in ours]


def merged_status(own: dict[str, Any], others: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The status of all the workers: counts and bytes added up, the rest the answering
    worker's (the cluster's failure: any worker's)."""
    merged = dict(own)
    for other in others:
        for key, value in other.items():
            mine = merged.get(key)
            if isinstance(value, dict) and isinstance(mine, dict) and key != "streams":
                merged[key] = {name: mine.get(name, 0) + value.get(name, 0)
                               for name in {*mine, *value}}
            elif isinstance(value, bool) and isinstance(mine, bool):
                merged[key] = mine or value
            elif isinstance(value, int | float) and isinstance(mine, int | float):
                merged[key] = mine + value
        merged["cluster_failing"] = merged.get("cluster_failing") or other.get(
            "cluster_failing")
    return merged


def read_statuses(settings: DatabusSettings, worker: int) -> list[dict[str, Any]]:
    """The other workers' last written status (a worker not started yet: none)."""
    statuses = []
    for other in range(settings.workers):
        if other != worker:
            with contextlib.suppress(OSError, ValueError):
                statuses.append(json.loads(
                    (spool_dir(settings, other) / STATUS_FILE).read_text()))
    return statuses


def write_status(directory: Path, status: dict[str, Any]) -> None:
    temporary = directory / (STATUS_FILE + ".tmp")
    temporary.write_text(json.dumps(status))
    os.replace(temporary, directory / STATUS_FILE)


async def last_run_sent(directory: Path, timeout_s: float) -> bool:
    """Whether the worker of ``directory`` sends (within ``timeout_s``) what its last run
    spooled."""
    deadline = time.monotonic() + timeout_s
    marker = directory / LAST_RUN_SENT
    while not marker.exists():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.1)
    return True


class Workers:
    """Workers 1..N-1, as the first process starts, watches and stops them."""

    def __init__(self, settings: DatabusSettings, bound: list[AgentSockets]) -> None:
        """``bound``: each worker's sockets (the first's are the first process's)."""
        self.settings = settings
        self.bound = bound
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._stopping = False
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the workers and return once each serves (StartupError if one cannot): the
        first one serves after them, or the clients of the first second would all be its."""
        readiness = []
        for worker in range(1, self.settings.workers):
            self._children[worker], ready = self._spawn(worker)
            readiness.append(ready)
        loop = asyncio.get_running_loop()
        try:
            for worker, ready in enumerate(readiness, start=1):
                said = await loop.run_in_executor(None, _read_with_timeout, ready, READY_S)
                if said != b"1":
                    await self.stop()
                    raise StartupError(f"databus worker {worker} did not start (see its log)",
                                       ExitCode.STORAGE)
        finally:
            for ready in readiness:
                os.close(ready)
        self._watch = loop.create_task(self._watch_children())

    def _spawn(self, worker: int) -> tuple[subprocess.Popen[bytes], int]:
        """The worker's process, and a pipe on which it says it serves."""
        ready, said = os.pipe()
        bound = self.bound[worker]
        fds = {"kafka": [s.fileno() for s in bound.kafka],
               "http": [s.fileno() for s in bound.http],
               "unix": bound.unix.fileno() if bound.unix else -1, "ready": said}
        env = dict(os.environ)
        env[WORKER_ENV] = json.dumps({"settings": dataclasses.asdict(self.settings),
                                      "worker": worker, "fds": fds})
        parent = os.getpid()
        try:
            child = subprocess.Popen([sys.executable, "-m", "bmq.databus.worker"], env=env,
                                     pass_fds=[*(s.fileno() for s in bound.all()), said],
                                     preexec_fn=lambda: _die_with(parent))
        finally:
            os.close(said)
        return child, ready

    async def _watch_children(self) -> None:
        started = dict.fromkeys(self._children, time.monotonic())
        delays = dict.fromkeys(self._children, 0.0)
        while not self._stopping:
            await asyncio.sleep(WATCH_INTERVAL_S)
            for worker, child in list(self._children.items()):
                if child.poll() is None or self._stopping:
                    continue
                # One that dies soon after each start (its spool unreadable...) is started
                # again less and less often, not twice a second.
                lived = time.monotonic() - started[worker]
                delays[worker] = 0.0 if lived > RESTART_DELAY_MAX_S else min(
                    RESTART_DELAY_MAX_S, max(1.0, delays[worker] * 2))
                log.error("databus worker %d exited with %s: started again%s", worker,
                          child.returncode,
                          f" in {delays[worker]:g} s" if delays[worker] else "")
                await asyncio.sleep(delays[worker])
                if self._stopping:
                    return
                self._children[worker], ready = self._spawn(worker)
                os.close(ready)
                started[worker] = time.monotonic()

    async def stop(self) -> None:
        self._stopping = True
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        for child in self._children.values():
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)
        loop = asyncio.get_running_loop()
        for worker, child in self._children.items():
            try:
                await loop.run_in_executor(None, child.wait, STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                log.error("databus worker %d did not stop in %g s: killed", worker,
                          STOP_WAIT_S)
                child.kill()


def _read_with_timeout(fd: int, timeout_s: float) -> bytes:
    """One byte from ``fd``; b"" if its writer closed it, or nothing came in ``timeout_s``."""
    readable, _, _ = select.select([fd], [], [], timeout_s)
    return os.read(fd, 1) if readable else b""


def _die_with(parent: int) -> None:
    """(In a worker before it runs) end with the first process, even if it is killed -9."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:          # it died before the line above
        os._exit(1)
