"""A broker frozen (SIGSTOP) behind a proxy: once its partitions move, the proxy forwards what
it had forwarded to the frozen broker to the new owners itself (batches with a producer id; the
others are answered NOT_LEADER_OR_FOLLOWER), so a producer connected to the proxy carries on
with the new owners while the broker is still frozen (a client connected straight to the frozen
broker waits for its own request timeout, as with Kafka)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from bench.failover_clients import AiokafkaProducer
from bmq.net.client import BrokerLink
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import FindCoordinatorRequest
from tests.cluster.conftest import Cluster, ClusterFactory
from tests.cluster.workload import SteadyProducer, verify
from tests.proxy.conftest import Proxies, ProxyProcess

PARTITIONS = 6
FROZEN_S = 15.0


def _cluster_with_proxy(cluster_factory: ClusterFactory, proxies: Proxies,
                        topic: str) -> tuple[Cluster, ProxyProcess]:
    cluster = cluster_factory(brokers=3)
    proxy = proxies(cluster)
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    cluster.wait_writable(topic)
    return cluster, proxy


@contextlib.contextmanager
def _broker_2_frozen(cluster: Cluster, topic: str, producer: Any,
                     on_pause: Callable[[], None] = lambda: None) -> Iterator[float]:
    """SIGSTOP broker 2 (``on_pause`` just before) until its partitions are writable elsewhere
    and the producer has acks from their new owners (yields how long that took), then SIGCONT
    and wait for it to own partitions again."""
    time.sleep(1.5)
    moved = [p for p, owner in cluster.owners(topic).items() if owner == 2]
    assert moved
    frozen = cluster.brokers[2]
    on_pause()
    paused = time.monotonic()
    frozen.pause()
    try:
        cluster.wait_writable(topic, owners={1, 3}, timeout=20)
        cluster.wait_for(
            lambda: all(any(t > paused for t in producer.ack_times[p]) for p in moved),
            FROZEN_S - (time.monotonic() - paused), "acks from the new owners while frozen")
        yield time.monotonic() - paused
    finally:
        frozen.resume()
    cluster.wait_for(lambda: bool([p for p, o in cluster.owners(topic).items() if o == 2]),
                     30, "broker 2 back")
    time.sleep(1)


def test_frozen_broker_behind_a_proxy_does_not_hold_up_its_producers(
        cluster_factory: ClusterFactory, proxies: Proxies) -> None:
    cluster, proxy = _cluster_with_proxy(cluster_factory, proxies, "frozen")
    # librdkafka's own request timeout (30 s) is longer than the freeze: only the proxy's
    # answer can move the producer on before SIGCONT.
    producer = SteadyProducer(proxy.bootstrap, "frozen", PARTITIONS, rate=300).start()
    try:
        with _broker_2_frozen(cluster, "frozen", producer) as took:
            print(f"SIGSTOP behind a proxy: every moved partition acknowledged again within "
                  f"{took:.2f}s")
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    assert verify(producer, proxy.bootstrap) == producer.sent


def test_a_producer_behind_a_proxy_sees_no_error_when_a_frozen_brokers_partitions_move(
        cluster_factory: ClusterFactory, proxies: Proxies,
        caplog: pytest.LogCaptureFixture) -> None:
    """aiokafka, told NOT_LEADER_OR_FOLLOWER, asks a node its last Metadata listed for new
    metadata (at random: the frozen broker too) and sends the proxy nothing until it answers
    (40 s later, or at SIGCONT). The proxy holds the batches instead, and answers those it
    could not forward in time REQUEST_TIMED_OUT, which aiokafka retries on the proxy without
    asking for metadata: no other error reaches it."""
    cluster, proxy = _cluster_with_proxy(cluster_factory, proxies, "held")
    producer = AiokafkaProducer(proxy.bootstrap, "held", PARTITIONS, rate=300).start()
    try:
        caplog.set_level(logging.WARNING, logger="aiokafka")
        with _broker_2_frozen(cluster, "held", producer, on_pause=caplog.clear):
            errors = [r.getMessage() for r in caplog.records if r.name.startswith("aiokafka")
                      and "RequestTimedOutError" not in r.getMessage()]
        assert not errors, errors[:5]
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    assert verify(producer, proxy.bootstrap) == producer.sent


def test_idempotent_producer_behind_a_proxy_through_a_rolling_restart(
        cluster_factory: ClusterFactory, proxies: Proxies) -> None:
    """While a draining owner answers batch N NOT_LEADER_OR_FOLLOWER, batch N+1 must not reach
    the new owner first: librdkafka's idempotent producer takes the new owner's
    OUT_OF_ORDER_SEQUENCE_NUMBER as fatal. The proxy keeps each partition's batches in order."""
    cluster, proxy = _cluster_with_proxy(cluster_factory, proxies, "rolled")
    producer = SteadyProducer(proxy.bootstrap, "rolled", PARTITIONS, rate=500).start()
    try:
        time.sleep(1.5)
        for _ in range(2):
            for broker_id in (1, 2, 3):
                cluster.brokers[broker_id].restart()     # SIGTERM: drains, then starts again
                cluster.wait_for(lambda b=broker_id: b in cluster.owners("rolled").values(),
                                 30, f"broker {broker_id} back")
                cluster.wait_writable("rolled")
        time.sleep(1)
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    assert verify(producer, proxy.bootstrap) == producer.sent


def test_relayed_calls_go_to_the_next_broker_while_the_lowest_is_gone(
        cluster_factory: ClusterFactory, proxies: Proxies) -> None:
    """A broker gone while still registered (killed with the controller frozen, so its
    registration lasts until its ZooKeeper session expires): what the proxy relays to the lowest
    broker (FindCoordinator, admin calls) goes to the next one. Before, the client's connection
    was closed with the refused connection's error until the registration expired."""
    cluster = cluster_factory(brokers=2, env={"BMQ_ZOOKEEPER_SESSION_TIMEOUT_MS": 20000})
    proxy = proxies(cluster)
    host, port = proxy.bootstrap.rsplit(":", 1)

    async def find_coordinator() -> Any:
        link = BrokerLink(host, int(port), "test")
        try:
            return await link.request(FindCoordinatorRequest(key="g", key_type=0), 3)
        finally:
            link.close()

    assert asyncio.run(find_coordinator()).error_code == ErrorCode.NONE
    controller = cluster.controllers[0]
    os.kill(controller.pid, signal.SIGSTOP)
    try:
        cluster.brokers[1].kill()
        answer = asyncio.run(find_coordinator())
        assert cluster.zk.exists(cluster.paths.broker(1)), "broker 1's registration expired"
        assert answer.error_code == ErrorCode.NONE and answer.node_id >= 0, answer
    finally:
        os.kill(controller.pid, signal.SIGCONT)
