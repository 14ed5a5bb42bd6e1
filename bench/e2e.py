"""End-to-end latency: one paced producer, one consumer tailing the topic."""

from __future__ import annotations

import time
from typing import Protocol

from confluent_kafka import KafkaError, TopicPartition

from bench.config import HEADER, BenchConfig
from bench.consume import make_consumer, next_batch
from bench.stats import Timeline, WorkerResult

GRACE_S = 10.0  # how long the consumer waits for stragglers once the producer is done


class Flag(Protocol):
    def set(self) -> None: ...


class SharedInt(Protocol):
    value: int


def run_tail_consumer(cfg: BenchConfig, starts: list[tuple[int, int]], ready: Flag,
                      expected: SharedInt, warmup_messages: int,
                      progress: object = None) -> WorkerResult:
    """Tail the partitions from the given offsets and time each message of this run.

    Latency is time.monotonic_ns() when the message is handed to us minus the
    time.monotonic_ns() the producer embedded at its produce() call (both on
    this host). Messages with seq < warmup_messages are left out of the figures.
    expected.value is set by the parent (-1 until the producer has finished) to
    the number of acknowledged messages to wait for.
    """
    result = WorkerResult(role="consumer", worker=0)
    consumer = make_consumer(cfg)
    try:
        consumer.list_topics(cfg.topic, timeout=30.0)
        consumer.assign([TopicPartition(cfg.topic, p, off) for p, off in starts])
        ready.set()
        unpack = HEADER.unpack_from
        clock_ns = time.monotonic_ns
        run_id = cfg.run_id
        seen: set[int] = set()
        latencies: list[float] = []
        duplicates = 0
        errors = 0
        nbytes = 0
        first = last = 0.0
        hard_deadline = time.monotonic() + cfg.timeout_s + (cfg.duration_limit() or 0.0)
        done_at: float | None = None
        timeline = Timeline(progress, 1)
        while True:
            now = time.monotonic()
            want = expected.value
            if want >= 0:
                if done_at is None:
                    done_at = now + GRACE_S
                if len(seen) >= want or now >= done_at:
                    break
            if now >= hard_deadline:
                result.notes.append("time limit reached")
                break
            for msg in next_batch(consumer, 0.05):
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        errors += 1
                        result.first_error = result.first_error or str(err)
                    continue
                got = clock_ns()
                value = msg.value()
                if value is None or len(value) < HEADER.size:
                    continue
                rid, _worker, seq, sent_ns = unpack(value)
                if rid != run_id:
                    continue
                if seq in seen:
                    duplicates += 1
                    continue
                seen.add(seq)
                nbytes += len(value)
                if seq >= warmup_messages:
                    latencies.append((got - sent_ns) / 1e6)
                last = got / 1e9
                if not first:
                    first = last
                    timeline.mark(0, 0, first, force=True)
            if first:
                timeline.mark(len(seen), nbytes)
        want = expected.value
        if first:
            timeline.mark(len(seen), nbytes, last, force=True)
        result.timeline = timeline.points
        result.messages = len(seen)
        result.bytes = nbytes
        result.errors = errors
        result.latencies_ms = latencies
        result.start, result.end = first, last
        result.extra = {"duplicates": duplicates, "expected": want,
                        "missing": max(0, want - len(seen))}
        if want < 0 or len(seen) < want:
            result.complete = False
            result.notes.append(f"received {len(seen)} of {want} acknowledged messages")
        if duplicates:
            result.notes.append(f"{duplicates} duplicate messages")
    finally:
        consumer.close()
    return result
