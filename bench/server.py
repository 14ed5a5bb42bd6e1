"""A throw-away ``bmq serve`` on a free port with a temporary data directory."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from bench.security import SecureSetup, SecuritySetupError, prepare
from bench.topic import BenchError


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def default_command() -> list[str]:
    """The ``bmq`` next to this Python (a venv), else the one on PATH."""
    beside = Path(sys.executable).with_name("bmq")
    if beside.exists():
        return [str(beside), "serve"]
    found = shutil.which("bmq")
    if found:
        return [found, "serve"]
    return [sys.executable, "-c", "import sys; from bmq.cli import main; sys.exit(main())",
            "serve"]


def _proc_stats() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, utime + stime in clock ticks) of every process."""
    stats: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                text = fh.read()
        except OSError:
            continue  # gone meanwhile
        fields = text[text.rindex(")") + 2:].split()  # the name may hold spaces
        stats[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    return stats


def process_tree(root: int, stats: dict[int, tuple[int, int]]) -> set[int]:
    """``root`` and its descendants, from ``_proc_stats()``."""
    tree = {root}
    grew = True
    while grew:  # add descendants until nothing new turns up
        grew = False
        for pid, (ppid, _) in stats.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return tree


def tree_cpu_seconds(root: int) -> float | None:
    """CPU time (user + system) of ``root`` and its descendants so far (None: /proc unreadable)."""
    try:
        stats = _proc_stats()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(stats[pid][1] for pid in process_tree(root, stats) if pid in stats) / ticks


class LocalServer:
    """Start with ``with LocalServer() as server:``; server.bootstrap is the address."""

    def __init__(self, command: str | None = None, keep_data: bool = False,
                 startup_timeout: float = 60.0, host: str = "127.0.0.1",
                 security: str | None = None) -> None:
        """``security`` ("ssl", "sasl_ssl"): a secured listener beside the PLAINTEXT one
        (bench/security.py), described by ``self.secure`` once started."""
        self.command = shlex.split(command) if command else default_command()
        self.security = security
        self.secure: SecureSetup | None = None
        self.keep_data = keep_data
        self.startup_timeout = startup_timeout
        self.host = host
        self.port = 0
        self.data_dir = ""
        self.log_path = ""
        self._argv: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else 0

    def describe(self) -> str:
        return f"spawned `{shlex.join(self.command)}`, pid {self.pid}, data {self.data_dir}"

    def start(self) -> str:
        self.data_dir = tempfile.mkdtemp(prefix="bmq-bench-")
        self.log_path = os.path.join(self.data_dir, "server.log")
        self.port = free_port(self.host)
        self._argv = [*self.command, "--data-dir", os.path.join(self.data_dir, "data"),
                      "--listen", self.bootstrap]
        if self.security:
            try:
                self.secure = prepare(self.data_dir, self.security, self.port,
                                      free_port(self.host), os.path.join(self.data_dir, "data"),
                                      self.command[:-1])   # the command without "serve"
            except SecuritySetupError as error:
                raise BenchError(str(error)) from error
            self._argv += ["--config", self.secure.config_path]
        try:
            self._launch()
        except BaseException:
            self.stop()
            raise
        return self.bootstrap

    def relaunch(self) -> None:
        """Start the server again on the same data and port (after ``terminate``)."""
        self._launch()

    def _launch(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self._argv, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"the server exited with code {self.proc.returncode}:\n"
                                 f"{self.log_tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    pass
            except OSError:
                time.sleep(0.1)
                continue
            admin = AdminClient({"bootstrap.servers": self.bootstrap,
                                 "log.connection.close": False})
            try:
                admin.list_topics(timeout=5.0)
                return
            except KafkaException:
                time.sleep(0.2)
        raise BenchError(f"the server did not answer within {self.startup_timeout:.0f} s:\n"
                         f"{self.log_tail()}")

    def exit_code(self) -> int | None:
        """None while the server runs (or was never started), else its exit code."""
        return None if self.proc is None else self.proc.poll()

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) of the server and its child processes so far.

        Read from /proc, so Linux only (None elsewhere or once the server is gone).
        """
        if self.proc is None or self.proc.poll() is not None:
            return None
        return tree_cpu_seconds(self.proc.pid)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = Path(self.log_path).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def terminate(self) -> None:
        """Stop the server (SIGTERM), keeping its data."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)

    def stop(self) -> None:
        self.terminate()
        if self.data_dir and not self.keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
