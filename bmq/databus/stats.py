"""What an agent counts, for its operators: messages accepted (by way in) and refused (by
Kafka error), batches and records spooled, forwarded to the cluster and dropped (refused by the
cluster for good, by error), Produce requests sent, and the spool's state. ``GET /status`` on
the HTTP endpoint answers it as JSON (``bmq databus status``); the metrics port exports it to
Prometheus (``bmq_databus_*``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


@dataclass
class Stats:
    accepted: Counter[str] = field(default_factory=Counter)       # way in -> messages
    refused: Counter[str] = field(default_factory=Counter)        # Kafka error -> messages
    spooled_batches: int = 0
    spooled_records: int = 0
    produce_requests: int = 0
    forwarded_batches: int = 0
    forwarded_records: int = 0
    dropped: Counter[str] = field(default_factory=Counter)        # Kafka error -> records

    def snapshot(self) -> dict[str, Any]:
        return {"accepted": dict(self.accepted), "refused": dict(self.refused),
                "spooled_batches": self.spooled_batches,
                "spooled_records": self.spooled_records,
                "produce_requests": self.produce_requests,
                "forwarded_batches": self.forwarded_batches,
                "forwarded_records": self.forwarded_records, "dropped": dict(self.dropped)}


class StatsCollector(Collector):
    """The agent's stats as Prometheus metrics, read at each scrape."""

    def __init__(self, status: Callable[[], dict[str, Any]]) -> None:
        """``status``: () -> the agent's status (``GET /status``'s answer), all workers'."""
        self.status = status

    def collect(self) -> Iterator[Metric]:
        s = self.status()
        for name, help_text, label, values in (
                ("bmq_databus_accepted_messages", "Messages taken from applications.", "way",
                 s["accepted"]),
                ("bmq_databus_refused_messages", "Messages refused to applications.",
                 "reason", s["refused"]),
                ("bmq_databus_dropped_records", "Records the cluster refused for good.",
                 "reason", s["dropped"])):
            family = CounterMetricFamily(name, help_text, labels=[label])
            for key, value in sorted(values.items()):
                family.add_metric([key], value)
            yield family
        for name, help_text, value in (
                ("bmq_databus_spooled_batches", "Batches written to the spool.",
                 s["spooled_batches"]),
                ("bmq_databus_spooled_records", "Records written to the spool.",
                 s["spooled_records"]),
                ("bmq_databus_produce_requests", "Produce requests sent to the cluster.",
                 s["produce_requests"]),
                ("bmq_databus_forwarded_batches", "Batches the cluster took.",
                 s["forwarded_batches"]),
                ("bmq_databus_forwarded_records", "Records the cluster took.",
                 s["forwarded_records"])):
            yield CounterMetricFamily(name, help_text, value=value)
        for name, help_text, value in (
                ("bmq_databus_spool_bytes", "Bytes of batches the cluster has not taken yet.",
                 s["spool_bytes"]),
                ("bmq_databus_spool_limit_bytes", "The spool's bound.",
                 s["spool_limit_bytes"]),
                ("bmq_databus_waiting_batches",
                 "Spooled batches the cluster has not taken yet.", s["waiting_batches"])):
            yield GaugeMetricFamily(name, help_text, value=value)


def export(collector: StatsCollector) -> None:
    """Add the agent's stats to BMQ's registry (the one its metrics port serves)."""
    from bmq.metrics import REGISTRY

    REGISTRY.register(collector)
