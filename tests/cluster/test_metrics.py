"""`--metrics-port` on `bmq broker` and `bmq controller`: counters match the traffic a real
client sent, the controller exports its view, and the ZooKeeper gauge follows the connection."""

from __future__ import annotations

import time
import urllib.error
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import ClusterFactory
from tests.cluster.zookeeper import ZooKeeper
from tests.conftest import make_topic_name
from tests.metrics.scrape import scrape, value

PARTITIONS = 4
OFFSETS_PARTITIONS = 6      # BMQ_OFFSETS_TOPIC_NUM_PARTITIONS in tests/cluster/conftest.py
MESSAGES = 1500
VALUE = b"m" * 50


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeper]:
    """A ZooKeeper of this test alone: the test stops it."""
    server = ZooKeeper.start(tmp_path / "zk")
    try:
        yield server
    finally:
        server.stop()


def reachable(port: int) -> bool:
    try:
        scrape(port)
    except urllib.error.URLError:
        return False
    return True


def eventually(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.1)


def test_broker_and_controller_metrics(own_zookeeper: ZooKeeper, tmp_path: Path) -> None:
    factory = ClusterFactory(tmp_path / "cluster", own_zookeeper)
    (tmp_path / "cluster").mkdir()
    try:
        run(factory, own_zookeeper)
    finally:
        factory.cleanup()


def run(factory: ClusterFactory, zookeeper: ZooKeeper) -> None:
    cluster = factory(brokers=2, metrics=True)
    standby = cluster.start_controller(metrics=True)
    active_port, standby_port = cluster.controller_metrics_ports
    brokers = list(cluster.brokers.values())
    topic = make_topic_name("metrics")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    cluster.wait_writable(topic)

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    delivered: list[bool] = []
    for i in range(MESSAGES):
        producer.produce(topic, VALUE, key=str(i).encode(),
                         on_delivery=lambda err, _msg: delivered.append(err is None))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert delivered.count(True) == MESSAGES

    samples = [scrape(b.metrics_port) for b in brokers]
    # Each message was accepted by exactly one broker: the owner of its partition.
    assert sum(value(s, "bmq_messages_in_total", topic=topic) for s in samples) == MESSAGES
    bytes_in = sum(value(s, "bmq_bytes_in_total", topic=topic) for s in samples)
    assert MESSAGES * len(VALUE) < bytes_in < MESSAGES * (len(VALUE) + 40) + PARTITIONS * 100
    owners = [s.owner for s in cluster.states()]
    for broker, s in zip(brokers, samples, strict=True):
        assert value(s, "bmq_zookeeper_connected") == 1
        assert value(s, "bmq_partitions_owned") == owners.count(broker.broker_id)
        assert value(s, "bmq_requests_total", api="Produce") >= 1
        assert value(s, "bmq_messages_in_total", topic=topic) > 0   # both own a share

    # The active controller is the first one started; it sees both brokers and every partition
    # writable (the gauges follow its passes, at least one per second).
    def controller_view() -> bool:
        s = scrape(active_port)
        return (value(s, "bmq_controller_active") == 1
                and value(s, "bmq_controller_brokers", draining="false") == 2
                and value(s, "bmq_controller_partitions", state="writable")
                == PARTITIONS + OFFSETS_PARTITIONS
                and value(s, "bmq_controller_partitions", state="assigned") == 0)
    eventually(controller_view, 10, "the controller's gauges")
    # The standby was started last: it may still be starting up.
    eventually(lambda: reachable(standby_port), 30, "the standby controller's endpoint")
    passive = scrape(standby_port)
    assert standby.poll() is None
    assert value(passive, "bmq_controller_active") == 0
    assert not any(name == "bmq_controller_partitions" for name, _ in passive)
    for port in (active_port, standby_port):   # the standby may still be connecting
        eventually(lambda port=port: value(scrape(port), "bmq_zookeeper_connected") == 1,
                   10, f"gauge 1 on :{port}")

    # ZooKeeper goes away: every role reports the lost connection.
    zookeeper.stop()
    ports = [b.metrics_port for b in brokers] + [active_port, standby_port]

    def disconnected(port: int) -> bool:
        s: dict[Any, float] = scrape(port)
        return ("bmq_zookeeper_connected", frozenset()) in s and \
            value(s, "bmq_zookeeper_connected") == 0
    for port in ports:
        eventually(lambda port=port: disconnected(port), 10, f"gauge 0 on :{port}")
