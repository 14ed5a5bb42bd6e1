"""The proxy tier with real clients: everything through one bootstrap list of proxies."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from bmq.net.client import BrokerLink
from bmq.protocol.messages import (
    DescribeClusterRequest,
    FindCoordinatorRequest,
    ListTransactionsRequest,
)
from tests.cluster.conftest import ClusterFactory
from tests.conftest import bmq_command
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


def _tail_while_producing(bootstrap: str, topic: str, count: int, consumers: int,
                          timeout: float) -> list[dict[int, list[bytes]]]:
    """``consumers`` consumers tail ``topic`` (still empty) while ``count`` messages arrive in
    a steady stream; what each consumed, by partition."""
    results: list[dict[int, list[bytes]]] = []
    readers = [threading.Thread(target=lambda: results.append(
        _consume(bootstrap, topic, count, timeout=timeout))) for _ in range(consumers)]
    for reader in readers:
        reader.start()
    time.sleep(3)       # the consumers are tailing the (empty) partitions
    producer = Producer(producer_config(bootstrap, **{"linger.ms": 2}))
    for i in range(count):
        producer.produce(topic, f"{topic}-{i}".encode(), key=str(i).encode())
        producer.poll(0)
        if i % 100 == 99:
            time.sleep(0.05)        # a steady stream, not one burst
    assert producer.flush(60) == 0
    for reader in readers:
        reader.join(timeout + 30)
    return results


def _ask(bootstrap: str, request: Any, version: int) -> Any:
    """One request to one node, over the wire; its answer."""
    host, port = bootstrap.split(":")

    async def ask() -> Any:
        link = BrokerLink(host, int(port))
        try:
            return await link.request(request, version)
        finally:
            link.close()

    return asyncio.run(ask())


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
    # Each address keeps its id (a restarted proxy is the same node); nothing else is left.
    assert sorted(cluster.zk.get_children(f"{cluster.root}/proxy_ids")) == sorted(
        [p1.bootstrap, p2.bootstrap])

    acked = _produce(bootstrap, "orders", 2000)
    got = _consume(bootstrap, "orders", 2000, group="g1")
    assert got == acked                                  # every acked message, once, in order

    # ListOffsets from storage: one partition per request, and all in one request.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        for partition, values in acked.items():
            low, high = consumer.get_watermark_offsets(TopicPartition("orders", partition), 10)
            assert (low, high) == (0, len(values))
    finally:
        consumer.close()
    ends = admin.list_offsets({TopicPartition("orders", p): OffsetSpec.latest()
                               for p in range(4)})
    assert {tp.partition: f.result(30).offset for tp, f in ends.items()} == {
        p: len(acked.get(p, [])) for p in range(4)}

    # DeleteRecords goes to each partition's leader, a proxy, which has each owner delete its
    # own partition's records (relayed to just any broker, it was NOT_LEADER_OR_FOLLOWER);
    # DescribeCluster names the proxies too, as Metadata does (the Java Admin finds leaders
    # among DescribeCluster's nodes).
    deleted = admin.delete_records([TopicPartition("orders", p, 1) for p in range(4)])
    assert sorted((tp.partition, f.result(30).low_watermark) for tp, f in deleted.items()) == [
        (p, 1) for p in range(4)]
    first = cluster.brokers[min(cluster.brokers)]
    assert {b.port for b in _ask(first.bootstrap, DescribeClusterRequest(), 0).brokers} == \
        proxy_ports | {b.port for b in cluster.brokers.values()}
    acked = {p: values[1:] for p, values in acked.items()}
    # ListTransactions asked of every node, as admin clients ask: each transaction once (a
    # proxy coordinates none; relayed to a broker, the lowest live one first, it repeated that
    # broker's answer). The transactional id is one that broker coordinates.
    transactional_id = next(
        name for name in (f"txn-{uuid.uuid4().hex[:8]}" for _ in range(1000))
        if _ask(first.bootstrap, FindCoordinatorRequest(key=name, key_type=1), 3).node_id
        == first.broker_id)
    transactional = Producer({"bootstrap.servers": bootstrap,
                              "transactional.id": transactional_id})
    transactional.init_transactions(30)
    nodes = [b.bootstrap for b in cluster.brokers.values()] + [p1.bootstrap, p2.bootstrap]
    assert [t.transactional_id for node in nodes
            for t in _ask(node, ListTransactionsRequest(), 1).transaction_states] == [
        transactional_id]

    # kcat (Debian's librdkafka 2.0) reads the topic to its end through a proxy too.
    out = subprocess.run(["kcat", "-b", p2.bootstrap, "-C", "-t", "orders", "-o", "beginning",
                          "-e", "-q", "-f", "%p:%s\\n"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    by_partition: dict[int, list[bytes]] = {}
    for line in out.splitlines():
        partition, _, value = line.partition(":")
        by_partition.setdefault(int(partition), []).append(value.encode())
    assert by_partition == acked

    # The operator's view: `bmq cluster info` lists both proxies.
    info = json.loads(subprocess.run(
        [*bmq_command(), "cluster", "info", "-b", bootstrap, "--zookeeper",
         cluster.zk_server.hosts, "--root", cluster.root, "-o", "json"],
        capture_output=True, text=True, timeout=60, check=True).stdout)
    assert sorted(p["port"] for p in info["zookeeper"]["proxies"]) == sorted(proxy_ports)
    # Proxies are nodes in Metadata, but not brokers.
    assert sorted(b["id"] for b in info["brokers"]) == [1, 2]
    assert sorted(p["port"] for p in info["proxies"]) == sorted(proxy_ports)
    text = subprocess.run([*bmq_command(), "cluster", "info", "-b", bootstrap],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    assert ": 2 brokers, 2 proxies, controller" in text, text


def test_kafka_python_and_aiokafka_through_proxies(cluster_factory: ClusterFactory,
                                                   proxies: Proxies) -> None:
    """The Python clients too: a group member each, seeks, offsets by time, all via proxies."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    cluster = cluster_factory(brokers=2)
    proxy = proxies(cluster)
    bootstrap = proxy.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("py", 3, 1)]).values():
        future.result(30)
    cluster.wait_writable("py")
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(300):
        producer.send("py", key=str(i % 3).encode(), value=f"kp-{i}".encode(), partition=i % 3,
                      timestamp_ms=1_700_000_000_000 + i)
    producer.flush(30)
    producer.close()

    async def aio() -> list[bytes]:
        aio_producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await aio_producer.start()
        try:
            for i in range(30):
                await aio_producer.send_and_wait("py", f"aio-{i}".encode(), partition=0)
        finally:
            await aio_producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            tp = __import__("aiokafka").TopicPartition("py", 0)
            consumer.assign([tp])
            consumer.seek(tp, 90)          # a seek into the middle
            got: list[bytes] = []
            while len(got) < 40:
                batch = await consumer.getmany(tp, timeout_ms=2000)
                got += [m.value for m in batch.get(tp, [])]
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(aio())
    assert got[:10] == [f"kp-{i}".encode() for i in range(270, 300, 3)]
    assert got[10:40] == [f"aio-{i}".encode() for i in range(30)]

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        tp = KTopicPartition("py", 1)
        consumer.assign([tp])
        found = consumer.offsets_for_times({tp: 1_700_000_000_000 + 151})[tp]
        assert found is not None and found.offset == 50    # record 151, at offset 50
        assert consumer.end_offsets([tp])[tp] == 100
        consumer.seek(tp, found.offset)
        first = next(iter(consumer))
        assert first.value == b"kp-151" and first.offset == 50
    finally:
        consumer.close()


def test_one_clients_slow_request_does_not_hold_up_anothers(cluster_factory: ClusterFactory,
                                                           proxies: Proxies) -> None:
    """A broker answers each connection's requests in order, so the proxy forwards each client
    connection's requests on links of its own. Here one client's JoinGroup, relayed to the
    broker, waits out the group's initial rebalance delay (3 s); another client produces
    through the same proxy meanwhile and gets its acks at once."""
    from tests.integration.kwire import KafkaWire, array, i16, i32, nbytes, string

    cluster = cluster_factory(brokers=1, env={"BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": 3000})
    proxy = proxies(cluster)
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    for future in admin.create_topics([NewTopic("hol", 1, 1)]).values():
        future.result(30)
    cluster.wait_writable("hol")
    producer = Producer(producer_config(proxy.bootstrap, **{"linger.ms": 0}))
    producer.produce("hol", b"warm-up")
    assert producer.flush(30) == 0                  # connections and metadata in place

    join_group = 11
    body = (string("slow-group") + i32(10_000) + string("") + string("consumer")
            + array([string("range") + nbytes(i16(0) + i32(0) + nbytes(None))]))
    joined: list[float] = []

    def join() -> None:
        with KafkaWire(proxy.bootstrap, timeout=30) as wire:
            started = time.monotonic()
            answer = wire.request(join_group, 0, body)
            joined.append(time.monotonic() - started)
            assert answer[:2] == i16(0)              # joined: no error

    joiner = threading.Thread(target=join)
    joiner.start()
    time.sleep(0.5)                                 # the JoinGroup is parked at the broker
    latencies = []
    for i in range(5):
        started = time.monotonic()
        producer.produce("hol", f"during-{i}".encode())
        assert producer.flush(30) == 0
        latencies.append(time.monotonic() - started)
    joiner.join(30)
    assert joined and joined[0] >= 2.5, joined      # the JoinGroup was slow, and outstanding
    assert sum(latencies) < 1.5, latencies          # the produces did not wait behind it


def test_a_proxy_registers_only_once_it_accepts_connections(cluster_factory: ClusterFactory,
                                                             proxies: Proxies) -> None:
    """Clients learn of a proxy from Metadata as soon as it registers; a connection refused
    then would make them back off from it. A watcher connects the moment the node appears."""
    import socket

    cluster = cluster_factory(brokers=1)
    cluster.zk.ensure_path(cluster.paths.proxies)
    accepted: list[bool] = []

    def on_proxies(children: list[str]) -> None:
        for child in children:
            doc = json.loads(cluster.zk.get(f"{cluster.paths.proxies}/{child}")[0])
            try:
                socket.create_connection((doc["host"], doc["port"]), timeout=2).close()
                accepted.append(True)
            except OSError:
                accepted.append(False)

    cluster.zk.ChildrenWatch(cluster.paths.proxies, on_proxies)
    proxies(cluster)
    deadline = time.monotonic() + 10
    while not accepted and time.monotonic() < deadline:
        time.sleep(0.05)
    assert accepted == [True]
