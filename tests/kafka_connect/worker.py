"""A Kafka Connect distributed worker (Kafka 4.4's ConnectDistributed, `scripts/kafka.sh
connect-distributed`) run as an operator runs it: a properties file, a JVM of its own, its REST
API on 127.0.0.1, stopped with SIGTERM.

    workers = ConnectWorkers(tmp_path)
    worker = workers.start(broker.bootstrap, WorkerSettings.fresh("connect"))
    worker.rest.post("/connectors", {...})
    worker.stop()
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
KAFKA_SCRIPT = REPO / "scripts" / "kafka.sh"
# Where `scripts/kafka.sh build` puts the file connectors (tools/kafka/pom.xml).
CONNECT_PLUGINS = REPO / "tools" / "kafka" / "target" / "connect-plugins"
# A worker answers its REST API some 3 to 5 s after its JVM starts on an idle machine (it
# finds its plugins, joins its group and reads its three topics to the end); several times
# that when other tests load the 2 cores.
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
LOG_TAIL_CHARS = 6000
# A JVM's exit code after SIGTERM and its shutdown hooks (ConnectDistributed stops the worker
# in one): 128 + 15.
STOPPED_BY_SIGTERM = 143
# The worker's heap: plenty for two file connectors (connect-distributed.sh's default is 2 GB).
HEAP_OPTS = "-Xms64M -Xmx384M"

# For the tests that kill a worker: its group notices after its session timeout (Connect's
# default, 10 s); the incremental cooperative assignor then holds the member's connectors and
# tasks back for scheduled.rebalance.max.delay.ms (default 5 minutes, for a restarting worker to
# get them back) before it gives them to the others: 5 s here. A sink task's consumer on the
# survivor joins its group (connect-CONNECTOR) once the killed worker's consumer is out of it:
# after the consumer's session timeout, 45 s by default, 10 s here (a worker's consumer.*
# settings are its tasks' consumers').
TAKEOVER_SETTINGS = {"scheduled.rebalance.max.delay.ms": "5000",
                     "consumer.session.timeout.ms": "10000"}
TAKEOVER_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class WorkerSettings:
    """What workers of one Connect cluster share: the group and its three storage topics."""

    group_id: str
    config_topic: str
    offset_topic: str
    status_topic: str
    # More worker properties (they override the ones properties() writes).
    extra: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def fresh(cls, prefix: str, properties: Mapping[str, str] | None = None,
              **extra: str) -> WorkerSettings:
        """A group and topics of its own (tests share brokers): PREFIX-XXXXXXXX-configs ...;
        more worker properties by their names (``properties``) or as keywords, the dots of
        their names written as underscores."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        return cls(name, f"{name}-configs", f"{name}-offsets", f"{name}-status",
                   {**(properties or {}),
                    **{key.replace("_", "."): value for key, value in extra.items()}})

    @property
    def topics(self) -> tuple[str, str, str]:
        return self.config_topic, self.offset_topic, self.status_topic

    def properties(self, bootstrap: str, rest_port: int) -> dict[str, str]:
        """A worker's properties file, as Kafka's config/connect-distributed.properties has
        them for one broker (replication factor 1)."""
        return {
            "bootstrap.servers": bootstrap,
            "group.id": self.group_id,
            "config.storage.topic": self.config_topic,
            "offset.storage.topic": self.offset_topic,
            "status.storage.topic": self.status_topic,
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            # The file connectors' records as plain text, both ways.
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "listeners": f"http://127.0.0.1:{rest_port}",
            "plugin.path": str(CONNECT_PLUGINS),
            # Kafka's own plugins carry ServiceLoader manifests: no scan of every class (the
            # default scan takes seconds, and the worker warns that it is not needed).
            "plugin.discovery": "service_load",
            # As config/connect-distributed.properties.
            "offset.flush.interval.ms": "10000",
            **self.extra,
        }


class RestError(AssertionError):
    """The REST API answered an error status."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class RestApi:
    """A worker's REST API (JSON in, JSON out)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def request(self, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base_url + path, data=data, method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as error:
            raise RestError(error.code, error.read().decode(errors="replace")) from None
        return json.loads(text) if text else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)


class ConnectWorker:
    """One worker process; its properties file and log in ``workdir``."""

    def __init__(self, workdir: Path, bootstrap: str, settings: WorkerSettings) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.settings = settings
        self.rest_port = free_port()
        self.worker_id = f"127.0.0.1:{self.rest_port}"
        self.rest = RestApi(f"http://{self.worker_id}")
        self.properties_path = workdir / "worker.properties"
        self.properties_path.write_text("".join(
            f"{key}={value}\n"
            for key, value in settings.properties(bootstrap, self.rest_port).items()))
        self.log_path = workdir / "worker.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = START_TIMEOUT_S) -> ConnectWorker:
        # The tests' own settings, not an environment's KAFKA_OPTS or KAFKA_LOG_LEVEL.
        env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKA_")}
        env["KAFKA_HEAP_OPTS"] = HEAP_OPTS
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(KAFKA_SCRIPT), "connect-distributed", str(self.properties_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                start_new_session=True)
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        """Until GET /health says healthy (KIP-1017: the worker has started, joined its group
        and read its config topic; a 503 before) and GET /connectors answers. (GET /connectors
        alone may answer [] while the worker is still creating its topics.)"""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"the Connect worker exited with code "
                                     f"{self.proc.returncode}\n{self.log_tail()}")
            try:
                self.rest.get("/health")
                self.rest.get("/connectors")
                return
            except (OSError, RestError) as error:
                last = error
                time.sleep(0.5)
        raise AssertionError(f"the Connect worker's REST API did not answer within {timeout}s "
                             f"(last: {last})\n{self.log_tail()}")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, as an operator stops it: the worker stops its tasks (a source task commits
        its offsets, a sink task its consumer's), leaves its group and exits. Its exit code:
        STOPPED_BY_SIGTERM when it stopped so."""
        assert self.proc is not None, "worker not started"
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"the Connect worker did not stop within {timeout}s of "
                                     f"SIGTERM (killed it)\n{self.log_tail()}") from None
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: nothing committed, no leaving the group."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        return f"--- worker log ({self.log_path}) ---\n{self.log_text()[-chars:]}"


class ConnectWorkers:
    """Starts workers for one test; every one still running is killed when the test ends
    (``cleanup``)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.workers: list[ConnectWorker] = []

    def start(self, bootstrap: str, settings: WorkerSettings) -> ConnectWorker:
        worker = ConnectWorker(self.base / f"worker{len(self.workers)}", bootstrap, settings)
        self.workers.append(worker)
        return worker.start()

    def cleanup(self) -> None:
        for worker in self.workers:
            worker.kill()
