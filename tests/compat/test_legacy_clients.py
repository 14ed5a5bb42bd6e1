"""Old Kafka clients (issue #36): message formats v0/v1 and the API versions Kafka 4 removed.

Real clients speak them here: librdkafka (confluent-kafka) told it talks to a 0.9.0 or 0.10.0
broker without asking ApiVersions (Produce v1 / Fetch v1 with magic 0 messages, Produce v2 /
Fetch v2 with magic 1), and kafka-python pinned to 0.10.1. What they produce is stored as
record batch v2 and read back by today's clients, and the other way round: keys, values,
offsets and timestamps must survive each trip.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE

from tests.integration.helpers import consume, create_topic, produce_all

# librdkafka's settings for a broker that predates ApiVersions (0.9.0: message format v0) or
# has it but is not asked (0.10.0: v1, timestamps).
OLD_LIBRDKAFKA = {
    "0.9.0": {"api.version.request": False, "broker.version.fallback": "0.9.0"},
    "0.10.0": {"api.version.request": False, "broker.version.fallback": "0.10.0"},
}
BASE_TS = 1_700_000_000_000
KCAT = shutil.which("kcat") or "/usr/bin/kcat"


def _items(count: int) -> list[dict[str, Any]]:
    """Keyed and keyless records of varied sizes, each with its own timestamp."""
    return [{"key": None if i % 7 == 3 else f"key-{i}".encode(),
             "value": bytes([i % 251]) * (i * 13 % 700) if i % 11 else b"",
             "timestamp": BASE_TS + i} for i in range(count)]


def _conf(settings: dict[str, Any]) -> dict[str, Any]:
    return {key.replace(".", "_"): value for key, value in settings.items()}


@pytest.mark.parametrize("fallback", [
    "0.9.0", pytest.param("0.10.0", marks=pytest.mark.slow)])
# lz4 of magic 0 carries the header checksum Kafka 0.8-0.9 computed wrongly (KAFKA-3160).
@pytest.mark.parametrize("codec", ["none", *(pytest.param(codec, marks=pytest.mark.slow)
                                             for codec in ("gzip", "snappy", "lz4"))])
def test_old_librdkafka_round_trip(module_broker: Any, topic: str, fallback: str,
                                   codec: str) -> None:
    """An old producer's records read back by an old consumer and by today's consumer."""
    create_topic(module_broker.bootstrap, topic)
    items = _items(300)
    old = _conf(OLD_LIBRDKAFKA[fallback])
    delivered = produce_all(module_broker.bootstrap, topic, items, compression_type=codec,
                            **old)
    assert sorted(offset for *_, offset in delivered.ok) == list(range(len(items)))
    expected = [(item["key"], item["value"]) for item in items]
    for reader in (old, {}):    # the old consumer (v0/v1 message sets), then a v2 one
        got = consume(module_broker.bootstrap, topic, expected=len(items), **reader)[0]
        assert [(m.key, m.value or b"") for m in got] == expected
        assert [m.offset for m in got] == list(range(len(items)))
        if fallback == "0.9.0":
            # Message format v0 has no timestamps: none is stored, none is read back.
            assert {m.timestamp_type for m in got} <= {TIMESTAMP_NOT_AVAILABLE,
                                                      TIMESTAMP_CREATE_TIME}
            assert {m.timestamp for m in got} <= {-1, 0}
        else:
            assert [m.timestamp for m in got] == [item["timestamp"] for item in items]
            assert {m.timestamp_type for m in got} == {TIMESTAMP_CREATE_TIME}


@pytest.mark.parametrize("fallback", ["0.10.0", pytest.param("0.9.0", marks=pytest.mark.slow)])
def test_new_producer_old_consumer(module_broker: Any, topic: str, fallback: str) -> None:
    """Today's producer (idempotent, lz4, headers) and an old consumer: batches converted down,
    headers dropped, the records whole, from an offset in the middle of a batch too."""
    create_topic(module_broker.bootstrap, topic)
    items = [{**item, "headers": [("h", b"x")]} for item in _items(200)]
    produce_all(module_broker.bootstrap, topic, items, compression_type="lz4",
                enable_idempotence=True, linger_ms=50)
    old = _conf(OLD_LIBRDKAFKA[fallback])
    got = consume(module_broker.bootstrap, topic, expected=len(items), **old)[0]
    assert [(m.key, m.value or b"") for m in got] == [(i["key"], i["value"]) for i in items]
    assert [m.offset for m in got] == list(range(len(items)))
    if fallback == "0.10.0":
        assert [m.timestamp for m in got] == [item["timestamp"] for item in items]
    middle = consume(module_broker.bootstrap, topic, start=137, expected=len(items) - 137,
                     **old)[0]
    assert [m.offset for m in middle] == list(range(137, len(items)))


@pytest.mark.slow
def test_kafka_python_0_10_1(module_broker: Any, topic: str) -> None:
    """kafka-python pinned to 0.10.1 (Produce v2 with magic 1, Fetch v3): both ways."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    create_topic(module_broker.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap, api_version=(0, 10, 1),
                             compression_type="gzip")
    items = _items(100)
    futures = [producer.send(topic, key=i["key"], value=i["value"], partition=0,
                             timestamp_ms=i["timestamp"]) for i in items]
    producer.flush(30)
    assert [f.get(10).offset for f in futures] == list(range(len(items)))
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=module_broker.bootstrap, api_version=(0, 10, 1),
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek(partition, 0)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(items) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += records
    consumer.close()
    assert [(r.key, r.value, r.offset, r.timestamp) for r in got] == [
        (i["key"], i["value"], n, i["timestamp"]) for n, i in enumerate(items)]


@pytest.mark.slow
@pytest.mark.parametrize("fallback", ["0.9.0", "0.10.0"])
def test_kcat_without_api_versions(module_broker: Any, topic: str, fallback: str) -> None:
    """kcat (Debian's, librdkafka 2.0) as an old setup runs it: -X api.version.request=false."""
    create_topic(module_broker.bootstrap, topic)
    old = ["-X", "api.version.request=false", "-X", f"broker.version.fallback={fallback}"]
    lines = [f"k{i}:line {i}" for i in range(50)]
    subprocess.run([KCAT, "-b", module_broker.bootstrap, *old, "-P", "-t", topic, "-p", "0",
                    "-K:", "-z", "gzip"], input="\n".join(lines) + "\n", text=True,
                   check=True, timeout=60)
    consumed = subprocess.run([KCAT, "-b", module_broker.bootstrap, *old, "-C", "-t", topic,
                               "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o %k:%s\n"],
                              capture_output=True, text=True, check=True, timeout=60).stdout
    assert consumed.splitlines() == [f"{i} {line}" for i, line in enumerate(lines)]
