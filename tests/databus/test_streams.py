"""`bmq databus map` sends a stream to another topic: the running agent applies it within
seconds, for Kafka clients (confluent-kafka, Kafka's Java producer) and HTTP (urllib, curl)
alike, without a restart of either; --remove sends it back."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.conftest import BrokerProcess, bmq_command, make_topic_name
from tests.databus.conftest import DatabusProcess, create_topic, read_all
from tests.java.conftest import JavaClients, java_classpath, java_clients

__all__ = ["java_classpath", "java_clients"]


def databus_map(cluster: BrokerProcess, *args: str) -> str:
    done = subprocess.run([*bmq_command(), "databus", "map", *args, "-b", cluster.bootstrap],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_mapping_change_applies_within_seconds(cluster: BrokerProcess,
                                                 agent: DatabusProcess) -> None:
    stream = make_topic_name("clicks")
    moved = make_topic_name("clicks-v2")
    create_topic(cluster, stream, 1)
    create_topic(cluster, moved, 4)
    producer = Producer({"bootstrap.servers": agent.bootstrap, "linger.ms": 0})
    producer.produce(stream, value=b"before")
    assert producer.flush(10) == 0
    assert databus_map(cluster, stream, "--topic", moved, "--compression", "zstd",
                       "--partitioner", "sticky") == f"{stream} -> {moved}\n"
    changed = time.monotonic()
    while True:
        status, answer = agent.post(stream, b"probe")
        assert status == 200, answer
        if answer["topic"] == moved:
            break
        assert time.monotonic() - changed < 5, "mapping not applied within 5 s"
        time.sleep(0.1)
    producer.produce(stream, value=b"after")      # the same client, not restarted
    assert producer.flush(10) == 0
    values = [s[3] for s in read_all(cluster, moved, 4, 2)]
    assert b"after" in values and b"before" not in values
    assert databus_map(cluster, stream, "--remove") == \
        f"{stream}: mapping removed (goes to topic {stream})\n"
    deadline = time.monotonic() + 5
    while agent.post(stream, b"back")[1]["topic"] != stream:
        assert time.monotonic() < deadline, "removal not applied within 5 s"
        time.sleep(0.1)


def test_map_refuses_a_bad_mapping(cluster: BrokerProcess) -> None:
    done = subprocess.run([*bmq_command(), "databus", "map", "s", "--topic", "bad name",
                           "-b", cluster.bootstrap], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "Invalid topic name" in done.stderr


@pytest.mark.slow        # about 20 s: the Java producer's 8 s, the JVM's start
def test_a_running_java_producer_and_curl_follow_a_mapping_change(
        java_clients: JavaClients, cluster: BrokerProcess, agent: DatabusProcess) -> None:
    """Kafka's Java producer (idempotent, acks=all) writes 4,000 records over about 8 s and
    curl posts, while the stream is mapped to another topic: neither is restarted; curl's
    answers name the new topic within 5 s, and the Java producer's records are each in one
    of the two topics once, its last ones in the new one."""
    stream = make_topic_name("jclicks")
    moved = make_topic_name("jclicks-v2")
    create_topic(cluster, stream, 1)
    create_topic(cluster, moved, 1)
    java = java_clients.start("ProducerScenarios", agent.bootstrap, {"steady": stream})
    read_all(cluster, stream, 1, 1, timeout=30)         # the Java producer is writing
    databus_map(cluster, stream, "--topic", moved)
    changed = time.monotonic()
    while True:
        done = subprocess.run(["curl", "-s", "--data-binary", "by curl",
                               agent.url(f"/streams/{stream}")],
                              capture_output=True, text=True, timeout=30, check=True)
        if json.loads(done.stdout)["topic"] == moved:
            break
        assert time.monotonic() - changed < 5, "mapping not applied within 5 s"
        time.sleep(0.1)
    steady = java.result()["steady"]
    assert steady["errors"] == [] and None not in steady["offsets"]
    # Every answer came once the cluster had the records (acks=all; curl's acks=cluster).
    values = Counter(value for topic in (stream, moved) for value in _values(cluster, topic)
                     if value != b"by curl")
    assert values == Counter(f"steady-{i}".encode() for i in range(4000))
    assert b"steady-3999" in _values(cluster, moved)


def _values(cluster: BrokerProcess, topic: str) -> list[bytes]:
    """Every value of the one-partition ``topic``."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "databus-tests"})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)
    finally:
        consumer.close()
    return [value for *_, value, _ in read_all(cluster, topic, 1, end, timeout=30)]
