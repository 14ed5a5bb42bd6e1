"""A throw-away ZooKeeper server for the tests: `bmq local`'s (Debian's `zookeeper` package run
with java) on 127.0.0.1, a free port, a temporary data directory and a short tick, so sessions
of test brokers can expire in seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from bmq.local.zookeeper import ZooKeeperServer, available
from tests.conftest import free_port

__all__ = ["ZooKeeper", "available"]


class ZooKeeper(ZooKeeperServer):
    @classmethod
    def start(cls, workdir: Path, port: int = 0, tick_ms: int = 200,
              timeout: float = 30.0) -> Self:
        return super().start(workdir, port or free_port(), tick_ms, timeout)
