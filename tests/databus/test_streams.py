"""`bmq databus map` sends a stream to another topic: the running agent applies it within
seconds, for Kafka clients and HTTP alike, without a restart; --remove sends it back."""

from __future__ import annotations

import subprocess
import time

from confluent_kafka import Producer

from tests.conftest import BrokerProcess, bmq_command, make_topic_name
from tests.databus.conftest import DatabusProcess, create_topic, read_all


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
