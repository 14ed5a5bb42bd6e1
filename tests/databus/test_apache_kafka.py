"""The databus in front of Apache Kafka 4.4 (KRaft, tests/mirror's): a cluster that keeps no
stream mappings (its ApiVersions does not list BMQ's APIs for them). The agent says so once
and sends every stream to the topic of its own name; `bmq databus map` fails with a clear
message and exit 2."""

from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from bench.kafka_peer import KafkaPeer
from tests.conftest import bmq_command
from tests.databus.conftest import MAPPINGS_INTERVAL_MS, DatabusFactory
from tests.mirror.test_kafka_source import kafka

__all__ = ["kafka"]

NOT_KEPT = "the cluster keeps no stream mappings"


@pytest.mark.slow           # Kafka's start: 10 to 20 s
def test_a_cluster_without_mappings(kafka: KafkaPeer, databus_factory: DatabusFactory) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(30)
    agent = databus_factory(kafka)
    status, answer = agent.post("plain", b"to its own topic")
    assert (status, answer["topic"]) == (200, "plain"), answer
    time.sleep(5 * MAPPINGS_INTERVAL_MS / 1000)     # five more reads of the mappings
    log = agent.log_text()
    assert log.count(NOT_KEPT) == 1, log
    assert "stream mappings not read" not in log, log
    done = subprocess.run([*bmq_command(), "databus", "map", "plain", "--topic", "other",
                           "-b", kafka.bootstrap], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "keeps no databus stream mappings" in done.stderr, done.stderr
