"""The agent reads no more requests than it can answer soon; the rest wait in its clients'
connections. Why: a client that is not idempotent sends a request again once its request
timeout passes (librdkafka's 30 s), and what the agent had read of it is taken, so written
twice. Unbounded, the agent read every request of every connection at once (1,000 a
connection) and, overloaded at 100 clients x 100 messages/s, answered them after that timeout:
11,792 of 150,000 messages written twice in one run.

While the cluster cannot be reached, requests waiting for it are not counted: acks=1 clients,
which the spool answers, go on."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import time
import urllib.request
from typing import Any

import pytest
from confluent_kafka import Producer

from bmq.databus.pressure import MAX_REQUESTS
from bmq.protocol.headers import RequestHeader, write_request_header
from bmq.protocol.messages import ProduceRequest
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.primitives import Writer
from bmq.protocol.record_codec import encode_record, frame_batch
from tests.conftest import BrokerFactory, BrokerProcess, make_topic_name
from tests.databus.conftest import DatabusFactory, DatabusProcess, create_topic, wait_until

CONNECTIONS = 20
REQUESTS = 1000             # each connection's, written at once (the agent reads 1,000 ahead)
LINGER_MS = 4000            # how long the agent's batches wait, so its answers


def _produce_frame(topic: str, index: int) -> bytes:
    """A Produce v9 request (acks=all) of one record whose key is ``index``."""
    now = int(time.time() * 1000)
    batch, _ = frame_batch(encode_record(0, 0, str(index).encode(), b"v" * 200, []), 1, now,
                           now)
    writer = Writer()
    write_request_header(writer, RequestHeader(ProduceRequest.API_KEY, 9, index, "flood"))
    ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=0, records=bytes(batch))])]
    ).write(writer, 9)
    body = b"".join(bytes(part) for part in writer.parts())
    return len(body).to_bytes(4, "big") + body


def _flood(agent: DatabusProcess, topic: str, connections: int) -> list[socket.socket]:
    """Connections, each with REQUESTS Produce requests (acks=all) sent at once (what the
    kernel takes; the rest is the client's, never sent)."""
    clients = [socket.create_connection(("127.0.0.1", agent.port)) for _ in range(connections)]
    for number, client in enumerate(clients):
        client.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            client.send(b"".join(_produce_frame(topic, number * REQUESTS + i)
                                 for i in range(REQUESTS)))
    return clients


def _give_up(clients: list[socket.socket]) -> None:
    """The clients give up (their request timeout), all at once: reset, so the agent reads
    nothing more of them (room one frees is not taken by the next one's requests)."""
    for client in clients:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    for client in clients:
        client.close()


def _status(agent: DatabusProcess) -> dict[str, Any]:
    with urllib.request.urlopen(agent.url("/status"), timeout=10) as answer:
        return dict(json.loads(answer.read()))


def test_requests_read_ahead_of_their_answers_are_bounded(
        cluster: BrokerProcess, databus_factory: DatabusFactory) -> None:
    """Clients pipeline 20,000 requests that the agent answers only after a long linger:
    it takes no more of them meanwhile than it may hold (what clients giving up then would
    get written twice)."""
    topic = make_topic_name()
    create_topic(cluster, topic, 1)
    agent = databus_factory(cluster, linger_ms=LINGER_MS)
    clients = _flood(agent, topic, CONNECTIONS)
    try:
        time.sleep(2.0)             # the agent reads what it takes
        # Unbounded, it took every request the clients had sent (1,000 of each).
        taken = _status(agent)["accepted"].get("kafka", 0)
        assert 0 < taken <= MAX_REQUESTS, f"{taken} of the clients' requests taken"
    finally:
        _give_up(clients)


@pytest.mark.slow        # about 10 s: a cluster of its own, killed
def test_with_the_cluster_down_waiting_acks_all_requests_do_not_stop_an_acks_1_client(
        broker_factory: BrokerFactory, databus_factory: DatabusFactory) -> None:
    """While the cluster cannot be reached, requests waiting for it do not count against the
    bound: an acks=1 client (answered once its message is spooled) is not stopped by
    thousands of acks=all requests waiting (their 30 s)."""
    cluster = broker_factory(config={"auto_create_topics_enable": False})
    topic = make_topic_name()
    create_topic(cluster, topic, 1)
    agent = databus_factory(cluster)
    assert agent.post(topic, b"first")[0] == 200        # the agent has seen the topic
    cluster.kill()
    clients = _flood(agent, topic, 3)
    try:
        # As many waiting as the bound allows when the cluster answers (more come).
        wait_until(lambda: _status(agent)["accepted"].get("kafka", 0) >= MAX_REQUESTS, 10,
                   "the agent took the acks=all requests")
        producer = Producer({"bootstrap.servers": agent.bootstrap, "acks": 1})
        errors: list[Any] = []
        producer.produce(topic, value=b"spooled",
                         on_delivery=lambda error, _: errors.append(error))
        assert producer.flush(10) == 0 and errors == [None]
    finally:
        _give_up(clients)
