"""A broker frozen (SIGSTOP) or killed (kill -9) under idempotent producers behind a proxy
(issue #30): the partitions of the healthy brokers keep their latency (a client connection gets
its answers in order, so one request held on the frozen broker would hold all of them), the
frozen broker's partitions are writable again within the ZooKeeper session timeout + 2 s, no
producer sees a fatal error, and every acknowledged record is read back once, at its offset.

Each producer (confluent-kafka, idempotent, acks=all) writes every partition of a topic of its
own; ``bench.proxy_freeze`` measures the same with BMQ's default settings."""

from __future__ import annotations

import time

import pytest

from bench.proxy_freeze import WatchedProducer, fault_round, start_producers
from tests.cluster.conftest import ClusterFactory
from tests.cluster.workload import verify
from tests.proxy.conftest import Proxies

PARTITIONS = 12
SESSION_TIMEOUT_S = 3.0
# A healthy broker's partitions: the proxy answers a frozen owner's part within 0.5 s
# (bmq.client.produce.STALL_S); the rest is the client's retry back-off and CI's load.
HEALTHY_GAP_S = 1.5
# The frozen broker's: its partitions move once its session expires.
MOVED_GAP_S = SESSION_TIMEOUT_S + 2.0


def _faults(cluster_factory: ClusterFactory, proxies: Proxies, bootstraps: list[str],
            fault: str, freeze_s: float, rounds: int, rate: float) -> None:
    cluster = cluster_factory(
        brokers=3, env={"BMQ_ZOOKEEPER_SESSION_TIMEOUT_MS": int(SESSION_TIMEOUT_S * 1000)})
    proxy = proxies(cluster)
    producers: list[WatchedProducer] = []
    try:
        producers = start_producers(cluster, proxy, bootstraps, PARTITIONS, rate)
        for _ in range(rounds):
            time.sleep(2)
            for producer, seen in zip(producers, fault_round(cluster, producers, fault,
                                                             freeze_s), strict=True):
                print(f"{fault} {freeze_s}s, {producer.topic}: {seen.describe()}")
                assert not seen.fatal, seen.fatal
                assert seen.healthy_gap < HEALTHY_GAP_S, seen.describe()
                assert seen.victim_gap < MOVED_GAP_S, seen.describe()
    finally:
        for producer in producers:
            producer.stop()
    for producer in producers:
        assert not producer.fatal, producer.fatal
        assert not producer.failed, producer.failed[:5]
        verify(producer, proxy.bootstrap)


def test_a_frozen_broker_holds_up_no_other_partition_behind_a_proxy(
        cluster_factory: ClusterFactory, proxies: Proxies) -> None:
    _faults(cluster_factory, proxies, ["proxy", "brokers"], "sigstop", freeze_s=5.0, rounds=1,
            rate=200)


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "freeze_s", "rounds"), [
    ("kill", 5.0, 2), ("sigstop", 12.0, 2), ("sigstop", 2.0, 3)])
def test_broker_faults_behind_a_proxy_under_idempotent_producers(
        cluster_factory: ClusterFactory, proxies: Proxies, fault: str, freeze_s: float,
        rounds: int) -> None:
    """kill -9 (partitions move at once), a freeze past the session timeout (they move while
    it is frozen) and one shorter than it (they stay: its answers come after SIGCONT)."""
    _faults(cluster_factory, proxies, ["proxy", "brokers"], fault, freeze_s, rounds, rate=1000)
