"""Benchmark settings, the message layout and the librdkafka client settings."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

#: Every message starts with this header; the rest of the value is a random body
#: generated once per process. run_id tells this run's messages from older ones,
#: (worker, seq) makes the prefix unique and ts_ns (time.monotonic_ns() at the
#: produce() call) gives the end-to-end latency.
HEADER = struct.Struct(">IIQq")  # run_id, worker, seq, ts_ns
MIN_MESSAGE_SIZE = HEADER.size

MB = 1_000_000  # MB/s in the reports is 10^6 bytes of message value per second

MODES = ("produce", "consume", "both", "e2e")


@dataclass(frozen=True)
class BenchConfig:
    """Everything a worker process needs; picklable so it can cross a spawn."""

    bootstrap: str
    topic: str = "bmq-bench"
    partitions: int = 8
    message_size: int = 1024
    messages: int | None = None
    duration: float | None = None
    acks: str = "all"
    compression: str = "none"
    producers: int = 1
    consumers: int = 1
    mode: str = "both"
    rate_mb: float = 10.0
    linger_ms: float = 5.0
    batch_size: int = 1_000_000
    latency_sample: int = 32
    warmup_s: float = 2.0
    timeout_s: float = 300.0
    idle_timeout_s: float = 30.0
    run_id: int = 0
    producer_overrides: dict[str, str] = field(default_factory=dict)
    consumer_overrides: dict[str, str] = field(default_factory=dict)
    # Settings of every client (producer, consumer, admin): security.protocol, ssl.*, sasl.*.
    client_overrides: dict[str, str] = field(default_factory=dict)
    # Transactions: each producer commits a transaction every this many ms (None: not
    # transactional); what consumers read (Kafka's isolation.level).
    transaction_ms: float | None = None
    isolation_level: str = "read_committed"

    def message_limit(self) -> int | None:
        """The message count to produce, or None when only --duration bounds it."""
        if self.messages is not None:
            return self.messages
        if self.duration is not None or self.mode == "e2e":
            return None
        return 1_000_000

    def duration_limit(self) -> float | None:
        """Seconds to produce for, if any (e2e defaults to 30 s when nothing is given)."""
        if self.duration is not None:
            return self.duration
        if self.mode == "e2e" and self.messages is None:
            return 30.0
        return None


def producer_conf(cfg: BenchConfig) -> dict[str, Any]:
    """librdkafka producer settings tuned for throughput (overridable with -X)."""
    conf: dict[str, Any] = {
        "bootstrap.servers": cfg.bootstrap,
        "acks": cfg.acks,
        "compression.type": cfg.compression,
        "linger.ms": cfg.linger_ms,
        "batch.size": cfg.batch_size,
        "batch.num.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "queue.buffering.max.messages": 1_000_000,
        "message.timeout.ms": max(1000, int(cfg.timeout_s * 1000)),
        "enable.idempotence": cfg.transaction_ms is not None,
        "log.connection.close": False,
    }
    conf.update(cfg.client_overrides)
    conf.update(cfg.producer_overrides)
    return conf


def consumer_conf(cfg: BenchConfig) -> dict[str, Any]:
    """librdkafka consumer settings tuned for throughput (overridable with --consumer-config).

    confluent-kafka insists on a group.id, but the benchmark only ever uses
    assign() with explicit offsets and never commits, so no group is joined.
    """
    conf: dict[str, Any] = {
        "bootstrap.servers": cfg.bootstrap,
        "group.id": f"bmq-bench-{cfg.run_id}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 8_388_608,
        "fetch.wait.max.ms": 100,
        "queued.max.messages.kbytes": 524_288,
        "queued.min.messages": 1_000_000,
        "log.connection.close": False,
        "isolation.level": cfg.isolation_level,
    }
    conf.update(cfg.client_overrides)
    conf.update(cfg.consumer_overrides)
    return conf
