"""Kafka's Java client (org.apache.kafka:kafka-clients) against BMQ: the programs of this
directory (src/main/java/bmq/clients, built by scripts/java_clients.sh) run scenarios and print
JSON lines; the tests assert on them and read back with confluent-kafka.

Fixtures: ``java_clients`` (a ``JavaClients`` that runs them; the build is done once a
session: scripts/setup.sh --tests does it for a fresh clone) and ``java_broker`` (one `bmq
serve` for a module)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerFactory, BrokerProcess
from tests.integration.helpers import wait_until

REPO = Path(__file__).resolve().parent.parent.parent
SCRIPT = REPO / "scripts" / "java_clients.sh"
# A first build fetches kafka-clients and kafka-streams with RocksDB (about 85 MB) with Maven.
BUILD_TIMEOUT_S = 600.0
# A run of several scenarios; each is bounded at 60 s by the program itself (Scenarios.java).
RUN_TIMEOUT_S = 180.0
# Short-lived programs: the first JIT tier and the serial collector start fastest on 2 cores.
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m"]
# The brokers of these tests: groups form at once, as Kafka's test brokers are set up;
# consumer-protocol members hear of new assignments within 1 s rather than 5 (a new topic a
# regex matches; a member joining); fewer share-state partitions than the default 50 make a
# quicker first ShareFetch.
BROKER_CONFIG = {"group.initial.rebalance.delay.ms": 0,
                 "group.consumer.heartbeat.interval.ms": 1000,
                 "share.coordinator.state.topic.num.partitions": 3}
# The same for cluster brokers, which take their settings from the environment.
BROKER_ENV = {f"BMQ_{key.upper().replace('.', '_')}": str(value)
              for key, value in BROKER_CONFIG.items()}


class JavaRun:
    """A running main class of bmq.clients; ``result`` waits for it and checks it."""

    def __init__(self, command: list[str], scenarios: Mapping[str, str], output: Path) -> None:
        self.command = command
        self.scenarios = dict(scenarios)
        # Output to files: a pipe nobody reads while the program runs (the client's warnings
        # while a test restarts the broker) could fill and stop it.
        self.stdout, self.stderr = output.with_suffix(".out"), output.with_suffix(".err")
        with open(self.stdout, "wb") as out, open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen(command, stdout=out, stderr=err)

    def result(self, timeout: float = RUN_TIMEOUT_S) -> dict[str, Any]:
        """Every scenario must report, none with an error."""
        try:
            code: int | None = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            code = None
        stdout = self.stdout.read_text(errors="replace")
        stderr = self.stderr.read_text(errors="replace")
        results: dict[str, Any] = {}
        for line in stdout.splitlines():
            results.update(json.loads(line))
        failed = {name: result["error"] for name, result in results.items()
                  if isinstance(result, dict) and "error" in result}
        assert code == 0 and set(results) == set(self.scenarios) and not failed, (
            f"{' '.join(self.command[-len(self.scenarios) - 3:])}: exit code {code} (None: "
            f"killed after {timeout} s), errors {failed}, reported {sorted(results)}\n"
            f"--- stderr ---\n{stderr[-6000:]}")
        return results

    def wait_for_output(self, text: str, timeout: float) -> None:
        """Until the program has written ``text`` on stderr (a scenario's progress line)."""
        wait_until(lambda: text in self.stderr.read_text(errors="replace")
                   or self.proc.poll() is not None, timeout, message=repr(text))
        assert text in self.stderr.read_text(errors="replace"), self.result()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


class JavaClients:
    """Runs main classes of bmq.clients with their scenarios."""

    def __init__(self, classpath: str, workdir: Path) -> None:
        self.classpath = classpath
        self.workdir = workdir
        self.started: list[JavaRun] = []

    def start(self, main: str, bootstrap: str, scenarios: Mapping[str, str],
              settings: Mapping[str, str] | None = None) -> JavaRun:
        """``scenarios`` maps scenario names to topics; ``settings`` go to every client (a
        properties file)."""
        settings_arg = "-"
        if settings:
            path = self.workdir / f"client{len(self.started)}.properties"
            path.write_text("".join(f"{key}={value.replace(chr(92), chr(92) * 2)}\n"
                                    for key, value in settings.items()))
            settings_arg = str(path)
        command = ["java", *JVM_OPTIONS, "-cp", self.classpath, f"bmq.clients.{main}",
                   bootstrap, settings_arg, *(f"{name}={topic}" for name, topic in
                                              scenarios.items())]
        self.started.append(JavaRun(command, scenarios,
                                    self.workdir / f"{main}-{len(self.started)}"))
        return self.started[-1]

    def run(self, main: str, bootstrap: str, scenarios: Mapping[str, str],
            settings: Mapping[str, str] | None = None,
            timeout: float = RUN_TIMEOUT_S) -> dict[str, Any]:
        return self.start(main, bootstrap, scenarios, settings).result(timeout)

    def cleanup(self) -> None:
        for run in self.started:
            run.kill()


@pytest.fixture(scope="session")
def java_classpath() -> str:
    done = subprocess.run([str(SCRIPT), "classpath"], capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, f"scripts/java_clients.sh classpath failed:\n{done.stderr}"
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture
def java_clients(java_classpath: str, tmp_path: Path) -> Iterator[JavaClients]:
    clients = JavaClients(java_classpath, tmp_path)
    try:
        yield clients
    finally:
        clients.cleanup()


@pytest.fixture(scope="module")
def java_broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    return module_broker_factory(config=BROKER_CONFIG)
