"""The agent reads no more requests than it can answer soon; the rest wait in its clients'
connections. Why: a client that is not idempotent sends a request again once its request
timeout passes (librdkafka's 30 s), and what the agent had read of it is taken, so written
twice. Unbounded, the agent read every request of every connection at once (1,000 a
connection) and, overloaded at 100 clients x 100 messages/s, answered them after that timeout:
11,792 of 150,000 messages written twice in one run.

Seen here with a cluster that stops answering (SIGSTOP) under clients whose acks=all requests
then cannot be answered: the agent takes no more of them than it may hold (what a client
giving up then would get written twice), and delivers what it took once the cluster answers
again."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import time
import urllib.request
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from bmq.databus.pressure import MAX_REQUESTS
from bmq.protocol.headers import RequestHeader, write_request_header
from bmq.protocol.messages import ProduceRequest
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.primitives import Writer
from bmq.protocol.record_codec import encode_record, frame_batch
from tests.conftest import BrokerFactory, make_topic_name
from tests.databus.conftest import DatabusFactory, DatabusProcess, create_topic, wait_until

CONNECTIONS = 20
REQUESTS = 1000             # each connection's, written at once (the agent reads 1,000 ahead)


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


def _status(agent: DatabusProcess) -> dict[str, Any]:
    with urllib.request.urlopen(agent.url("/status"), timeout=10) as answer:
        return dict(json.loads(answer.read()))


def _end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "backpressure"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)[1])
    finally:
        consumer.close()


def test_a_stalled_cluster_holds_the_clients_requests_in_their_connections(
        tmp_path_factory: pytest.TempPathFactory, databus_factory: DatabusFactory) -> None:
    factory = BrokerFactory(tmp_path_factory.mktemp("stalled"))
    try:
        cluster = factory(config={"auto_create_topics_enable": False})
        topic = make_topic_name()
        create_topic(cluster, topic, 1)
        agent = databus_factory(cluster)
        # The agent knows the topic's partitions before the cluster stalls.
        assert agent.post(topic, b"first")[0] == 200
        os.kill(cluster.pid, signal.SIGSTOP)
        try:
            clients = [socket.create_connection(("127.0.0.1", agent.port))
                       for _ in range(CONNECTIONS)]
            for number, client in enumerate(clients):
                client.setblocking(False)
                data = b"".join(_produce_frame(topic, number * REQUESTS + i)
                                for i in range(REQUESTS))
                # What the kernel takes now; the rest is the client's, never sent.
                with contextlib.suppress(BlockingIOError):
                    client.send(data)
            time.sleep(2.0)         # the agent reads what it takes
            # Unbounded, it took every request the clients had sent (1,000 of each).
            taken = _status(agent)["accepted"].get("kafka", 0)
            assert 0 < taken <= MAX_REQUESTS, f"{taken} of the clients' requests taken"
            for client in clients:
                # The clients give up (their request timeout), all at once: reset, so the
                # agent reads nothing more of them (a slot one frees is not taken by the
                # next one's requests).
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            for client in clients:
                client.close()
        finally:
            os.kill(cluster.pid, signal.SIGCONT)

        def delivered() -> bool:
            status = _status(agent)
            return bool(status["waiting_batches"] == 0 and status["open_bytes"] == 0)

        wait_until(delivered, 60, "the agent delivered what it took")
        # What it took is delivered (with the few that the last connections sent it in the
        # moment the first ones' resets freed their room).
        assert _end_offset(cluster.bootstrap, topic) - 1 >= taken
    finally:
        factory.cleanup()
