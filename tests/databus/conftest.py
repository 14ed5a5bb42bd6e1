"""A `bmq serve` and `bmq databus run` in front of it, each a real process; the agent can be
killed (-9) and started again on the same spool."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from confluent_kafka import Consumer, TopicPartition

from bmq.net.client import BrokerLink
from bmq.protocol.messages import InitProducerIdRequest, ProduceRequest
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.record_codec import encode_record, frame_batch
from tests.conftest import BrokerFactory, BrokerProcess, bmq_command, free_port

# How often the agents read the stream mappings in the tests (1 s by default).
MAPPINGS_INTERVAL_MS = 200


class KafkaCluster(Protocol):
    """A cluster the agent forwards to (a `bmq serve`, or brokers under ZooKeeper)."""

    @property
    def bootstrap(self) -> str: ...


class DatabusProcess:
    """`bmq databus run` in front of ``cluster`` with a Kafka port and an HTTP port."""

    def __init__(self, workdir: Path, cluster: KafkaCluster, **settings: Any) -> None:
        self.workdir = workdir
        self.cluster = cluster
        self.port = free_port()
        self.http_port = free_port()
        self.spool_dir = workdir / "spool"
        self.config_path = workdir / "databus.toml"
        table = {"mappings_interval_ms": MAPPINGS_INTERVAL_MS, "linger_ms": 20, **settings}
        self.config_path.write_text("[databus]\n" + "".join(
            f"{key} = {json.dumps(value)}\n" for key, value in table.items()))
        self.log_path = workdir / "databus.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.http_port}{path}"

    def command(self) -> list[str]:
        return [*bmq_command(), "databus", "run", "--config", str(self.config_path),
                "--cluster", self.cluster.bootstrap, "--spool-dir", str(self.spool_dir),
                "--listen", self.bootstrap, "--http-listen", f"127.0.0.1:{self.http_port}"]

    def start(self) -> DatabusProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BMQ_")}
        env["PYTHONUNBUFFERED"] = "1"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log, env=env, start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"databus exited:\n{self.log_text()[-3000:]}"
            try:
                with socket.create_connection(("127.0.0.1", self.http_port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"databus not serving:\n{self.log_text()[-3000:]}")

    def kill(self) -> None:
        """kill -9 of the agent's first process; returns once its other workers, which die
        with it, are gone too (one still listening took the next start's first connections
        and reset them as it died)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    os.killpg(self.proc.pid, 0)     # its session's process group: workers
                except ProcessLookupError:
                    return
                time.sleep(0.05)
            raise AssertionError("the agent's workers outlived its kill -9 by 10 s")

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def post(self, stream: str, body: bytes, query: str = "",
             headers: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, Any]:
        """POST /streams/STREAM: the status and the JSON answer."""
        request = urllib.request.Request(self.url(f"/streams/{stream}{query}"), data=body,
                                         headers=headers or {}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())


class DatabusFactory:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.agents: list[DatabusProcess] = []

    def __call__(self, cluster: KafkaCluster, **settings: Any) -> DatabusProcess:
        workdir = self.base / f"databus{len(self.agents)}"
        workdir.mkdir(parents=True, exist_ok=True)
        agent = DatabusProcess(workdir, cluster, **settings)
        self.agents.append(agent)
        return agent.start()

    def cleanup(self) -> None:
        for agent in self.agents:
            agent.kill()


@pytest.fixture
def databus_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DatabusFactory]:
    factory = DatabusFactory(tmp_path_factory.mktemp("databus"))
    try:
        yield factory
    finally:
        factory.cleanup()


# One cluster and one agent for the package's tests that leave both running (each uses topics
# of its own): a start of each is about a second.
@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    factory = BrokerFactory(tmp_path_factory.mktemp("databus-cluster"))
    try:
        yield factory(config={"auto_create_topics_enable": False})
    finally:
        factory.cleanup()


@pytest.fixture(scope="package")
def agent(cluster: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[DatabusProcess]:
    factory = DatabusFactory(tmp_path_factory.mktemp("databus"))
    try:
        yield factory(cluster)
    finally:
        factory.cleanup()


def create_topic(cluster: KafkaCluster, topic: str, partitions: int) -> None:
    subprocess.run([*bmq_command(), "topic", "create", topic, "--partitions", str(partitions),
                    "-b", cluster.bootstrap], check=True, capture_output=True, timeout=30)


def read_all(cluster: KafkaCluster, topic: str, partitions: int, count: int,
             timeout: float = 15) -> list[Any]:
    """Every record of ``topic`` (at least ``count`` of them) as confluent-kafka reads them
    from the cluster: (partition, offset, key, value, headers)."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "databus-tests",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.2):
                if message.error() is None:
                    seen.append((message.partition(), message.offset(), message.key(),
                                 message.value(), message.headers()))
            if len(seen) >= count:
                time.sleep(0.3)     # anything more (a duplicate) comes too
                for message in consumer.consume(1000, 0.3):
                    if message.error() is None:
                        seen.append((message.partition(), message.offset(), message.key(),
                                     message.value(), message.headers()))
                break
    finally:
        consumer.close()
    return seen


async def raw_produce(port: int, topic: str, producer: tuple[int, int], sequence: int,
                      value: bytes, acks: int = 1) -> int:
    """One batch of one record, with ``producer``'s id, epoch and ``sequence``, on a
    connection of its own to the agent's Kafka port: the answer's error code."""
    link = BrokerLink("127.0.0.1", port, "retrying")
    try:
        now = int(time.time() * 1000)
        batch, _ = frame_batch(encode_record(0, 0, None, value, []), 1, now, now,
                               producer_id=producer[0], producer_epoch=producer[1],
                               base_sequence=sequence)
        response = await link.request(ProduceRequest(acks=acks, timeout_ms=10000, topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(
                index=0, records=bytes(batch))])]), 9)
        return int(response.responses[0].partition_responses[0].error_code)
    finally:
        link.close()


async def new_producer_id(port: int) -> tuple[int, int]:
    """An idempotent producer id and epoch from the agent."""
    link = BrokerLink("127.0.0.1", port, "retrying")
    try:
        answer = await link.request(InitProducerIdRequest(transaction_timeout_ms=60000), 4)
        return answer.producer_id, answer.producer_epoch
    finally:
        link.close()


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.1)
