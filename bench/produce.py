"""The producer worker: produce a number of messages (or for a time) and time it."""

from __future__ import annotations

import os
import time
from functools import partial
from threading import BrokenBarrierError
from typing import Any, Protocol

from confluent_kafka import KafkaError, Message, Producer

from bench.config import HEADER, BenchConfig, producer_conf
from bench.stats import Timeline, WorkerResult

POLL_EVERY = 64  # serve delivery reports every this many produce() calls
CLOCK_CHECK_EVERY = 1024  # look at the clock every this many messages


class Barrier(Protocol):
    def wait(self, timeout: float | None = None) -> int: ...
    def abort(self) -> None: ...


class _Deliveries:
    """Delivery-report bookkeeping; runs inside Producer.poll()/flush()."""

    __slots__ = ("delivered", "errors", "first_error", "latencies_ms")

    def __init__(self) -> None:
        self.delivered = 0
        self.errors = 0
        self.first_error: str | None = None
        self.latencies_ms: list[float] = []

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.delivered += 1
        else:
            self.errors += 1
            if self.first_error is None:
                self.first_error = str(err)

    def on_sampled(self, produced_ns: int, err: KafkaError | None, msg: Message) -> None:
        """Delivery report of a sampled message: also note produce() -> report time."""
        now = time.monotonic_ns()
        self.on_delivery(err, msg)
        if err is None:
            self.latencies_ms.append((now - produced_ns) / 1e6)


def _error_logger(role: str) -> Any:
    seen: set[str] = set()

    def on_error(err: KafkaError) -> None:
        text = str(err)
        if text not in seen and len(seen) < 20:
            seen.add(text)
            print(f"warning: {role}: {text}", flush=True)

    return on_error


def make_producer(cfg: BenchConfig, deliveries: _Deliveries, worker: int = 0) -> Producer:
    conf = producer_conf(cfg)
    conf["on_delivery"] = deliveries.on_delivery
    conf["error_cb"] = _error_logger("producer")
    if cfg.transaction_ms is not None:
        conf.setdefault("transactional.id", f"bmq-bench-{cfg.run_id}-{worker}")
        # librdkafka wants message.timeout.ms <= transaction.timeout.ms (60 s by default).
        conf["message.timeout.ms"] = min(int(conf["message.timeout.ms"]),
                                         int(conf.get("transaction.timeout.ms", 60_000)))
    return Producer(conf)


class _Transactions:
    """A transactional producer's commits: one every ``interval_ms`` while producing (commit
    waits for the transaction's deliveries), the last one at the end."""

    def __init__(self, producer: Producer, interval_ms: float) -> None:
        self._producer = producer
        self._interval_ns = int(interval_ms * 1e6)
        self._due_ns = 0
        self.commits = 0

    def begin(self) -> None:
        self._producer.begin_transaction()
        self._due_ns = time.monotonic_ns() + self._interval_ns

    def tick(self, now_ns: int) -> None:
        if now_ns >= self._due_ns:
            self.finish()
            self.begin()

    def finish(self) -> None:
        self._producer.commit_transaction()
        self.commits += 1


def run_producer(cfg: BenchConfig, worker: int, count: int | None,
                 barrier: Barrier | None = None, rate_mb: float | None = None,
                 progress: object = None) -> WorkerResult:
    """Produce count messages (None: until the duration is over) and report.

    Timing starts after the connection and topic metadata are up (and, with
    several processes, after all of them got there) and ends when the last
    delivery report arrived. With rate_mb the messages are paced to that rate.
    """
    result = WorkerResult(role="producer", worker=worker)
    deliveries = _Deliveries()
    producer = make_producer(cfg, deliveries, worker)
    txns = None if cfg.transaction_ms is None else _Transactions(producer, cfg.transaction_ms)
    try:
        producer.list_topics(cfg.topic, timeout=30.0)  # warm-up: connect, learn the leaders
        if txns is not None:
            producer.init_transactions(30.0)
    except Exception:
        if barrier is not None:
            barrier.abort()
        raise
    body = os.urandom(cfg.message_size - HEADER.size)
    if barrier is not None:
        try:
            barrier.wait(timeout=120.0)
        except BrokenBarrierError:
            result.complete = False
            result.notes.append("another process failed to start")
            return result

    limit = count if count is not None else 1 << 62
    duration = cfg.duration_limit()
    timeline = Timeline(progress, worker)
    cpu_start = time.process_time()  # all threads of this process, librdkafka's included
    start = time.monotonic()
    timeline.mark(0, 0, start)
    stop_at = start + (duration if duration is not None else cfg.timeout_s)
    hard_deadline = start + cfg.timeout_s
    if txns is not None:
        txns.begin()
    if rate_mb is None:
        sent = _produce_flat_out(cfg, producer, worker, body, limit, stop_at, deliveries,
                                 timeline, txns)
    else:
        sent = _produce_paced(cfg, producer, worker, body, limit, stop_at, deliveries,
                              rate_mb * 1e6 / cfg.message_size, timeline, txns)
    if txns is not None:
        txns.finish()   # flushes: the deliveries of the last transaction are in
        result.extra["transactions"] = txns.commits
    # flush(), in slices so the timeline follows the last deliveries too
    flush_until = time.monotonic() + max(0.0, hard_deadline - time.monotonic()) + 5.0
    remaining = len(producer)
    while remaining and time.monotonic() < flush_until:
        remaining = producer.flush(0.1)
        timeline.mark(deliveries.delivered, deliveries.delivered * cfg.message_size)
    timeline.mark(deliveries.delivered, deliveries.delivered * cfg.message_size, force=True)
    result.timeline = timeline.points
    result.start = start
    result.end = time.monotonic()
    result.extra["cpu_s"] = time.process_time() - cpu_start
    result.messages = deliveries.delivered
    result.bytes = deliveries.delivered * cfg.message_size
    result.errors = deliveries.errors
    result.first_error = deliveries.first_error
    result.latencies_ms = deliveries.latencies_ms
    result.extra["sent"] = sent
    if count is not None and sent < count and duration is None:
        result.complete = False
        result.notes.append(f"stopped by the time limit after {sent} of {count} messages")
    if remaining:
        result.complete = False
        result.notes.append(f"{remaining} messages still undelivered at the time limit")
    return result


def _produce_flat_out(cfg: BenchConfig, producer: Producer, worker: int, body: bytes,
                      limit: int, stop_at: float, deliveries: _Deliveries,
                      timeline: Timeline, txns: _Transactions | None = None) -> int:
    produce = producer.produce
    poll = producer.poll
    pack = HEADER.pack
    clock_ns = time.monotonic_ns
    topic = cfg.topic
    run_id = cfg.run_id
    sample = max(1, cfg.latency_sample)
    sampled = deliveries.on_sampled
    stop_ns = int(stop_at * 1e9)
    seq = 0
    while seq < limit:
        if seq % CLOCK_CHECK_EVERY == 0:
            if clock_ns() >= stop_ns:
                break
            timeline.mark(deliveries.delivered, deliveries.delivered * cfg.message_size)
            if txns is not None:
                txns.tick(clock_ns())
        now = clock_ns()
        value = pack(run_id, worker, seq, now) + body
        try:
            if seq % sample == 0:
                produce(topic, value, on_delivery=partial(sampled, now))
            else:
                produce(topic, value)
        except BufferError:  # local queue full: let librdkafka drain it
            poll(0.005)
            if clock_ns() >= stop_ns:
                break
            continue
        seq += 1
        if seq % POLL_EVERY == 0:
            poll(0)
    return seq


def _produce_paced(cfg: BenchConfig, producer: Producer, worker: int, body: bytes,
                   limit: int, stop_at: float, deliveries: _Deliveries,
                   msgs_per_s: float, timeline: Timeline,
                   txns: _Transactions | None = None) -> int:
    pack = HEADER.pack
    clock_ns = time.monotonic_ns
    sample = max(1, cfg.latency_sample)
    start_ns = clock_ns()
    stop_ns = int(stop_at * 1e9)
    seq = 0
    while seq < limit:
        now = clock_ns()
        if now >= stop_ns:
            break
        due = min(limit, int((now - start_ns) / 1e9 * msgs_per_s) + 1)
        while seq < due:
            now = clock_ns()
            value = pack(cfg.run_id, worker, seq, now) + body
            try:
                if seq % sample == 0:
                    producer.produce(cfg.topic, value,
                                     on_delivery=partial(deliveries.on_sampled, now))
                else:
                    producer.produce(cfg.topic, value)
            except BufferError:
                break
            seq += 1
        producer.poll(0.001)
        timeline.mark(deliveries.delivered, deliveries.delivered * cfg.message_size)
        if txns is not None:
            txns.tick(clock_ns())
    return seq
