"""A throw-away ZooKeeper server (Debian's `zookeeper` package) on 127.0.0.1, a free port and a
temporary data directory, run directly with java (no systemd)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.conftest import free_port

CLASSPATH = "/usr/share/java/*:/etc/zookeeper/conf"
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def available() -> bool:
    return shutil.which("java") is not None and bool(glob.glob("/usr/share/java/zookeeper*.jar"))


class ZooKeeper:
    def __init__(self, workdir: Path, port: int, proc: subprocess.Popen[bytes]) -> None:
        self.workdir = workdir
        self.port = port
        self.proc = proc

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    @classmethod
    def start(cls, workdir: Path, tick_ms: int = 200, timeout: float = 30.0) -> ZooKeeper:
        workdir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        (workdir / "data").mkdir(exist_ok=True)
        cfg = workdir / "zoo.cfg"
        cfg.write_text("\n".join([
            f"tickTime={tick_ms}",
            f"dataDir={workdir / 'data'}",
            f"clientPort={port}",
            "clientPortAddress=127.0.0.1",
            f"minSessionTimeout={2 * tick_ms}",
            "maxSessionTimeout=60000",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr",
            "forceSync=no",
            "",
        ]))
        with open(workdir / "zookeeper.log", "ab") as log:
            proc = subprocess.Popen(
                ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 f"-Dzookeeper.log.dir={workdir}", "-Dzookeeper.root.logger=WARN,CONSOLE",
                 "-Dzookeeper.console.threshold=WARN", "-cp", CLASSPATH, MAIN, str(cfg)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        server = cls(workdir, port, proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"zookeeper exited:\n{server.log_tail()}")
            if server.ruok():
                return server
            time.sleep(0.1)
        server.stop()
        raise RuntimeError(f"zookeeper did not start in {timeout}s:\n{server.log_tail()}")

    def ruok(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"ruok")
                return sock.recv(4) == b"imok"
        except OSError:
            return False

    def log_tail(self, chars: int = 4000) -> str:
        with contextlib.suppress(OSError):
            return (self.workdir / "zookeeper.log").read_text(errors="replace")[-chars:]
        return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(5)
