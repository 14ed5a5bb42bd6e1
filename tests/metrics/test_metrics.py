"""`bmq serve --metrics-port`: Prometheus text at /metrics, counters that match the traffic."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import free_port
from tests.metrics.scrape import scrape, value

MESSAGES = 2000
VALUE = b"v" * 100


@pytest.fixture
def metrics_broker(broker_factory: Any) -> Any:
    port = free_port()
    broker = broker_factory(env={"BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"},
                            extra_args=["--metrics-port", str(port)])
    broker.metrics_port = port
    return broker


def test_counters_match_what_was_produced_and_consumed(metrics_broker: Any, topic: str) -> None:
    bootstrap = metrics_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    before = scrape(metrics_broker.metrics_port)
    assert value(before, "bmq_messages_in_total", topic=topic) == 0

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True})
    delivered = []
    for i in range(MESSAGES):
        producer.produce(topic, VALUE, key=str(i).encode(),
                         on_delivery=lambda err, msg: delivered.append(err is None))
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert delivered.count(True) == MESSAGES

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-g",
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    got, at_end = 0, set()
    deadline = time.monotonic() + 30
    while (got < MESSAGES or len(at_end) < 2) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is None:
            got += 1
        else:
            at_end.add(msg.partition())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got == MESSAGES

    samples = scrape(metrics_broker.metrics_port)
    assert value(samples, "bmq_messages_in_total", topic=topic) == MESSAGES
    assert value(samples, "bmq_messages_out_total", topic=topic) == MESSAGES
    bytes_in = value(samples, "bmq_bytes_in_total", topic=topic)
    # Batches carry headers and keys on top of the values, but not much (no compression).
    assert MESSAGES * len(VALUE) < bytes_in < MESSAGES * (len(VALUE) + 40) + 2 * 100
    assert value(samples, "bmq_bytes_out_total", topic=topic) == bytes_in

    produce_requests = value(samples, "bmq_requests_total", api="Produce")
    assert produce_requests >= 1
    assert value(samples, "bmq_request_duration_seconds_count", api="Produce") == produce_requests
    assert value(samples, "bmq_request_duration_seconds_bucket", api="Produce",
                 le="+Inf") == produce_requests
    assert value(samples, "bmq_requests_total", api="Fetch") >= 1
    assert value(samples, "bmq_requests_total", api="OffsetCommit") >= 1
    assert value(samples, "bmq_requests_total", api="CreateTopics") == 1
    # 2 partitions of the topic and the 50 of __consumer_offsets.
    assert value(samples, "bmq_partitions_owned") == 52
    assert value(samples, "bmq_consumer_groups") == 1
    flushes = value(samples, "bmq_flush_bytes_count")
    assert flushes >= 1
    assert value(samples, "bmq_flush_duration_seconds_count") == flushes
    # Every produced byte went through a flush (plus the group's commit records).
    assert value(samples, "bmq_flush_bytes_sum") >= bytes_in
    assert value(samples, "process_cpu_seconds_total") > 0


def test_acks_0_is_counted_and_failed_batches_are_not(metrics_broker: Any, topic: str) -> None:
    bootstrap = metrics_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "1000"})])[
        topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 0, "linger.ms": 0})
    for _ in range(10):
        producer.produce(topic, b"x" * 10)
        producer.flush(10)
    rejected = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors = []
    rejected.produce(topic, b"y" * 5000, on_delivery=lambda err, msg: errors.append(err))
    rejected.flush(10)
    assert errors and errors[0] is not None
    deadline = time.monotonic() + 10
    while True:
        samples = scrape(metrics_broker.metrics_port)
        if value(samples, "bmq_messages_in_total", topic=topic) >= 10 or \
                time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert value(samples, "bmq_messages_in_total", topic=topic) == 10


@pytest.mark.parametrize("path", ["/", "/metrics/", "/nope", "/topics"])
def test_an_unknown_path_is_404(metrics_broker: Any, path: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(f"http://127.0.0.1:{metrics_broker.metrics_port}{path}",
                               timeout=10)
    assert error.value.code == 404
    assert "/metrics" in error.value.read().decode()


def test_metrics_off_by_default(broker: Any) -> None:
    assert "metrics at" not in broker.log_text()


def test_busy_metrics_port_stops_the_broker(broker_factory: Any) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = broker_factory(start=False, extra_args=["--metrics-port", str(port)])
        with pytest.raises(RuntimeError, match="exited with code"):
            server.start(timeout=15)
        assert "Address already in use" in server.log_text() or "in use" in server.log_text()


def test_json_logs(broker_factory: Any) -> None:
    server = broker_factory(extra_args=["--log-format", "json"], config={"log_level": "DEBUG"})
    server.stop()
    records = [json.loads(line) for line in server.log_text().splitlines()
               if line.strip() and not line.startswith("=====")]
    assert records, server.log_text()
    for record in records:
        assert {"ts", "level", "logger", "msg", "pid"} <= set(record)
        assert record["ts"].endswith("Z")
    messages = [r["msg"] for r in records]
    assert any("listening on" in m for m in messages)
    assert any("stopped cleanly" in m for m in messages)
    assert {r["level"] for r in records} >= {"INFO"}


def test_bad_log_format_and_metrics_port_are_refused(broker_factory: Any) -> None:
    for config in ({"log_format": "xml"}, {"metrics_port": 70000}):
        server = broker_factory(start=False, config=config)
        with pytest.raises(RuntimeError, match="exited with code 2"):
            server.start(timeout=15)


def test_transaction_metrics(metrics_broker: Any, topic: str) -> None:
    """Commits and aborts counted, the open transaction and its age, and the LSO lag of the
    partition it holds back (confluent-kafka's transactional producer)."""
    from tests.transactions.helpers import txn_producer

    bootstrap = metrics_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer = txn_producer(bootstrap, "metrics-" + topic)
    producer.init_transactions(30)
    for end in ("commit", "abort", "open"):
        producer.begin_transaction()
        for _ in range(3):
            producer.produce(topic, b"x", partition=0)
        producer.flush(30)
        if end == "commit":
            producer.commit_transaction(30)
        elif end == "abort":
            producer.abort_transaction(30)
    time.sleep(0.3)
    samples = scrape(metrics_broker.metrics_port)
    assert value(samples, "bmq_transactions_ended_total", result="commit") == 1
    assert value(samples, "bmq_transactions_ended_total", result="abort") == 1
    assert value(samples, "bmq_transactions_open") == 1
    assert value(samples, "bmq_transaction_oldest_age_seconds") > 0.2
    # 3 committed + marker, 3 aborted + marker: the open transaction starts at 8, 3 records on.
    assert value(samples, "bmq_partition_lso_lag", topic=topic, partition="0") == 3
    producer.abort_transaction(30)
    samples = scrape(metrics_broker.metrics_port)
    assert value(samples, "bmq_transactions_open") == 0
    assert value(samples, "bmq_partition_lso_lag", topic=topic, partition="0") == 0
