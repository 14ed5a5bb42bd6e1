"""Slow scenarios of issue #35: the cluster stopped for 30 s while applications keep writing,
and the agent killed -9 again and again under a steady stream. Nothing acknowledged is lost,
nothing is written twice."""

from __future__ import annotations

import threading
import time
import urllib.error
from collections import Counter

import pytest
from confluent_kafka import KafkaError, Producer

from tests.conftest import BrokerFactory, make_topic_name
from tests.databus.conftest import DatabusFactory, DatabusProcess, create_topic, read_all


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
