"""The spool: with the cluster stopped the agent keeps taking messages, acks=1 / acks=spooled
once they are on its disk; a kill -9 of the agent loses none of them; once the cluster is back
they are all delivered, once each, in order per key. A full spool is said clearly."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from bmq.databus.spool import ClientBatch, Spool
from tests.conftest import BrokerFactory, BrokerProcess, bmq_command, make_topic_name
from tests.databus.conftest import (
    DatabusFactory,
    create_topic,
    new_producer_id,
    raw_produce,
    read_all,
)


@pytest.mark.slow
def test_spooled_messages_survive_kill_9_and_drain_once_the_cluster_is_back(
        broker_factory: BrokerFactory, databus_factory: DatabusFactory) -> None:
    cluster = broker_factory(config={"auto_create_topics_enable": False})
    topic = make_topic_name("spooled")
    create_topic(cluster, topic, 3)
    agent = databus_factory(cluster)
    status, _ = agent.post(topic, b"first", headers={"X-Key": "k0"})
    assert status == 200
    cluster.stop()
    expected = [(b"k0", b"first")]
    for i in range(30):
        key = f"k{i % 4}".encode()
        status, answer = agent.post(topic, f"http-{i}".encode(), "?acks=spooled",
                                    headers={"X-Key": key.decode()})
        assert status == 200, answer
        expected.append((key, f"http-{i}".encode()))
    # acks=cluster cannot be met now: 504 after the wait asked for, and the message stays
    # spooled (it is delivered with the others).
    status, answer = agent.post(topic, b"waited", "?timeout_ms=300", headers={"X-Key": "k0"})
    assert (status, answer["kafka_error"]) == (504, "REQUEST_TIMED_OUT"), answer
    expected.append((b"k0", b"waited"))
    producer = Producer({"bootstrap.servers": agent.bootstrap, "acks": 1, "linger.ms": 5})
    errors: list[KafkaError] = []
    for i in range(200):
        key = f"k{i % 4}".encode()
        producer.produce(topic, key=key, value=f"kafka-{i}".encode(),
                         on_delivery=lambda error, _: errors.append(error) if error else None)
        expected.append((key, f"kafka-{i}".encode()))
    assert producer.flush(20) == 0 and errors == []
    agent.kill()
    agent.start()           # the same spool; the cluster still down
    cluster.start()
    seen = read_all(cluster, topic, 3, len(expected), timeout=30)
    assert sorted((key, value) for _, _, key, value, _ in seen) == sorted(expected)
    by_key: dict[bytes, list[bytes]] = defaultdict(list)
    for _, _, key, value, _ in sorted(seen, key=lambda s: (s[0], s[1])):
        by_key[key].append(value)
    for key, values in by_key.items():
        assert values == [value for k, value in expected if k == key]


def test_a_full_spool_is_refused_clearly_and_what_it_took_is_delivered(
        broker_factory: BrokerFactory, databus_factory: DatabusFactory) -> None:
    cluster = broker_factory(config={"auto_create_topics_enable": False})
    topic = make_topic_name("full")
    create_topic(cluster, topic, 1)
    agent = databus_factory(cluster, spool_bytes=20_000)
    assert agent.post(topic, b"known")[0] == 200     # the agent has seen the topic
    cluster.stop()
    taken = [b"known"]
    for _ in range(40):
        value = os.urandom(1000)          # the spool holds compressed batches
        status, answer = agent.post(topic, value, "?acks=spooled")
        if status != 200:
            break
        taken.append(value)
    assert status == 503 and answer["kafka_error"] == "KAFKA_STORAGE_ERROR", answer
    assert "spool full" in answer["error"]
    producer = Producer({"bootstrap.servers": agent.bootstrap, "retries": 0,
                         "linger.ms": 0})
    errors: list[KafkaError] = []
    producer.produce(topic, value=b"y" * 1000,
                     on_delivery=lambda error, _: errors.append(error))
    producer.flush(10)
    assert [e.code() for e in errors] == [KafkaError.KAFKA_STORAGE_ERROR]
    cluster.start()
    seen = read_all(cluster, topic, 1, len(taken), timeout=30)
    assert [value for *_, value, _ in seen] == taken


def test_an_idempotent_clients_retry_after_a_kill_9_is_not_taken_again(
        cluster: BrokerProcess, databus_factory: DatabusFactory) -> None:
    """The agent answered acks=1 (the batch spooled) and was killed before the client read
    the answer: the client sends the batch again, with its producer id and sequence, to the
    agent started again. The record is in the cluster once, and the client's next batch is
    taken."""
    topic = make_topic_name("retried")
    create_topic(cluster, topic, 1)
    agent = databus_factory(cluster)

    producer = asyncio.run(new_producer_id(agent.port))
    assert asyncio.run(raw_produce(agent.port, topic, producer, 0, b"once")) == 0
    agent.kill()
    agent.start()
    # the retry, answered
    assert asyncio.run(raw_produce(agent.port, topic, producer, 0, b"once")) == 0
    assert asyncio.run(raw_produce(agent.port, topic, producer, 1, b"next")) == 0
    seen = read_all(cluster, topic, 1, 2, timeout=30)
    assert [value for *_, value, _ in seen] == [b"once", b"next"]


def test_the_clients_sequences_outlive_the_segments_they_were_written_in(tmp_path: Path
                                                                          ) -> None:
    """A segment goes once its batches are done; the clients' last batches it remembered are
    written again at the head of each new segment, so a spool opened again still has them."""
    spool = Spool(tmp_path, 1 << 20, segment_bytes=4096)
    spool.recover()
    for sequence in range(0, 35, 5):        # seven batches of five records: the last five kept
        spool.remember(ClientBatch(42, 0, "clicks", sequence, 5))
    for _ in range(6):                      # a few segments, every batch done
        spool.done(spool.append("clicks", 0, bytearray(3000), 1))
    assert len(list(tmp_path.glob("*.spool"))) == 1
    spool.close()
    again = Spool(tmp_path, 1 << 20)
    assert again.recover() == []
    assert list(again.client_batches[(42, "clicks")]) == [
        ClientBatch(42, 0, "clicks", sequence, 5) for sequence in range(10, 35, 5)]
    again.close()


@pytest.mark.slow          # a cluster of its own, stopped: about 10 s
def test_an_acks_all_retry_after_a_restart_waits_for_its_own_batch_only(
        broker_factory: BrokerFactory, databus_factory: DatabusFactory) -> None:
    """The last run spooled a batch the cluster will not take (its topic was deleted while
    the agent was down: retried) besides the client's, which the cluster took. After the
    restart the client's acks=all retry is answered at once, as Kafka answers a retry of a
    batch it has, not once the whole last run's spool is sent (REQUEST_TIMED_OUT, before)."""
    cluster = broker_factory(config={"auto_create_topics_enable": False})
    topic, gone = make_topic_name("answered"), make_topic_name("gone")
    create_topic(cluster, topic, 1)
    create_topic(cluster, gone, 1)
    agent = databus_factory(cluster)
    assert agent.post(gone, b"seen")[0] == 200        # the agent knows the topic
    producer = asyncio.run(new_producer_id(agent.port))
    assert asyncio.run(raw_produce(agent.port, topic, producer, 0, b"once", -1)) == 0
    cluster.stop()
    assert agent.post(gone, b"stuck", "?acks=spooled")[0] == 200
    agent.kill()
    cluster.start()
    subprocess.run([*bmq_command(), "topic", "delete", gone, "-b", cluster.bootstrap],
                   check=True, capture_output=True, timeout=30)
    agent.start()
    started = time.monotonic()
    assert asyncio.run(raw_produce(agent.port, topic, producer, 0, b"once", -1)) == 0
    assert time.monotonic() - started < 5
    assert [value for *_, value, _ in read_all(cluster, topic, 1, 1)] == [b"once"]
