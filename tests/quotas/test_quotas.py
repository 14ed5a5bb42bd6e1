"""Client quotas on real clients (confluent-kafka): a client id held to its producer or consumer
byte rate by Kafka's throttle_time_ms and channel muting while another client in the same run
is not slowed; quotas set, listed and removed with `bmq quota` (AlterClientQuotas,
DescribeClientQuotas) and kept across a restart."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cli.conftest import Bmq
from tests.conftest import BrokerFactory

RATE = 1_000_000
VALUE = b"q" * 50_000
SECONDS = 6.0


def _produce_for(bootstrap: str, client_id: str, topic: str, seconds: float,
                 out: dict[str, Any]) -> None:
    throttled: list[int] = []
    acked = [0]

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += len(msg.value())

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "linger.ms": 5, "throttle_cb": lambda e: throttled.append(
                             e.throttle_time), "statistics.interval.ms": 0})
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    started_flush = time.monotonic()
    producer.flush(60)
    out[client_id] = (acked[0] / (time.monotonic() - started_flush + seconds), throttled)


def test_a_producer_quota_holds_one_client_and_not_another(broker_factory: BrokerFactory
                                                           ) -> None:
    broker = broker_factory()
    bmq = Bmq(broker.bootstrap)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("quota", 2, 1)]).values():
        future.result(30)
    bmq("quota", "set", "--client-id", "slow", "--producer-byte-rate", str(RATE))
    results: dict[str, Any] = {}
    threads = [threading.Thread(target=_produce_for,
                                args=(broker.bootstrap, name, "quota", SECONDS, results))
               for name in ("slow", "fast")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    slow_rate, slow_throttles = results["slow"]
    fast_rate, fast_throttles = results["fast"]
    print(f"slow {slow_rate / 1e6:.2f} MB/s ({len(slow_throttles)} throttles), "
          f"fast {fast_rate / 1e6:.2f} MB/s")
    assert 0.3 * RATE <= slow_rate <= 1.7 * RATE, slow_rate
    assert slow_throttles and max(slow_throttles) > 0
    assert fast_rate > 3 * slow_rate and not fast_throttles

    listed = json.loads(bmq("quota", "list", "-o", "json").out)
    assert listed == [{"user": None, "client_id": "slow", "key": "producer_byte_rate",
                       "value": float(RATE)}]
    broker.restart()
    assert json.loads(bmq("quota", "list", "-o", "json").out) == listed
    bad = bmq("quota", "set", "--client-id", "slow", "--producer-byte-rate", "-5", check=False)
    assert bad.code == 1 and "INVALID_REQUEST" in bad.err
    bmq("quota", "remove", "--client-id", "slow")
    assert json.loads(bmq("quota", "list", "-o", "json").out) == []


def test_a_consumer_quota_holds_its_fetches(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    bmq = Bmq(broker.bootstrap)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for _ in range(500):                       # 25 MB: unthrottled, 5 MB/s over the 5 s
        producer.produce("fetched", VALUE, partition=0)
    producer.flush(60)
    bmq("quota", "set", "--client-id", "reader", "--consumer-byte-rate", str(RATE))
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "reader",
                         "group.id": "q", "fetch.max.bytes": 1_000_000,
                         "max.partition.fetch.bytes": 1_000_000})
    consumer.assign([TopicPartition("fetched", 0, 0)])
    got = 0
    start = time.monotonic()
    while time.monotonic() - start < 5:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got += len(message.value())
    rate = got / (time.monotonic() - start)
    consumer.close()
    assert 0.3 * RATE <= rate <= 1.7 * RATE, rate
