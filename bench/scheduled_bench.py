"""Issue 18's bar for scheduled delivery: lateness (append time minus due time) p99 under
100 ms at 10,000 scheduled records/s.

    .venv/bin/python -m bench.scheduled_bench [--rate 10000] [--duration 20] [--bootstrap H:P]
                                              [--pending 0]

A topic with ``bmq.delay.enable=true`` (4 partitions) gets ``--rate`` records/s of 100 bytes
for ``--duration`` seconds, each with ``bmq.delay.ms`` between 1 and 3 s, produced in 10 ms
ticks by one confluent-kafka producer (acks=all). A consumer tails the topic (fetch.wait.max.ms
10: the broker answers a long poll as soon as new data is durable) and notes when each record
arrives; lateness is that time minus the record's due time (its ``bmq.scheduled.at`` plus its
delay), so it includes the fetch, an upper bound of the broker's own (the broker's histogram
``bmq_scheduled_lateness_seconds`` times until delivery is durable; ``--metrics URL``, the
broker's metrics endpoint, prints its shares too). ``--pending N`` first
schedules N records 1 hour ahead (held in the timer logs' runs on storage meanwhile) and prints
the broker's RSS before and after them, and 15 s later; ``--plain`` sends those N records to a
topic without scheduling instead (the same produce burst with nothing pending: a control of
what the burst itself leaves in the broker's memory). Without ``--bootstrap`` it spawns a
throw-away ``bmq serve`` (with a metrics port: the broker's histogram is printed too).
"""

from __future__ import annotations

import argparse
import random
import re
import shlex
import threading
import time
import urllib.request
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.server import LocalServer, default_command, free_port

PARTITIONS = 4
SETTLE_S = 15
VALUE = b"x" * 100


def _ms() -> int:
    return time.time_ns() // 1_000_000


def percentile(values: list[int], share: float) -> int:
    return values[min(len(values) - 1, int(share * len(values)))]


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                     "queue.buffering.max.messages": 2_000_000})


def _send(producer: Producer, topic: str, index: int, delay_ms: int) -> None:
    while True:
        try:
            producer.produce(topic, VALUE, partition=index % PARTITIONS,
                             headers=[("bmq.delay.ms", str(delay_ms).encode())])
            return
        except BufferError:
            producer.poll(0.01)


def schedule_pending(bootstrap: str, topic: str, count: int) -> None:
    producer = _producer(bootstrap)
    for i in range(count):
        _send(producer, topic, i, 3_600_000)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(600):
        raise SystemExit("could not schedule every pending record")


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def memory(pid: int) -> str:
    """The broker's RSS, and how much of it is its heap (anonymous) and mapped files."""
    return (f"RSS {rss_mib(pid):.0f} MiB (anon {rss_mib(pid, 'RssAnon'):.0f}, "
            f"file {rss_mib(pid, 'RssFile'):.0f})")


def broker_lateness(url: str) -> str:
    """The share of deliveries within each bucket of the broker's lateness histogram."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    buckets = {float(m.group(1)): float(m.group(2)) for m in re.finditer(
        r'bmq_scheduled_lateness_seconds_bucket\{le="([0-9.]+)"\} ([0-9.e+]+)', text)}
    total = float(re.search(r"bmq_scheduled_lateness_seconds_count ([0-9.e+]+)", text)
                  .group(1))  # type: ignore[union-attr]
    return ", ".join(f"{count / total:.1%} <= {le * 1000:g} ms"
                     for le, count in sorted(buckets.items()) if le <= 1.0)


def measure(bootstrap: str, rate: int, duration: float, pending: int, pid: int,
            metrics_url: str | None = None, plain: bool = False) -> None:
    topic = f"scheduled-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={
        "bmq.delay.enable": "true"})])[topic].result(30)
    if pending:
        target = topic
        if plain:
            target = f"{topic}-plain"
            admin.create_topics([NewTopic(target, PARTITIONS, 1)])[target].result(30)
        before = memory(pid) if pid else "?"
        started = time.monotonic()
        schedule_pending(bootstrap, target, pending)
        print(f"{pending} records {'to a plain topic' if plain else 'pending (1 h ahead)'} "
              f"in {time.monotonic() - started:.0f} s; "
              f"broker {before} -> {memory(pid) if pid else '?'}")
        if pid:
            time.sleep(SETTLE_S)
            print(f"broker {SETTLE_S} s later: {memory(pid)}")
    late: list[int] = []
    stop = threading.Event()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scheduled-bench",
                         "fetch.wait.max.ms": 10, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])

    def tail() -> None:
        while not stop.is_set():
            for message in consumer.consume(10_000, 0.05):
                if message.error() is not None:
                    continue
                seen = _ms()
                headers = dict(message.headers() or ())
                late.append(seen - int(headers["bmq.scheduled.at"])
                            - int(headers["bmq.delay.ms"]))

    reader = threading.Thread(target=tail, daemon=True)
    reader.start()
    producer = _producer(bootstrap)
    rng = random.Random(1)
    total = int(rate * duration)
    per_tick = max(1, rate // 100)
    start = time.monotonic()
    for i in range(total):
        _send(producer, topic, i, rng.randint(1000, 3000))
        if i % per_tick == per_tick - 1:
            producer.poll(0)
            pause = start + (i + 1) / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
    produced_s = time.monotonic() - start
    producer.flush(60)
    deadline = time.monotonic() + 30
    while len(late) < total and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    reader.join(10)
    consumer.close()
    late.sort()
    print(f"{total} records at {total / produced_s:.0f}/s (delays 1-3 s), {len(late)} "
          f"delivered: lateness p50 {percentile(late, 0.5)} ms, p99 {percentile(late, 0.99)} "
          f"ms, max {late[-1]} ms, min {late[0]} ms")
    if metrics_url:
        print(f"broker (due to durable, all records since it started): "
              f"{broker_lateness(metrics_url)}")
    if pid:
        print(f"broker at the end: {memory(pid)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--pending", type=int, default=0)
    parser.add_argument("--plain", action="store_true",
                        help="send the --pending records to a topic without scheduling")
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--metrics", default=None,
                        help="the broker's metrics URL, e.g. http://127.0.0.1:9100/metrics")
    args = parser.parse_args()
    if args.bootstrap:
        measure(args.bootstrap, args.rate, args.duration, args.pending, 0, args.metrics,
                args.plain)
    else:
        port = free_port()
        command = shlex.join([*default_command(), "--metrics-port", str(port)])
        with LocalServer(command) as server:
            measure(server.bootstrap, args.rate, args.duration, args.pending, server.pid,
                    f"http://127.0.0.1:{port}/metrics", args.plain)


if __name__ == "__main__":
    main()
