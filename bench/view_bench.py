"""Issue 18's bar for views: a view keeping 10% of 1 KiB records is read at least as fast, in
source MB/s, as the unfiltered topic by the same consumer.

    .venv/bin/python -m bench.view_bench [--messages 200000] [--runs 3] [--bootstrap H:P]

One topic gets ``--messages`` records of 1 KiB values, one in ten with the header
``bmq.tag: hit`` and the rest ``bmq.tag: miss``. Then, ``--runs`` times in turn, the benchmark's
consumer (``bench.consume``: assign() every partition from offset 0, read to the end offsets
taken before, librdkafka's throughput settings) reads the topic, and then a view of it with the
filter ``TAG = 'hit'`` made anew for the run (so each view read filters, none is answered from
filtered batches cached by an earlier run). Both figures are source MB/s: the topic's value
bytes over the time to read to its end offsets. Without ``--bootstrap`` it spawns a throw-away
``bmq serve``.
"""

from __future__ import annotations

import argparse
import statistics
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.config import BenchConfig
from bench.consume import run_consumer
from bench.server import LocalServer

PARTITIONS = 4
VALUE_BYTES = 1024
SELECT_ONE_IN = 10


def fill(bootstrap: str, topic: str, messages: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1 << 20})
    value = uuid.uuid4().bytes * (VALUE_BYTES // 16)
    for i in range(messages):
        tag = b"hit" if i % SELECT_ONE_IN == 0 else b"miss"
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS,
                                 headers=[("bmq.tag", tag)])
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300):
        raise SystemExit("could not produce every record")


def end_offsets(bootstrap: str, topic: str) -> list[tuple[int, int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "view-bench"})
    try:
        return [(p, 0, consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1])
                for p in range(PARTITIONS)]
    finally:
        consumer.close()


def read_seconds(bootstrap: str, topic: str, ranges: list[tuple[int, int, int]]) -> tuple[
        float, int]:
    """Seconds to read ``topic`` over ``ranges``, and the records it handed over."""
    result = run_consumer(BenchConfig(bootstrap=bootstrap, topic=topic), 0, ranges)
    if not result.complete or result.errors:
        raise SystemExit(f"reading {topic} failed: {result.notes} {result.first_error}")
    return result.end - result.start, result.messages


def run(bootstrap: str, messages: int, runs: int) -> None:
    topic = f"view-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    fill(bootstrap, topic, messages)
    ranges = end_offsets(bootstrap, topic)
    source_mb = messages * VALUE_BYTES / 1e6
    plain, filtered = [], []
    for run_index in range(runs):
        seconds, count = read_seconds(bootstrap, topic, ranges)
        assert count == messages, (count, messages)
        plain.append(source_mb / seconds)
        view = f"{topic}-hits-{run_index}"
        admin.create_topics([NewTopic(view, -1, config={
            "bmq.view.source": topic, "bmq.view.filter": "TAG = 'hit'"})])[view].result(30)
        seconds, count = read_seconds(bootstrap, view, ranges)
        assert count == messages // SELECT_ONE_IN, (count, messages // SELECT_ONE_IN)
        filtered.append(source_mb / seconds)
        print(f"run {run_index + 1}: topic {plain[-1]:.0f} MB/s, view (10%) "
              f"{filtered[-1]:.0f} source MB/s")
    print(f"{messages} records of {VALUE_BYTES} B, {PARTITIONS} partitions: topic median "
          f"{statistics.median(plain):.0f} MB/s; view keeping 1 in {SELECT_ONE_IN} median "
          f"{statistics.median(filtered):.0f} source MB/s "
          f"({statistics.median(filtered) / statistics.median(plain):.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args()
    if args.bootstrap:
        run(args.bootstrap, args.messages, args.runs)
    else:
        with LocalServer() as server:
            run(server.bootstrap, args.messages, args.runs)


if __name__ == "__main__":
    main()
