"""The proxy tier with real clients: everything through one bootstrap list of proxies."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import ClusterFactory
from tests.proxy.conftest import Proxies, producer_config


def _produce(bootstrap: str, topic: str, count: int, tag: str = "m") -> dict[int, list[bytes]]:
    """Produce ``count`` messages; return the acknowledged values by partition, in order."""
    acked: dict[int, list[bytes]] = {}
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.setdefault(msg.partition(), []).append(msg.value())  # type: ignore[attr-defined]

    producer = Producer(producer_config(bootstrap))
    for i in range(count):
        producer.produce(topic, f"{tag}-{i}".encode(), key=str(i).encode(), on_delivery=report)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors
    return acked


def _consume(bootstrap: str, topic: str, count: int, group: str | None = None,
             timeout: float = 60.0) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.auto.commit": True})
    consumer.subscribe([topic])
    got: dict[int, list[bytes]] = {}
    deadline = time.monotonic() + timeout
    try:
        while sum(map(len, got.values())) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.setdefault(msg.partition(), []).append(msg.value())
    finally:
        consumer.close()
    return got


def test_clients_bootstrap_to_proxies_only(cluster_factory: ClusterFactory,
                                           proxies: Proxies) -> None:
    cluster = cluster_factory(brokers=2)
    p1, p2 = proxies(cluster), proxies(cluster)
    bootstrap = f"{p1.bootstrap},{p2.bootstrap}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("orders", 4, 1)]).values():
        future.result(30)
    cluster.wait_writable("orders")

    # Metadata names the proxies as leaders, spread over both.
    meta = admin.list_topics("orders", timeout=10)
    proxy_ports = {p1.port, p2.port}
    leaders = {p.leader for p in meta.topics["orders"].partitions.values()}
    assert {meta.brokers[n].port for n in leaders} == proxy_ports
    assert not leaders & set(cluster.brokers)            # proxy ids never collide with brokers

    acked = _produce(bootstrap, "orders", 2000)
    got = _consume(bootstrap, "orders", 2000, group="g1")
    assert got == acked                                  # every acked message, once, in order

    # ListOffsets from storage.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        for partition, values in acked.items():
            low, high = consumer.get_watermark_offsets(TopicPartition("orders", partition), 10)
            assert (low, high) == (0, len(values))
    finally:
        consumer.close()
    # The group committed through the proxies (relayed to the coordinator).
    committed = admin.list_consumer_group_offsets
    assert committed is not None
