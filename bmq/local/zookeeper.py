"""One ZooKeeper server from Debian's ``zookeeper`` package, run directly with java (no
systemd, no root) on a port of 127.0.0.1 with its data in a directory of ours."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Self

from bmq.startup import ExitCode, StartupError

CLASSPATH = "/usr/share/java/*:/etc/zookeeper/conf"
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def available() -> bool:
    """Java and Debian's ZooKeeper jars are installed."""
    return shutil.which("java") is not None and bool(glob.glob("/usr/share/java/zookeeper*.jar"))


class ZooKeeperServer:
    """A running server; ``start`` makes one."""

    def __init__(self, workdir: Path, port: int, proc: subprocess.Popen[bytes]) -> None:
        self.workdir = workdir
        self.port = port
        self.proc = proc

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "zookeeper.log"

    @classmethod
    def start(cls, workdir: Path, port: int, tick_ms: int = 2000,
              timeout: float = 30.0) -> Self:
        """Start a server and wait until it answers ``ruok``; a ``StartupError`` when ZooKeeper
        is not installed, exits or is not up within ``timeout`` seconds."""
        if not available():
            raise StartupError("ZooKeeper is not installed: apt-get install zookeeper "
                               "(Debian's package, with Java)", ExitCode.ZOOKEEPER)
        (workdir / "data").mkdir(parents=True, exist_ok=True)
        config = workdir / "zoo.cfg"
        config.write_text("\n".join([
            f"tickTime={tick_ms}",
            f"dataDir={workdir / 'data'}",
            f"clientPort={port}",
            "clientPortAddress=127.0.0.1",
            f"minSessionTimeout={2 * tick_ms}",
            "maxSessionTimeout=60000",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr",
            "forceSync=no",   # a throw-away server: its data is not worth an fsync
            "",
        ]))
        with open(workdir / "zookeeper.log", "ab") as log:
            proc = subprocess.Popen(
                ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 f"-Dzookeeper.log.dir={workdir}", "-Dzookeeper.root.logger=WARN,CONSOLE",
                 "-Dzookeeper.console.threshold=WARN", "-cp", CLASSPATH, MAIN, str(config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        server = cls(workdir, port, proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise StartupError(f"ZooKeeper exited at start (port {port} in use?):\n"
                                   f"{server.log_tail()}", ExitCode.ZOOKEEPER)
            if server.ruok():
                return server
            time.sleep(0.1)
        server.stop()
        raise StartupError(f"ZooKeeper did not start within {timeout:.0f} s:\n"
                           f"{server.log_tail()}", ExitCode.ZOOKEEPER)

    def ruok(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"ruok")
                return sock.recv(4) == b"imok"
        except OSError:
            return False

    def log_tail(self, chars: int = 4000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-chars:]
        return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
