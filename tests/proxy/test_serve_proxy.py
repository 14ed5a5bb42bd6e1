"""`bmq serve` runs the proxy role too: its consumers' fetches go through the shared record
cache, woken by the broker's own flushes."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import free_port
from tests.metrics import scrape
from tests.proxy.test_proxy import _tail_while_producing


def test_serve_fetches_go_through_the_proxy_cache(broker_factory: Any) -> None:
    port = free_port()
    broker = broker_factory(env={"BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"},
                            extra_args=["--metrics-port", str(port)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("served", 2, 1)]).values():
        future.result(30)
    results = _tail_while_producing(broker.bootstrap, "served", 4000, consumers=2, timeout=60)
    assert len(results) == 2 and all(sum(map(len, r.values())) == 4000 for r in results)
    samples = scrape.scrape(port)
    hits = scrape.value(samples, "bmq_proxy_cache_hits_total")
    misses = scrape.value(samples, "bmq_proxy_cache_misses_total")
    assert hits >= 20 and hits / (hits + misses) >= 0.95, (hits, misses)
