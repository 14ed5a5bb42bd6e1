"""Two `bmq serve`s (a source and a target) and `bmq mirror run` between them, each a real
process; the mirror can be killed (-9) and started again."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.conftest import BrokerFactory, BrokerProcess, bmq_command, free_port

SOURCE_NAME = "east"
# Source metadata and group offsets are looked at this often in the tests (5 s by default).
INTERVAL_MS = 300
# A killed mirror's partitions go to the other mirrors (or its next start) after this long.
SESSION_TIMEOUT_MS = 2000


class Cluster(Protocol):
    """A cluster the mirror connects to (a `bmq serve`, or Kafka): its bootstrap address."""

    @property
    def bootstrap(self) -> str: ...


class MirrorProcess:
    """`bmq mirror run` from ``source`` into ``target`` (``--name east``)."""

    def __init__(self, workdir: Path, source: Cluster, target: Cluster, *flags: str) -> None:
        self.workdir = workdir
        self.source = source
        self.target = target
        self.metrics_port = free_port()
        self.config_path = workdir / "mirror.toml"
        self.config_path.write_text(
            f"[mirror]\nmetadata_interval_ms = {INTERVAL_MS}\n"
            f"offsets_interval_ms = {INTERVAL_MS}\nheartbeat_interval_ms = {INTERVAL_MS}\n"
            f"session_timeout_ms = {SESSION_TIMEOUT_MS}\n")
        self.flags = list(flags)
        self.log_path = workdir / "mirror.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        return [*bmq_command(), "mirror", "run", "--config", str(self.config_path),
                "--name", SOURCE_NAME, "--source", self.source.bootstrap,
                "--target", self.target.bootstrap, "--metrics-port", str(self.metrics_port),
                *self.flags]

    def start(self) -> MirrorProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BMQ_")}
        env["PYTHONUNBUFFERED"] = "1"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log, env=env, start_new_session=True)
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class MirrorFactory:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.mirrors: list[MirrorProcess] = []

    def __call__(self, source: Cluster, target: Cluster, *flags: str) -> MirrorProcess:
        workdir = self.base / f"mirror{len(self.mirrors)}"
        workdir.mkdir(parents=True, exist_ok=True)
        mirror = MirrorProcess(workdir, source, target, *flags)
        self.mirrors.append(mirror)
        return mirror.start()

    def cleanup(self) -> None:
        for mirror in self.mirrors:
            mirror.kill()


def _mirrors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MirrorFactory]:
    factory = MirrorFactory(tmp_path_factory.mktemp("mirror"))
    try:
        yield factory
    finally:
        factory.cleanup()


@pytest.fixture(scope="module")
def module_mirror_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MirrorFactory]:
    yield from _mirrors(tmp_path_factory)


@pytest.fixture
def mirror_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MirrorFactory]:
    yield from _mirrors(tmp_path_factory)


@pytest.fixture(scope="module")
def pair(module_broker_factory: BrokerFactory, module_mirror_factory: MirrorFactory
         ) -> tuple[BrokerProcess, BrokerProcess, MirrorProcess]:
    """A source, a target and one mirror of the topics named m-* and groups named g-*, shared
    by a module's tests (each uses topics and groups of its own)."""
    source = module_broker_factory()
    # No topic made by a client's Metadata request: it would stand where the mirror's goes.
    target = module_broker_factory(config={"auto_create_topics_enable": False})
    mirror = module_mirror_factory(source, target, "--topic-regex", "m-.*",
                                   "--group-regex", "g-.*")
    return source, target, mirror


def wait_until(check: Callable[[], Any], timeout: float, what: str,
               log: Callable[[], str] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}"
                                 + (f"\n--- mirror log ---\n{log()[-4000:]}" if log else ""))
        time.sleep(0.1)
