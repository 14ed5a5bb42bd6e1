"""POST /streams/NAME: raw and JSON bodies, acks=cluster with the offset the cluster gave,
acks=spooled; bad requests get a 4xx with a JSON reason and change nothing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.conftest import BrokerProcess, bmq_command, free_port, make_topic_name
from tests.databus.conftest import DatabusFactory, DatabusProcess, create_topic, read_all


def test_raw_and_json_messages_land_at_the_offsets_answered(
        cluster: BrokerProcess, agent: DatabusProcess) -> None:
    topic = make_topic_name("http")
    create_topic(cluster, topic, 2)
    answers = []
    for i in range(5):
        status, answer = agent.post(topic, f"raw-{i}".encode(),
                                    headers={"X-Key": f"k{i}", "X-Header-trace": f"t{i}"})
        assert status == 200, answer
        answers.append((answer["partition"], answer["offset"], f"k{i}".encode(),
                        f"raw-{i}".encode(), [("trace", f"t{i}".encode())]))
    status, answer = agent.post(topic, json.dumps(
        {"key": "j", "value": {"a": [1, 2]}, "headers": {"h": "v"}}).encode(),
        headers={"Content-Type": "application/json"})
    assert status == 200, answer
    answers.append((answer["partition"], answer["offset"], b"j", b'{"a":[1,2]}',
                    [("h", b"v")]))
    status, answer = agent.post(topic, json.dumps({"value": "text"}).encode(), "?acks=spooled",
                                headers={"Content-Type": "application/json"})
    assert status == 200 and answer["acks"] == "spooled" and "offset" not in answer
    seen = read_all(cluster, topic, 2, 7)
    assert sorted(seen, key=lambda s: (s[0], s[1]))[0][1] == 0
    for expected in answers:
        assert expected in seen
    assert [s[3] for s in seen].count(b"text") == 1 and len(seen) == 7


def test_bad_requests_get_clear_errors_and_nothing_is_written(
        cluster: BrokerProcess, agent: DatabusProcess) -> None:
    topic = make_topic_name("httpbad")
    create_topic(cluster, topic, 1)
    json_type = {"Content-Type": "application/json"}
    cases = [
        (topic, b'{"key": ', "", json_type, 400, None),
        (topic, b'{"key": "k"}', "", json_type, 400, None),
        (topic, b'{"value": "v", "other": 1}', "", json_type, 400, None),
        (topic, b"x", "?acks=maybe", {}, 400, None),
        (make_topic_name("nosuch"), b"x", "", {}, 404, "UNKNOWN_TOPIC_OR_PARTITION"),
        ("bad%20name", b"x", "", {}, 400, "INVALID_TOPIC_EXCEPTION"),
        (topic, b"x" * 1_200_000, "", {}, 413, "MESSAGE_TOO_LARGE"),
    ]
    for stream, body, query, headers, expected, kafka_error in cases:
        status, answer = agent.post(stream, body, query, headers=headers)
        assert status == expected, (stream, body[:40], answer)
        assert answer["error"]
        assert answer.get("kafka_error") == kafka_error
    # Not HTTP at all: the connection is closed, the agent serves the next request.
    with socket.create_connection(("127.0.0.1", agent.http_port), timeout=5) as sock:
        sock.sendall(b"\x00\x01garbage\r\n\r\n")
        sock.recv(1000)
    status, _ = agent.post(topic, b"after")
    assert status == 200
    assert [s[3] for s in read_all(cluster, topic, 1, 1)] == [b"after"]


@pytest.mark.slow
def test_curl_over_the_unix_socket(cluster: BrokerProcess,
                                   databus_factory: DatabusFactory, tmp_path: Path) -> None:
    topic = make_topic_name("unix")
    create_topic(cluster, topic, 1)
    path = tmp_path / "databus.sock"
    agent = databus_factory(cluster, unix_socket=str(path))
    agent.kill()            # leaves the socket file behind: the next start takes it over
    agent.start()
    done = subprocess.run(["curl", "-sS", "--unix-socket", str(path), "-H", "X-Key: u",
                           "--data-binary", "over a socket",
                           f"http://localhost/streams/{topic}"],
                          capture_output=True, text=True, timeout=30, check=True)
    answer = json.loads(done.stdout)
    assert (answer["topic"], answer["partition"], answer["offset"]) == (topic, 0, 0)
    assert [(s[2], s[3]) for s in read_all(cluster, topic, 1, 1)] == [(b"u", b"over a socket")]


def test_status_and_metrics_count_what_the_agent_did(
        cluster: BrokerProcess, databus_factory: DatabusFactory) -> None:
    topic = make_topic_name("counted")
    create_topic(cluster, topic, 1)
    metrics_port = free_port()
    agent = databus_factory(cluster, metrics_port=metrics_port)
    for value in (b"one", b"two"):
        assert agent.post(topic, value)[0] == 200
    assert agent.post(make_topic_name("nosuch"), b"x")[0] == 404
    producer = Producer({"bootstrap.servers": agent.bootstrap, "linger.ms": 0})
    for value in (b"a", b"b", b"c"):
        producer.produce(topic, value=value)
    assert producer.flush(10) == 0
    done = subprocess.run([*bmq_command(), "databus", "status", "--url", agent.url("")],
                          capture_output=True, text=True, timeout=30, check=True)
    lines = done.stdout.splitlines()
    assert "accepted (http)    2 messages" in lines
    assert "accepted (kafka)   3 messages" in lines
    assert "refused            1 messages: UNKNOWN_TOPIC_OR_PARTITION" in lines
    assert any(line.startswith("forwarded          5 records in") for line in lines), lines
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as page:
        exported = page.read().decode()
    assert 'bmq_databus_accepted_messages_total{way="kafka"} 3.0' in exported
    assert 'bmq_databus_refused_messages_total{reason="UNKNOWN_TOPIC_OR_PARTITION"} 1.0' \
        in exported
    assert "bmq_databus_forwarded_records_total 5.0" in exported



@pytest.mark.slow
def test_nothing_is_taken_that_the_cluster_would_refuse_as_too_large(
        cluster: BrokerProcess, agent: DatabusProcess) -> None:
    """The cluster takes batches of up to max.message.bytes (1,048,588) with their 61-byte
    header: a message that cannot fit in one is refused before it is spooled (413), never
    acknowledged and dropped later; 30 incompressible messages of 100 KB in one linger are
    all taken and delivered."""
    topic = make_topic_name("sizes")
    create_topic(cluster, topic, 1)
    status, answer = agent.post(topic, os.urandom(1_048_540), "?acks=spooled")
    assert (status, answer.get("kafka_error")) == (413, "MESSAGE_TOO_LARGE"), answer
    values = [os.urandom(100_000) for _ in range(30)]
    with ThreadPoolExecutor(30) as pool:
        answers = list(pool.map(lambda v: agent.post(topic, v, "?acks=spooled"), values))
    assert [status for status, _ in answers] == [200] * 30, answers
    assert sorted(s[3] for s in read_all(cluster, topic, 1, 30)) == sorted(values)
