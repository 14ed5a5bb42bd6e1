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
VALUE = b"q" * 10_000
SECONDS = 8.0
FAST_RATE = 5_000_000
# A short quota window (2 samples of 1 s), so the burst a new client may send before its
# first throttle (about one window's worth, as in Kafka) is small beside the run.
WINDOW = {"quota.window.num": 2, "quota.window.size.seconds": 1}


def _produce_for(bootstrap: str, client_id: str, topic: str, paced: float | None,
                 out: dict[str, Any]) -> None:
    """Produce for SECONDS (flat out, or at ``paced`` bytes/s); record the acknowledged rate
    and the throttle times the client was told."""
    throttled: list[int] = []
    acks: list[tuple[float, int]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "linger.ms": 5, "queue.buffering.max.kbytes": 2048,
                         "message.timeout.ms": 60000,
                         "throttle_cb": lambda e: throttled.append(e.throttle_time)})
    start = time.monotonic()
    sent = 0
    while time.monotonic() - start < SECONDS:
        if paced is not None and sent > paced * (time.monotonic() - start):
            producer.poll(0.005)
            continue
        try:
            producer.produce(topic, VALUE, on_delivery=lambda err, msg: acks.append(
                (time.monotonic(), len(msg.value()))) if err is None else None)
            sent += len(VALUE)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    end = time.monotonic()
    producer.flush(60)
    acked = sum(n for t, n in acks if t <= end)
    out[client_id] = (acked / (end - start), throttled)


def test_a_producer_quota_holds_one_client_and_not_another(broker_factory: BrokerFactory
                                                           ) -> None:
    broker = broker_factory(config=WINDOW)
    bmq = Bmq(broker.bootstrap)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("quota", 2, 1)]).values():
        future.result(30)
    bmq("quota", "set", "--client-id", "slow", "--producer-byte-rate", str(RATE))
    results: dict[str, Any] = {}
    threads = [threading.Thread(target=_produce_for,
                                args=(broker.bootstrap, name, "quota", paced, results))
               for name, paced in (("slow", None), ("fast", FAST_RATE))]
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
    assert fast_rate > 0.8 * FAST_RATE and not fast_throttles

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
    broker = broker_factory(config=WINDOW)
    bmq = Bmq(broker.bootstrap)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for _ in range(2500):                      # 25 MB: unthrottled, 5 MB/s over the 5 s
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
