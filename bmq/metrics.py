"""Every Prometheus metric BMQ exports, in one registry, and the HTTP endpoint that serves it.

Any role (``serve`` and the cluster roles) calls :func:`serve_for_role` when its ``metrics_port`` is
set and then records through the helpers below; requests and per-topic traffic are recorded by
``observe_response``, which every role that serves Kafka clients gives its connections
(``bmq.net.connection.Service.observe``). The broker's hot paths pay one counter increment per
request, per partition of a request and per flush; never per record: message counts come from the
``record_count`` field of record batch headers.

Metric names (all prefixed ``bmq_``):

* ``messages_in_total`` / ``bytes_in_total`` {topic}: records and batch bytes accepted by Produce
  (partitions answered without error; every partition for acks=0, which gets no answer).
* ``messages_out_total`` / ``bytes_out_total`` {topic}: records (in whole batches; for an old
  client, the messages converted for it, wrapped ones included) and record bytes returned by
  Fetch.
* ``requests_total`` {api} and ``request_duration_seconds`` {api}: requests handled, and the time
  from a decoded request to its encoded response (long-poll waits included).
* ``partitions_owned``: partitions this broker has open.
* ``consumer_groups``: consumer groups this broker coordinates (any state but Dead).
* ``flush_bytes`` and ``flush_duration_seconds``: size and time of each group-commit flush
  (one write + fsync of everything queued on a partition).
* ``proxy_cache_hits_total`` / ``proxy_cache_misses_total``: fetched partitions a proxy answered
  from its record cache / had to read from storage; ``proxy_cache_bytes``: the cache's size;
  ``proxy_storage_reads_total``: the proxy's reads of shared storage (data, state and listings).
* ``fetch_wait_seconds``: how long a Fetch waited for new data before it was answered.
* ``scheduled_pending`` {topic}, ``scheduled_delivered_total`` {topic} and
  ``scheduled_lateness_seconds``: scheduled delivery's held records, delivered records, and
  how long after its due time each delivery was durable.
* ``mirror_bytes_total`` {topic, partition} / ``mirror_records_total`` {topic}: batch bytes and
  records `bmq mirror` appended to the target; ``mirror_lag_records`` / ``mirror_lag_seconds``
  {topic, partition}: how far the target is behind the source (records, and the age of the
  oldest record fetched and not yet appended); ``mirror_partition_failing`` {topic, partition}:
  1 while a partition does not move (the log says why); ``mirror_errors_total`` {error};
  ``mirror_source_up``: 1/0.
* ``zookeeper_connected``: 1/0, registered only once a role calls :func:`set_zookeeper_connected`.
* ``controller_active`` (1/0), ``controller_brokers`` {draining} and ``controller_partitions``
  {state}: the controller role's view (:func:`controller`); a standby exports active 0 and no
  brokers or partitions.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client import start_http_server as _start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bmq.startup import ExitCode, StartupError

# No *_created series: they double the output and nobody graphs them.
disable_created_metrics()  # type: ignore[no-untyped-call]

log = logging.getLogger(__name__)

REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)

MESSAGES_IN = Counter("bmq_messages_in", "Records accepted by Produce (from batch headers).",
                      ["topic"], registry=REGISTRY)
BYTES_IN = Counter("bmq_bytes_in", "Record batch bytes accepted by Produce.", ["topic"],
                   registry=REGISTRY)
MESSAGES_OUT = Counter("bmq_messages_out", "Records returned by Fetch (whole batches).",
                       ["topic"], registry=REGISTRY)
BYTES_OUT = Counter("bmq_bytes_out", "Record bytes returned by Fetch.", ["topic"],
                    registry=REGISTRY)
REQUESTS = Counter("bmq_requests", "Kafka requests handled, by API.", ["api"],
                   registry=REGISTRY)
REQUEST_SECONDS = Histogram(
    "bmq_request_duration_seconds", "Time from a decoded request to its response, by API.",
    ["api"], registry=REGISTRY,
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
             10.0, 30.0))
PARTITIONS_OWNED = Gauge("bmq_partitions_owned", "Partitions this broker has open.",
                         registry=REGISTRY)
CONSUMER_GROUPS = Gauge("bmq_consumer_groups", "Consumer groups this broker coordinates.",
                        registry=REGISTRY)
FLUSH_BYTES = Histogram(
    "bmq_flush_bytes", "Bytes written by one group-commit flush of a partition.",
    registry=REGISTRY,
    buckets=(512, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20))
FLUSH_SECONDS = Histogram(
    "bmq_flush_duration_seconds", "Duration of one group-commit flush (write + fsync).",
    registry=REGISTRY,
    buckets=(0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0))
STORAGE_FAILURES = Counter(
    "bmq_storage_failures", "Flushes of a partition that failed on storage (the log is reopened "
    "after a back-off; producers retry), by what happened next: failed, reopened.",
    ["event"], registry=REGISTRY)

TRANSACTIONS_ENDED = Counter(
    "bmq_transactions_ended", "Transactions this broker's coordinator completed, by result "
    "(commit, abort; aborts include timed-out transactions).", ["result"], registry=REGISTRY)

# Share groups (KIP-932), counted by the broker that leads the partitions.
SHARE_REDELIVERIES = Counter(
    "bmq_share_redeliveries", "Records a share group acquired again: deliveries after the "
    "first (released, timed out, or held by a consumer or broker that went away), by group.",
    ["group"], registry=REGISTRY)
SHARE_LOCK_EXPIRIES = Counter(
    "bmq_share_lock_expiries", "Acquired records of a share group whose acquisition lock "
    "expired before they were acknowledged, by group.", ["group"], registry=REGISTRY)
SHARE_DEAD_LETTERS = Counter(
    "bmq_share_dead_letters", "Records written to a share group's dead-letter topic "
    "(KIP-1191), by group and reason (rejected, delivery.count.limit).", ["group", "reason"],
    registry=REGISTRY)


class TransactionStats(NamedTuple):
    """What a broker reports of transactions at a scrape."""

    open: int                       # transactions its coordinator has open
    oldest_age_s: float             # age of the oldest of them (0 if none)
    lso_lag: list[tuple[str, int, int]]   # (topic, partition, high watermark - LSO) if > 0


class _TransactionCollector(Collector):
    def __init__(self, stats: Callable[[], TransactionStats | None]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats() or TransactionStats(0, 0.0, [])
        yield GaugeMetricFamily("bmq_transactions_open",
                                "Transactions open on this broker's coordinator.", stats.open)
        yield GaugeMetricFamily("bmq_transaction_oldest_age_seconds",
                                "Age of the oldest open transaction this broker coordinates.",
                                stats.oldest_age_s)
        lag = GaugeMetricFamily("bmq_partition_lso_lag",
                                "Offsets between a partition's high watermark and its last "
                                "stable offset (read_committed consumers wait behind them); "
                                "partitions with no open transaction are not listed.",
                                labels=["topic", "partition"])
        for topic, partition, offsets in stats.lso_lag:
            lag.add_metric([topic, str(partition)], offsets)
        yield lag


def track_transactions(stats: Callable[[], TransactionStats | None]) -> None:
    """Report ``stats()`` (read at each scrape) as the transaction gauges."""
    REGISTRY.register(_TransactionCollector(stats))


_zk_lock = threading.Lock()
_zk_gauge: Gauge | None = None


def set_zookeeper_connected(connected: bool) -> None:
    """For roles with a ZooKeeper session: 1 while connected, else 0 (registered on first use)."""
    global _zk_gauge
    with _zk_lock:
        if _zk_gauge is None:
            _zk_gauge = Gauge("bmq_zookeeper_connected",
                              "1 while the ZooKeeper session is connected.", registry=REGISTRY)
    _zk_gauge.set(1 if connected else 0)


class ControllerGauges:
    """What the controller role exports; registered only in that role (see :func:`controller`)."""

    def __init__(self) -> None:
        self.active = Gauge("bmq_controller_active",
                            "1 while this controller is the active one, else 0.",
                            registry=REGISTRY)
        self.brokers = Gauge("bmq_controller_brokers",
                             "Registered brokers as the active controller last saw them.",
                             ["draining"], registry=REGISTRY)
        self.partitions = Gauge("bmq_controller_partitions",
                                "Partitions by state as the active controller last saw them.",
                                ["state"], registry=REGISTRY)


_controller_gauges: ControllerGauges | None = None


def controller() -> ControllerGauges:
    global _controller_gauges
    with _zk_lock:
        if _controller_gauges is None:
            _controller_gauges = ControllerGauges()
    return _controller_gauges


def track_partitions(count: Callable[[], float]) -> None:
    """Read the partition count from ``count`` at every scrape."""
    PARTITIONS_OWNED.set_function(count)


def track_consumer_groups(count: Callable[[], float]) -> None:
    """Read the consumer group count from ``count`` at every scrape."""
    CONSUMER_GROUPS.set_function(count)


def start_http_server(port: int, host: str = "") -> Any:
    """Serve ``/metrics`` (Prometheus text format) from a daemon thread; returns the server."""
    server, _thread = _start_http_server(port, addr=host, registry=REGISTRY)
    return server


def serve_for_role(port: int, host: str, partitions: Callable[[], float] | None = None,
                   groups: Callable[[], float] | None = None,
                   transactions: Callable[[], TransactionStats | None] | None = None,
                   topics_app: Callable[..., Any] | None = None) -> Any:
    """What a role calls at start when ``metrics_port`` is set (``serve``, ``broker``, ...).

    Binds ``host:port`` (the role's listen host), hooks the partition and group gauges to the
    given callables (read at each scrape, from the HTTP thread) and returns the server for
    :func:`stop`. ``topics_app``, a WSGI app, answers the paths under ``/topics/`` (Index
    Query, bmq.field_index.http). A port that cannot be bound is a ``StartupError`` (exit 3).
    """
    if partitions is not None:
        track_partitions(partitions)
    if groups is not None:
        track_consumer_groups(groups)
    if transactions is not None:
        track_transactions(transactions)
    try:
        server = start_http_server(port, host)
        server.set_app(_routes(server.get_app(), topics_app))
    except OSError as error:
        reason = error.strerror or str(error)
        raise StartupError(f"cannot serve metrics on {host}:{port}: {reason}",
                           ExitCode.ADDRESS_IN_USE) from error
    log.info("metrics at http://%s:%d/metrics", host or "0.0.0.0", port)
    return server


def _routes(metrics_app: Callable[..., Any], topics_app: Callable[..., Any] | None
            ) -> Callable[..., Any]:
    """``/metrics`` and, with ``topics_app``, ``/topics/...``; any other path is 404 (the
    Prometheus client's own app answers the metrics page for every path)."""
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return metrics_app(environ, start_response)
        if topics_app is not None and path.startswith("/topics/"):
            return topics_app(environ, start_response)
        served = "/metrics" + (", /topics/TOPIC/..." if topics_app is not None else "")
        body = f"404 not found: {path} (this port serves {served})\n".encode()
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8"),
                                          ("Content-Length", str(len(body)))])
        return [body]
    return app


def stop(server: Any) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- request helpers

_BATCH_LENGTH = struct.Struct(">i")  # at offset 8 of a batch: bytes after this field
_RECORD_COUNT = struct.Struct(">i")  # at offset 57 of a v2 batch
_LENGTH_AT = 8
_COUNT_AT = 57
_LOG_OVERHEAD = 12
_HEADER_SIZE = 61
_MAGIC_AT = 16
_MAGIC_V2 = 2


def count_records(data: bytes | bytearray | memoryview) -> int:
    """Records in the whole v2 batches of ``data`` (a trailing partial batch is not counted; nor
    are an old client's v0/v1 messages, which the read path counts: count_messages_out)."""
    total = 0
    pos = 0
    end = len(data)
    while end - pos >= _HEADER_SIZE and data[pos + _MAGIC_AT] == _MAGIC_V2:
        size = _BATCH_LENGTH.unpack_from(data, pos + _LENGTH_AT)[0] + _LOG_OVERHEAD
        if size < _HEADER_SIZE or pos + size > end:
            break
        total += _RECORD_COUNT.unpack_from(data, pos + _COUNT_AT)[0]
        pos += size
    return total


class _TopicCounters:
    __slots__ = ("bytes_in", "bytes_out", "messages_in", "messages_out")

    def __init__(self, topic: str) -> None:
        self.messages_in = MESSAGES_IN.labels(topic)
        self.bytes_in = BYTES_IN.labels(topic)
        self.messages_out = MESSAGES_OUT.labels(topic)
        self.bytes_out = BYTES_OUT.labels(topic)


_topics: dict[str, _TopicCounters] = {}
_apis: dict[str, tuple[Any, Any]] = {}


def _topic(name: str) -> _TopicCounters:
    counters = _topics.get(name)
    if counters is None:
        counters = _topics[name] = _TopicCounters(name)
    return counters


def observe_response(api_key: int, api_name: str, request: Any, response: Any,
                     seconds: float) -> None:
    """Every role's accounting of an answered request (``bmq.net.connection.Service.observe``):
    one observation per request, per-topic counters from batch headers only. APIs are told
    apart by ``api_name``, the codec's name (``bmq.net.api``), which this module, below the
    codec, cannot import its keys from."""
    observe_request(api_name, seconds)
    if api_name == "Produce":
        count_produce(request, response)
    elif api_name == "Fetch":
        count_fetch(response)


def observe_request(api: str, seconds: float) -> None:
    children = _apis.get(api)
    if children is None:
        children = _apis[api] = (REQUESTS.labels(api), REQUEST_SECONDS.labels(api))
    children[0].inc()
    children[1].observe(seconds)


def count_produce(request: Any, response: Any | None) -> None:
    """Add a Produce request's accepted batches to the per-topic ``in`` counters.

    ``response`` is None for acks=0; then every partition of the request is counted.
    """
    for t, topic_data in enumerate(request.topic_data):
        answered = None if response is None else response.responses[t].partition_responses
        counters: _TopicCounters | None = None
        for p, data in enumerate(topic_data.partition_data):
            if answered is not None and answered[p].error_code != 0:
                continue
            records = data.records
            if not records:
                continue
            if counters is None:
                name = topic_data.name or (response.responses[t].name if response else "")
                counters = _topic(name)
            counters.bytes_in.inc(len(records))
            counters.messages_in.inc(count_records(records))


def count_fetch(response: Any) -> None:
    """Add a Fetch response's records to the per-topic ``out`` counters."""
    for topic in response.responses:
        counters: _TopicCounters | None = None
        for partition in topic.partitions:
            records = partition.records
            if not records:
                continue
            if counters is None:
                counters = _topic(topic.topic)
            counters.bytes_out.inc(len(records))
            counters.messages_out.inc(count_records(records))


def count_messages_out(records_by_topic: Mapping[str, int]) -> None:
    """Add the records of message sets converted for old clients (Fetch v0-3) to the per-topic
    ``messages_out``: the read path knows their count from the conversion, while
    ``count_fetch`` reads counts from v2 batch headers only (it counts their bytes)."""
    for topic, count in records_by_topic.items():
        _topic(topic).messages_out.inc(count)


# Proxy tier (bmq/proxy/) ----------------------------------------------------------------------
PROXY_CACHE_HITS = Counter(
    "bmq_proxy_cache_hits", "Fetched partitions answered from the proxy's record cache.",
    registry=REGISTRY)
PROXY_CACHE_MISSES = Counter(
    "bmq_proxy_cache_misses", "Fetched partitions read from storage (then cached).",
    registry=REGISTRY)
PROXY_CACHE_BYTES = Gauge("bmq_proxy_cache_bytes", "Bytes in the proxy's record cache.",
                          registry=REGISTRY)
PROXY_STORAGE_READS = Counter(
    "bmq_proxy_storage_reads", "Reads of shared storage by the proxy (segment data and state).",
    registry=REGISTRY)
FETCH_WAIT_SECONDS = Histogram(
    "bmq_fetch_wait_seconds", "Time a Fetch waited for new data (long poll) before answering.",
    registry=REGISTRY,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))

# Views (bmq.readpath.views): filtered reads of a source partition.
VIEW_CACHE_HITS = Counter(
    "bmq_view_cache_hits", "Fetches of a view (or lane, or trunk of a topic with lanes) "
    "answered from filtered batches in the record cache.", registry=REGISTRY)
VIEW_FILTERED_BYTES = Counter(
    "bmq_view_filtered_bytes", "Bytes of source batches filtered for views.", registry=REGISTRY)

# Scheduled delivery (bmq/coordinators/timers): per topic, records held in timer logs this
# broker owns, records delivered, and how late each was appended (durable) after its due time.
SCHEDULED_PENDING = Gauge("bmq_scheduled_pending",
                          "Scheduled records held in this broker's timer logs, not delivered.",
                          ["topic"], registry=REGISTRY)
SCHEDULED_DELIVERED = Counter("bmq_scheduled_delivered",
                              "Scheduled records appended to their partition at their time.",
                              ["topic"], registry=REGISTRY)
SCHEDULED_LATENESS = Histogram(
    "bmq_scheduled_lateness_seconds",
    "Time from a scheduled record's due time until its delivery was durable.",
    registry=REGISTRY,
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0))


MIRROR_BYTES = Counter("bmq_mirror_bytes", "Record batch bytes the mirror appended to the target.",
                       ["topic", "partition"], registry=REGISTRY)
MIRROR_RECORDS = Counter("bmq_mirror_records",
                         "Records (from batch headers) the mirror appended to the target.",
                         ["topic"], registry=REGISTRY)
MIRROR_LAG_RECORDS = Gauge("bmq_mirror_lag_records",
                           "Offsets the target's partition is behind the source's.",
                           ["topic", "partition"], registry=REGISTRY)
MIRROR_LAG_SECONDS = Gauge("bmq_mirror_lag_seconds",
                           "Age of the oldest record fetched from the source and not yet on "
                           "the target (0 when caught up).", ["topic", "partition"],
                           registry=REGISTRY)
MIRROR_ERRORS = Counter("bmq_mirror_errors", "Errors of the mirror's fetches and appends.",
                        ["error"], registry=REGISTRY)
MIRROR_PARTITION_FAILING = Gauge("bmq_mirror_partition_failing",
                                 "1 while the mirror cannot copy the partition (its log says "
                                 "why), else 0.", ["topic", "partition"], registry=REGISTRY)
MIRROR_SOURCE_UP = Gauge("bmq_mirror_source_up", "1 while the source cluster answers, else 0.",
                         registry=REGISTRY)


def count_mirrored(topic: str, partition: int, batches: bytes | bytearray | memoryview) -> None:
    MIRROR_BYTES.labels(topic, str(partition)).inc(len(batches))
    MIRROR_RECORDS.labels(topic).inc(count_records(batches))


def set_mirror_partition(topic: str, partition: int, records: int, seconds: float,
                         failing: bool) -> None:
    """A mirrored partition's lag, and whether it fails to move now."""
    MIRROR_LAG_RECORDS.labels(topic, str(partition)).set(records)
    MIRROR_LAG_SECONDS.labels(topic, str(partition)).set(seconds)
    MIRROR_PARTITION_FAILING.labels(topic, str(partition)).set(1 if failing else 0)


def forget_mirror_partition(topic: str, partition: int) -> None:
    """A partition no longer mirrored (its topic promoted) leaves the lag gauges."""
    for gauge in (MIRROR_LAG_RECORDS, MIRROR_LAG_SECONDS, MIRROR_PARTITION_FAILING):
        with contextlib.suppress(KeyError):
            gauge.remove(topic, str(partition))
