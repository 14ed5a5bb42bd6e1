"""Kafka's Java client (org.apache.kafka:kafka-clients) against BMQ: the programs of this
directory (src/main/java/bmq/clients, built by scripts/java_clients.sh) run scenarios and print
JSON lines; the tests assert on them and read back with confluent-kafka.

Fixtures: ``java_clients`` (a ``JavaClients`` that runs them; the build is done once a
session: scripts/setup.sh --tests does it for a fresh clone) and ``java_broker`` (one `bmq
serve` for a module)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerFactory, BrokerProcess

REPO = Path(__file__).resolve().parent.parent.parent
SCRIPT = REPO / "scripts" / "java_clients.sh"
# A first build fetches kafka-clients (about 10 MB) with Maven.
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


class JavaClients:
    """Runs a main class of bmq.clients with its scenarios and returns their results."""

    def __init__(self, classpath: str, workdir: Path) -> None:
        self.classpath = classpath
        self.workdir = workdir
        self.runs = 0

    def run(self, main: str, bootstrap: str, scenarios: Mapping[str, str],
            settings: Mapping[str, str] | None = None,
            timeout: float = RUN_TIMEOUT_S) -> dict[str, Any]:
        """``scenarios`` maps scenario names to topics; ``settings`` go to every client (a
        properties file). Every scenario must report, none with an error."""
        self.runs += 1
        settings_arg = "-"
        if settings:
            path = self.workdir / f"client{self.runs}.properties"
            path.write_text("".join(f"{key}={value.replace(chr(92), chr(92) * 2)}\n"
                                    for key, value in settings.items()))
            settings_arg = str(path)
        command = ["java", *JVM_OPTIONS, "-cp", self.classpath, f"bmq.clients.{main}",
                   bootstrap, settings_arg, *(f"{name}={topic}" for name, topic in
                                              scenarios.items())]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
            stdout, stderr, code = done.stdout, done.stderr, done.returncode
        except subprocess.TimeoutExpired as expired:
            stdout, stderr, code = _text(expired.stdout), _text(expired.stderr), None
        results: dict[str, Any] = {}
        for line in stdout.splitlines():
            results.update(json.loads(line))
        failed = {name: result["error"] for name, result in results.items()
                  if isinstance(result, dict) and "error" in result}
        assert code == 0 and set(results) == set(scenarios) and not failed, (
            f"{main} {' '.join(command[-len(scenarios):])}: exit code {code} (None: killed "
            f"after {timeout} s), errors {failed}, reported {sorted(results)}\n"
            f"--- stderr ---\n{stderr[-6000:]}")
        return results


def _text(output: bytes | str | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


@pytest.fixture(scope="session")
def java_classpath() -> str:
    done = subprocess.run([str(SCRIPT), "classpath"], capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, f"scripts/java_clients.sh classpath failed:\n{done.stderr}"
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture
def java_clients(java_classpath: str, tmp_path: Path) -> JavaClients:
    return JavaClients(java_classpath, tmp_path)


@pytest.fixture(scope="module")
def java_broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    return module_broker_factory(config=BROKER_CONFIG)
