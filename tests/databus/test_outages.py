"""Slow scenarios of issue #35: the cluster stopped for 30 s while applications keep writing
(confluent-kafka and urllib; Kafka's Java producer and curl), and the agent killed -9 again
and again under a steady stream. Nothing acknowledged is lost,
nothing is written twice."""

from __future__ import annotations

import subprocess
import threading
import time
import urllib.error
from collections import Counter

import pytest
from confluent_kafka import KafkaError, Producer

from tests.conftest import BrokerFactory, make_topic_name
from tests.databus.conftest import DatabusFactory, DatabusProcess, create_topic, read_all
from tests.java.conftest import JavaClients, java_classpath, java_clients

__all__ = ["java_classpath", "java_clients"]


class HttpWriter(threading.Thread):
    """POSTs numbered messages (acks=spooled) until stopped; remembers those answered 200."""

    def __init__(self, agent: DatabusProcess, topic: str, name: str) -> None:
        super().__init__(daemon=True)
        self.agent, self.topic, self.name = agent, topic, name
        self.acked: list[bytes] = []
        self.sent: list[bytes] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stopping.is_set():
            value = f"{self.name}-{i}".encode()
            i += 1
            self.sent.append(value)
            try:
                status, _ = self.agent.post(self.topic, value, "?acks=spooled",
                                            headers={"X-Key": self.name}, timeout=10)
            except (OSError, urllib.error.URLError, ValueError):
                time.sleep(0.05)        # the agent is down: this one may or may not be in
                continue
            if status == 200:
                self.acked.append(value)
            time.sleep(0.005)


@pytest.mark.slow
def test_the_cluster_stopped_for_30_s_while_applications_write(
        broker_factory: BrokerFactory, databus_factory: DatabusFactory) -> None:
    cluster = broker_factory(config={"auto_create_topics_enable": False})
    topic = make_topic_name("outage")
    create_topic(cluster, topic, 3)
    agent = databus_factory(cluster)
    writer = HttpWriter(agent, topic, "http")
    writer.start()
    producer = Producer({"bootstrap.servers": agent.bootstrap, "enable.idempotence": True,
                         "acks": "all"})
    errors: list[KafkaError] = []
    kafka_values = []
    started = time.monotonic()
    stopped_at = started + 3
    while time.monotonic() < started + 40:
        if cluster.is_running() and stopped_at <= time.monotonic() < stopped_at + 30:
            cluster.kill()
        elif not cluster.is_running() and time.monotonic() >= stopped_at + 30:
            cluster.start()
        value = f"kafka-{len(kafka_values)}".encode()
        producer.produce(topic, key=b"kafka", value=value,
                         on_delivery=lambda error, _: errors.append(error) if error else None)
        kafka_values.append(value)
        producer.poll(0.02)
    writer.stopping.set()
    writer.join(30)
    assert producer.flush(60) == 0 and errors == []
    seen = read_all(cluster, topic, 3, len(writer.acked) + len(kafka_values), timeout=60)
    counts = Counter(value for *_, value, _ in seen)
    assert [v for v, n in counts.items() if n > 1] == []
    assert set(writer.acked) | set(kafka_values) <= set(counts)
    by_key: dict[bytes, list[bytes]] = {}
    for _, _, key, value, _ in sorted(seen, key=lambda s: (s[0], s[1])):
        by_key.setdefault(key, []).append(value)
    assert by_key[b"kafka"] == kafka_values                 # in order, all of them
    assert [v for v in by_key[b"http"] if v in writer.acked] == writer.acked


@pytest.mark.slow
def test_the_agent_killed_again_and_again_loses_nothing_acknowledged(
        broker_factory: BrokerFactory, databus_factory: DatabusFactory) -> None:
    cluster = broker_factory(config={"auto_create_topics_enable": False})
    topic = make_topic_name("kills")
    create_topic(cluster, topic, 2)
    agent = databus_factory(cluster)
    writers = [HttpWriter(agent, topic, f"w{i}") for i in range(3)]
    for writer in writers:
        writer.start()
    for _ in range(4):
        time.sleep(1.5)
        agent.kill()
        time.sleep(0.3)
        agent.start()
    time.sleep(1.5)
    for writer in writers:
        writer.stopping.set()
        writer.join(30)
    acked = [value for writer in writers for value in writer.acked]
    assert len(acked) > 100
    seen = read_all(cluster, topic, 2, len(acked), timeout=60)
    counts = Counter(value for *_, value, _ in seen)
    assert [v for v, n in counts.items() if n > 1] == []
    assert set(acked) <= set(counts)
    for writer in writers:          # each writer's key: in the order it was answered
        mine = [value for *_, value, _ in sorted(seen, key=lambda s: (s[0], s[1]))
                if value.startswith(f"{writer.name}-".encode())]
        assert [v for v in mine if v in writer.acked] == writer.acked


@pytest.mark.slow
def test_java_and_curl_clients_through_a_30_s_outage(
        java_clients: JavaClients, broker_factory: BrokerFactory,
        databus_factory: DatabusFactory) -> None:
    """Kafka's Java producer (idempotent, acks=all, 4,000 records over about 8 s) and curl
    (acks=spooled) write while the cluster is down for 30 s: curl is answered 200 throughout,
    the Java producer's sends all succeed once the cluster is back (its requests the agent
    answered REQUEST_TIMED_OUT meanwhile retried and recognised), and every message is in the
    cluster once, the Java producer's in order."""
    cluster = broker_factory(config={"auto_create_topics_enable": False})
    topic = make_topic_name("java-outage")
    create_topic(cluster, topic, 1)
    agent = databus_factory(cluster)
    assert agent.post(topic, b"first")[0] == 200        # the agent has seen the topic
    java = java_clients.start("ProducerScenarios", agent.bootstrap, {"steady": topic})
    read_all(cluster, topic, 1, 2, timeout=30)          # the Java producer is writing
    cluster.kill()
    down = time.monotonic()
    curl_acked: list[bytes] = []
    while time.monotonic() < down + 30:
        value = f"curl-{len(curl_acked)}"
        done = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", "--data-binary", value,
                               agent.url(f"/streams/{topic}?acks=spooled")],
                              capture_output=True, text=True, timeout=30, check=True)
        body, code = done.stdout.rsplit("\n", 1)
        assert code == "200", body
        curl_acked.append(value.encode())
        time.sleep(0.05)
    cluster.start()
    steady = java.result()["steady"]
    assert steady["errors"] == [] and None not in steady["offsets"]
    java_values = [f"steady-{i}".encode() for i in range(4000)]
    seen = [value for *_, value, _ in read_all(cluster, topic, 1,
                                                1 + len(java_values) + len(curl_acked),
                                                timeout=60)]
    assert Counter(seen) == Counter([b"first", *java_values, *curl_acked])
    assert [value for value in seen if value.startswith(b"steady-")] == java_values
