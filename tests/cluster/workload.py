"""Steady idempotent acks=all production through a cluster, and the read-back check.

Each message's value is ``<partition>:<sequence>``; a delivery report records the offset it was
acknowledged at. ``verify`` reads every partition back and checks that every acknowledged message
is there exactly once, at its acknowledged offset, and that each partition holds its sequence
numbers in order with no duplicates (a late write of a frozen broker would show up as one).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition


class SteadyProducer:
    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 400.0,
                 extra: dict[str, Any] | None = None) -> None:
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 2, "message.timeout.ms": 120_000, "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 200, "topic.metadata.refresh.interval.ms": 1000,
            "reconnect.backoff.max.ms": 500, **(extra or {})})
        # partition -> seq -> offset (None when librdkafka acknowledged it implicitly)
        self.acked: dict[int, dict[int, int | None]] = defaultdict(dict)
        self.ack_times: dict[int, list[float]] = defaultdict(list)
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, error: KafkaError | None, message: Any) -> None:
        if error is not None:
            self.failed.append(str(error))
            return
        partition, seq = (int(x) for x in message.value().decode().split(":"))
        self.acked[partition][seq] = message.offset()
        self.ack_times[partition].append(time.monotonic())

    def _run(self) -> None:
        seq = 0
        period = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            partition = seq % self.partitions
            self.producer.produce(self.topic, value=f"{partition}:{seq}".encode(),
                                  partition=partition, on_delivery=self._on_delivery)
            seq += 1
            self.sent = seq
            self.producer.poll(0)
            next_at += period
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def stop(self, flush_timeout: float = 120.0) -> None:
        self._stop.set()
        self._thread.join()
        remaining = self.producer.flush(flush_timeout)
        assert remaining == 0, f"{remaining} messages still undelivered"

    def acked_count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def max_gap(self, partition: int, after: float = 0.0) -> float:
        """Longest pause between acknowledgements of one partition after ``after``."""
        times = [t for t in self.ack_times[partition] if t >= after]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def read_all(bootstrap: str, topic: str, partitions: int,
             timeout: float = 60.0) -> dict[int, list[tuple[int, bytes]]]:
    """Every (offset, value) of every partition, from the start to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify-unused",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "fetch.wait.max.ms": 50})
    found: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        todo = {p for p in range(partitions) if ends[p] > 0}
        deadline = time.monotonic() + timeout
        while todo and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    if message.offset() >= ends[message.partition()]:
                        todo.discard(message.partition())
                    continue
                continue
            found[message.partition()].append((message.offset(), message.value()))
            if message.offset() + 1 >= ends[message.partition()]:
                todo.discard(message.partition())
        assert not todo, f"could not read partitions {sorted(todo)} to their end {ends}"
    finally:
        consumer.close()
    return found


def verify(producer: SteadyProducer, bootstrap: str,
           describe: Callable[[int, list[int]], str] | None = None) -> int:
    """Every acknowledged message exactly once at its offset, in order; returns the count.
    ``describe(partition, offsets)``: what to add to a duplicate's report (the batches)."""
    data = read_all(bootstrap, producer.topic, producer.partitions)
    total = 0
    for partition, records in data.items():
        seqs = [int(value.decode().split(":")[1]) for _, value in records]
        if len(seqs) != len(set(seqs)):
            twice = [(o, v) for o, v in records
                     if seqs.count(int(v.decode().split(":")[1])) > 1][:10]
            detail = describe(partition, [o for o, _ in twice]) if describe else ""
            raise AssertionError(f"partition {partition} has duplicates: {twice} {detail}")
        assert seqs == sorted(seqs), f"partition {partition} is out of order"
        at = {int(value.decode().split(":")[1]): offset for offset, value in records}
        for seq, offset in producer.acked[partition].items():
            assert seq in at, f"acknowledged {partition}:{seq} (offset {offset}) is missing"
            # None: librdkafka acknowledged it implicitly (a later batch of the idempotent
            # producer was acknowledged while this one's own answer was lost with its broker),
            # so no offset is known; it must still be there exactly once.
            assert offset is None or at[seq] == offset, (
                f"acknowledged {partition}:{seq} at offset {offset} but found at {at[seq]}")
        total += len(producer.acked[partition])
    return total
