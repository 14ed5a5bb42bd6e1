"""Throughput and request latency from the metrics brokers export (``bmq.metrics``: the
Prometheus text of ``/metrics`` on each broker's ``--metrics-port``), for the Cluster page's
charts and the Topics page's rates. Brokers do not advertise that port over the Kafka protocol,
so the console is told it (``bmq console --metrics http://HOST:PORT[,...]``).

Nothing is scraped in the background: a page that shows rates asks for them (the Cluster page
every METRICS_POLL_S while open), each ask scrapes every port once, and rates are the counters'
change since the previous scrape (a counter that went down, its broker restarted, counts from
0). Latency is over the requests answered between the two scrapes, from the
``bmq_request_duration_seconds`` histogram summed over brokers and APIs, without the APIs that
wait by design (a Fetch's long poll, a JoinGroup's rebalance), which would otherwise make an
idle cluster's latency its consumers' ``fetch.wait.max.ms``."""

from __future__ import annotations

import math
import threading
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bmq.console.pages import ConsolePages

# How often an open Cluster page asks for a sample (one scrape of each broker).
METRICS_POLL_S = 5
SCRAPE_TIMEOUT_S = 3.0
# Counters per topic, in the order of TopicRates' fields.
TOPIC_COUNTERS = ("bmq_bytes_in", "bmq_messages_in", "bmq_bytes_out", "bmq_messages_out")
# APIs that hold a request until something happens: their time is waiting, not serving.
WAITING_APIS = frozenset({"Fetch", "ShareFetch", "JoinGroup", "SyncGroup",
                          "ConsumerGroupHeartbeat", "ShareGroupHeartbeat",
                          "BmqWatchPartitions"})


@dataclass
class Scrape:
    """Counters summed over the brokers that answered."""

    at: float
    topics: dict[str, list[float]] = field(default_factory=lambda: defaultdict(
        lambda: [0.0] * len(TOPIC_COUNTERS)))
    requests: float = 0.0
    # bmq_request_duration_seconds of the APIs that do not wait: upper bound -> cumulative
    buckets: dict[float, float] = field(default_factory=lambda: defaultdict(float))
    seconds: float = 0.0
    answered: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self._add_sample(sample.name, sample.labels, sample.value)

    def _add_sample(self, name: str, labels: dict[str, str], value: float) -> None:
        counter = name.removesuffix("_total")
        if counter in TOPIC_COUNTERS:
            self.topics[labels.get("topic", "")][TOPIC_COUNTERS.index(counter)] += value
        elif name == "bmq_requests_total":
            self.requests += value
        elif labels.get("api") in WAITING_APIS:
            return
        elif name == "bmq_request_duration_seconds_bucket":
            self.buckets[float(labels["le"])] += value
        elif name == "bmq_request_duration_seconds_sum":
            self.seconds += value


def _change(new: float, old: float) -> float:
    """A counter's increase; a counter lower than before started again from 0."""
    return new - old if new >= old else new


def quantile(q: float, buckets: dict[float, float]) -> float | None:
    """Prometheus' histogram_quantile over cumulative ``buckets`` (linear within a bucket);
    None with no observations."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound in bounds:
        if buckets[bound] >= rank:
            if math.isinf(bound):
                return lower
            inside = buckets[bound] - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, buckets[bound]
    return lower


class MetricsScraper:
    """The last scrape of the brokers' ports and the rates since it."""

    def __init__(self, urls: tuple[str, ...]) -> None:
        self.urls = urls
        self._last: Scrape | None = None
        self._lock = threading.Lock()

    def scrape(self) -> Scrape:
        scrape = Scrape(time.time())
        for base in self.urls:
            try:
                with urllib.request.urlopen(base.rstrip("/") + "/metrics",
                                            timeout=SCRAPE_TIMEOUT_S) as answer:
                    scrape.add(answer.read().decode())
                scrape.answered.append(base)
            except (OSError, ValueError) as error:
                scrape.failed.append(f"{base}: {getattr(error, 'reason', error)}")
        return scrape

    def sample(self) -> dict[str, Any]:
        """Rates per second since the previous sample (none at the first), cluster-wide and
        per topic, and the latency of the requests in between, in ms."""
        new = self.scrape()
        with self._lock:
            old, self._last = self._last, new
        doc: dict[str, Any] = {"at": new.at, "answered": new.answered, "failed": new.failed,
                               "rates": None, "topics": {}}
        if old is None or new.at - old.at < 0.2:
            return doc
        elapsed = new.at - old.at
        topics = {}
        for topic, values in new.topics.items():
            before = old.topics.get(topic, [0.0] * len(values))
            topics[topic] = [round(_change(v, b) / elapsed, 3)
                             for v, b in zip(values, before, strict=True)]
        totals = [sum(rates[n] for rates in topics.values()) for n in range(len(TOPIC_COUNTERS))]
        buckets = {bound: _change(count, old.buckets.get(bound, 0.0))
                   for bound, count in new.buckets.items()}
        served = max(buckets.values(), default=0.0)
        seconds = _change(new.seconds, old.seconds)
        p50, p99 = quantile(0.5, buckets), quantile(0.99, buckets)
        doc["topics"] = topics
        doc["rates"] = {
            "bytes_in": totals[0], "messages_in": totals[1],
            "bytes_out": totals[2], "messages_out": totals[3],
            "requests": _change(new.requests, old.requests) / elapsed,
            "latency_mean_ms": seconds / served * 1000 if served else None,
            "latency_p50_ms": None if p50 is None else p50 * 1000,
            "latency_p99_ms": None if p99 is None else p99 * 1000}
        return doc


def routes(console: ConsolePages) -> list[Route]:
    scraper = MetricsScraper(console.admin.metrics_urls)
    console.templates.env.globals.update(metrics_on=bool(scraper.urls),
                                         metrics_poll_s=METRICS_POLL_S)

    async def cluster_metrics(request: Request) -> Response:
        if not scraper.urls:
            return JSONResponse({"error": "no --metrics ports given"}, status_code=404)
        doc = await console._call(scraper.sample)
        if request.query_params.get("topics") != "1":
            doc.pop("topics")
        return JSONResponse(doc)

    return [Route("/metrics/sample", cluster_metrics, name="metrics_sample")]
