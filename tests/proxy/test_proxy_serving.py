"""What the proxy tier promises consumers: long polls woken by brokers' notices (idle consumers
cost no storage reads), tailing consumers served from the cache, and consumption that carries on
through a proxy restart and through the replacement of a partition's broker."""

from __future__ import annotations

import asyncio
import threading
import time

from confluent_kafka.admin import AdminClient, NewTopic

from bmq.net.client import BrokerLink
from bmq.protocol.messages import FetchRequest
from bmq.protocol.messages.fetch_request import FetchPartition, FetchTopic
from tests.cluster.conftest import Cluster, ClusterFactory, SharedStorage
from tests.proxy.conftest import Proxies, ProxyProcess
from tests.proxy.test_proxy import _consume, _produce, _tail_while_producing


def _topic(cluster: Cluster, bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    cluster.wait_writable(name)


def _fetch(topic: str, partitions: int, offsets: list[int], max_wait_ms: int) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[FetchTopic(
                            topic=topic, partitions=[
                                FetchPartition(partition=p, fetch_offset=offsets[p],
                                               partition_max_bytes=1 << 20)
                                for p in range(partitions)])])


async def _idle_then_wake(proxy: ProxyProcess, topic: str, partitions: int, offsets: list[int],
                          produce: threading.Event) -> tuple[float, float, float]:
    """200 fetches parked at the end of the log (max wait 500 ms, re-sent when answered) for
    3 s: returns the storage reads and CPU seconds they cost; then one produce must wake a
    fetch parked with a 10 s max wait: returns how long the wake took."""
    links = [BrokerLink(proxy.host, proxy.port, f"idle-{i}") for i in range(20)]
    stop = time.monotonic() + 3.0
    answered = 0

    async def consumer(link: BrokerLink) -> None:
        nonlocal answered
        while time.monotonic() < stop:
            response = await link.request(_fetch(topic, partitions, offsets, 500), 12)
            assert all(p.records in (b"", None) for t in response.responses
                       for p in t.partitions)
            answered += 1

    await asyncio.gather(*(consumer(links[i % 20]) for i in range(3)))   # warm: views open
    reads, cpu = proxy.metric("bmq_proxy_storage_reads_total"), proxy.cpu_seconds()
    stop = time.monotonic() + 3.0
    await asyncio.gather(*(consumer(links[i % 20]) for i in range(200)))
    reads = proxy.metric("bmq_proxy_storage_reads_total") - reads
    cpu = proxy.cpu_seconds() - cpu
    assert answered >= 200          # each answered after its max wait, then sent again
    started = time.monotonic()
    parked = asyncio.ensure_future(links[0].request(_fetch(topic, partitions, offsets, 10_000),
                                                    12))
    await asyncio.sleep(0.5)
    produce.set()
    response = await parked
    woke = time.monotonic() - started - 0.5
    assert any(p.records for t in response.responses for p in t.partitions)
    for link in links:
        link.close()
    return reads, cpu, woke


def test_idle_consumers_cost_no_storage_reads_and_produce_wakes_them(
        cluster_factory: ClusterFactory, proxies: Proxies) -> None:
    cluster = cluster_factory(brokers=2)
    proxy = proxies(cluster)
    _topic(cluster, proxy.bootstrap, "idle", 4)
    acked = _produce(proxy.bootstrap, "idle", 100)
    offsets = [len(acked.get(p, [])) for p in range(4)]
    produce = threading.Event()

    def producer() -> None:
        produce.wait(30)
        _produce(proxy.bootstrap, "idle", 4, tag="wake")

    thread = threading.Thread(target=producer)
    thread.start()
    reads, cpu, woke = asyncio.run(_idle_then_wake(proxy, "idle", 4, offsets, produce))
    thread.join(60)
    assert reads == 0, f"idle consumers caused {reads} storage reads"
    assert cpu < 1.5, f"idle consumers cost {cpu:.2f} CPU seconds in 3 s"
    assert woke < 2.0, f"a parked fetch woke {woke:.2f} s after the produce"


def test_tailing_consumers_hit_the_cache(cluster_factory: ClusterFactory,
                                         proxies: Proxies) -> None:
    cluster = cluster_factory(brokers=2)
    proxy = proxies(cluster)
    _topic(cluster, proxy.bootstrap, "tail", 2)
    results = _tail_while_producing(proxy.bootstrap, "tail", 6000, consumers=3, timeout=90)
    assert len(results) == 3 and all(sum(map(len, r.values())) == 6000 for r in results)
    hits = proxy.metric("bmq_proxy_cache_hits_total")
    misses = proxy.metric("bmq_proxy_cache_misses_total")
    assert hits / (hits + misses) >= 0.95, (hits, misses)


def test_consumption_continues_through_proxy_restart_and_broker_replacement(
        cluster_factory: ClusterFactory, proxies: Proxies,
        shared_storage: SharedStorage) -> None:
    """On a shared directory and on S3 (where proxies read objects through the manifest)."""
    cluster = cluster_factory(brokers=3, storage=shared_storage)
    p1, p2 = proxies(cluster), proxies(cluster)
    bootstrap = f"{p1.bootstrap},{p2.bootstrap}"
    _topic(cluster, bootstrap, "moving", 6)
    acked = _produce(bootstrap, "moving", 3000, tag="a")
    first = _consume(bootstrap, "moving", 1000, group="mover", timeout=60)
    assert sum(map(len, first.values())) >= 1000
    p1.kill()
    p1.start()                              # same address: same proxy id
    victim = cluster.owners("moving")[0]
    cluster.brokers[victim].kill()          # its partitions move while we read them
    for partition, values in _produce(bootstrap, "moving", 3000, tag="b").items():
        acked.setdefault(partition, []).extend(values)
    rest = _consume(bootstrap, "moving", 6000 - sum(map(len, first.values())), group="mover",
                    timeout=90)
    # Committed positions carry over: the two runs together hold every acked message once,
    # in order per partition (the first run may have read past its last commit: no gaps, and
    # any repeat is an exact repeat of the tail of the first run).
    for partition, values in acked.items():
        got = first.get(partition, []) + rest.get(partition, [])
        assert set(got) == set(values), partition
        assert got[len(got) - len(values):] == values or \
            [v for i, v in enumerate(got) if v not in got[:i]] == values
