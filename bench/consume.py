"""The consumer worker: read given offset ranges with assign() and time it."""

from __future__ import annotations

import time
from threading import BrokenBarrierError

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from bench.config import BenchConfig, consumer_conf
from bench.produce import Barrier, _error_logger
from bench.stats import Timeline, WorkerResult

BATCH = 10_000  # most messages taken per Consumer.consume() call


def next_batch(consumer: Consumer, wait: float) -> list[Message]:
    """What is already queued (up to BATCH), else wait up to `wait` s for one message.

    consume(n, timeout) would hold back messages until n are there or the
    timeout passed, which adds up to the timeout to latency and to the end of
    a run, so it is only called with timeout 0.
    """
    batch = consumer.consume(BATCH, 0)
    if batch:
        return batch
    msg = consumer.poll(wait)
    return [] if msg is None else [msg]

#: (partition, first offset, end offset): read the messages first <= offset < end
Range = tuple[int, int, int]


def make_consumer(cfg: BenchConfig) -> Consumer:
    conf = consumer_conf(cfg)
    conf["error_cb"] = _error_logger("consumer")
    return Consumer(conf)


def run_consumer(cfg: BenchConfig, worker: int, ranges: list[Range],
                 barrier: Barrier | None = None, progress: object = None) -> WorkerResult:
    """Consume every range to its end offset (or until the time limit).

    No consumer group is joined: the partitions are assign()ed with explicit
    offsets and nothing is committed. The clock starts at assign(), after the
    connection is up, and stops when the last range is finished.
    """
    result = WorkerResult(role="consumer", worker=worker)
    consumer = make_consumer(cfg)
    try:
        try:
            consumer.list_topics(cfg.topic, timeout=30.0)  # warm-up: connect, learn the leaders
        except Exception:
            if barrier is not None:
                barrier.abort()
            raise
        if barrier is not None:
            try:
                barrier.wait(timeout=120.0)
            except BrokenBarrierError:
                result.complete = False
                result.notes.append("another process failed to start")
                return result
        _consume_ranges(cfg, consumer, ranges, result, Timeline(progress, worker))
    finally:
        consumer.close()
    return result


def _consume_ranges(cfg: BenchConfig, consumer: Consumer, ranges: list[Range],
                    result: WorkerResult, timeline: Timeline) -> None:
    ends = {p: end for p, first, end in ranges if end > first}
    cpu_start = time.process_time()  # all threads of this process, librdkafka's included
    start = time.monotonic()
    timeline.mark(0, 0, start)
    deadline = start + cfg.timeout_s
    consumer.assign([TopicPartition(cfg.topic, p, first)
                     for p, first, end in ranges if end > first])
    pending = [TopicPartition(cfg.topic, p) for p in sorted(ends)]
    count = 0
    nbytes = 0
    errors = 0
    last_message = start
    eof = KafkaError._PARTITION_EOF
    at_eof: set[int] = set()  # partitions that reported EOF at or past their end
    while pending:
        now = time.monotonic()
        if now >= deadline or now - last_message >= cfg.idle_timeout_s:
            why = "time limit reached" if now >= deadline else (
                f"nothing received for {cfg.idle_timeout_s:g} s")
            result.complete = False
            result.notes.append(f"{why} with partitions "
                                f"{[tp.partition for tp in pending]} unfinished")
            break
        batch = next_batch(consumer, max(0.0, min(0.1, deadline - now)))
        if not batch:
            continue
        for msg in batch:
            err = msg.error()
            if err is None:
                count += 1
                nbytes += len(msg)
            elif err.code() == eof:
                part, offset = msg.partition(), msg.offset()
                if part is not None and offset is not None and offset >= ends.get(part, 0):
                    at_eof.add(part)
            else:
                errors += 1
                if result.first_error is None:
                    result.first_error = str(err)
                if err.fatal():
                    result.complete = False
                    pending = []
                    break
        last_message = time.monotonic()
        timeline.mark(count, nbytes, last_message)
        if pending:
            # position() is the offset after the last message handed to us
            positions = consumer.position(pending)
            pending = [TopicPartition(cfg.topic, tp.partition) for tp in positions
                       if tp.offset < ends[tp.partition] and tp.partition not in at_eof]
    timeline.mark(count, nbytes, last_message, force=True)
    result.timeline = timeline.points
    result.start = start
    result.end = last_message
    result.extra["cpu_s"] = time.process_time() - cpu_start
    result.messages = count
    result.bytes = nbytes
    result.errors = errors
