"""POST /streams/NAME: raw and JSON bodies, acks=cluster with the offset the cluster gave,
acks=spooled; bad requests get a 4xx with a JSON reason and change nothing."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

from tests.conftest import BrokerProcess, make_topic_name
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
