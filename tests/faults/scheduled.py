"""The scheduled delivery workload: idempotent producers send records to a topic with
``bmq.delay.enable=true``, each due a few seconds ahead (``bmq.deliver.at``, spread over
``spread_ms``), and the consumers of one consumer group note when each record reached them.

The history: ``send`` (``recorded_clients``), invoked with ``{"value", "due_ms",
"partition"}``; ``poll`` completes ``ok`` with ``[partition, offset, value]`` per record, and
``extra["wall_ms"]``, the wall clock (ms since the epoch, as due times are) when the poll
returned; ``assign`` events note the partitions a consumer was given by a rebalance.

What the checker (``check_scheduled``) holds BMQ to:

- never before its time (``early``): a record returned by a poll that ended before its due
  time less ``ALLOWANCE_MS``. The end of the poll is the latest moment the client may first
  have had the record (librdkafka fetches ahead, and a poll may wait for a record arriving in
  it): a poll's start would flag a record arriving, on time, while the poll waited. The
  allowance is the clocks' granularity: the broker and the clients read the same kernel clock
  (one machine, even in network namespaces) truncated to milliseconds on both sides, so a record
  appended at the broker's first millisecond >= its due time cannot reach a client's clock
  reading more than 1 ms lower; 2 ms is allowed;
- never lost (``lost``): every acknowledged send is in the topic, read back from the
  beginning after the faults are healed, waiting up to ``bound_s`` past the last due time;
- delivered once into the partition (``duplicate``: one held record at two offsets; the timer
  appends as an idempotent producer and skips after a crash what it had appended), to the
  partition it was sent to (``wrong-partition``), and a consumer's record is the one at that
  offset (``wrong-value``; a value never sent: ``phantom``). Each copy names the hold it came
  from: ``bmq.scheduled.at``, the time the broker took the produce into its timer log. Copies
  of a value with the same stamp are one held record delivered twice, BMQ's doing; copies with
  different stamps were produced again and taken again: librdkafka renumbers what it still
  holds after an epoch bump (a message timed out), as the queue workload's writers show
  (``writers``). Those are counted (``resent-copies``), not judged: the delivered batches are
  the timer's, so which producer epoch sent each copy is not readable after the run (on S3 a
  timer log keeps only its manifest once delivered). That the timer log drops a retry of one
  epoch's batch is tested on its own (``tests/scheduled``);
- at-least-once to the group: a consumer group with auto-commit may see a record again after
  a rebalance (its offsets were committed before it), so records seen twice are counted, not
  judged, except by one consumer twice with no rebalance of that partition to it between
  (``duplicate-delivery``: its position went back by itself);
- no client meets a fatal error (``fatal-error``).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.faults.history import History, Op
from tests.faults.recorded_clients import (
    Headers,
    ReadRecord,
    client_debug,
    consumer_places,
    exception_error,
    fatal_errors,
    own_ops,
    partition_of,
    produce_until,
    read_back,
    run_all,
)
from tests.faults.workload import Endpoints, Verdict
from tests.groups.helpers import unique

DELIVER_AT = "bmq.deliver.at"
SCHEDULED_AT = "bmq.scheduled.at"     # stamped by the broker when it holds a record
ALLOWANCE_MS = 2


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def run_group_consumer(bootstrap: str, group: str, topic: str, history: History,
                       process: str, stop: threading.Event) -> None:
    def assigned(_: Consumer, partitions: list[TopicPartition]) -> None:
        history.event(process, "assign", sorted(tp.partition for tp in partitions))

    consumer = Consumer({**client_debug(), "bootstrap.servers": bootstrap,
                         "broker.address.family": "v4",
                         "group.id": group, "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 50, "topic.metadata.refresh.interval.ms": 2000,
                         "reconnect.backoff.max.ms": 500})
    consumer.subscribe([topic], on_assign=assigned)
    try:
        while not stop.is_set():
            op = history.invoke(process, "poll")
            try:
                messages = consumer.consume(500, 0.1)
            except KafkaException as exc:
                history.fail(op, exception_error(op, exc))
                if op.extra.get("fatal"):
                    return
                continue
            op.extra["wall_ms"] = wall_ms()
            history.ok(op, [[partition_of(m), m.offset(), int(m.value() or b"-1")]
                            for m in messages if m.error() is None])
            errors = [m.error() for m in messages if m.error() is not None]
            if any(error.fatal() for error in errors if error is not None):
                op.extra["fatal"] = True
                return
    finally:
        consumer.close()


@dataclass
class ScheduledWorkload:
    """Producers of records due ``min_delay_ms`` + [0, ``spread_ms``) ahead, and consumers of
    one group (through the brokers and, if there is one, the proxy)."""

    name: str = "scheduled"
    partitions: int = 3
    producers: int = 1
    rate: float = 50.0              # records a second per producer
    min_delay_ms: int = 1000
    spread_ms: int = 4000
    broker_consumers: int = 1
    proxy_consumers: int = 1
    bound_s: float = 60.0           # after the last due time, every record is in the topic
    topic: str = field(default_factory=lambda: unique("later"))
    group: str = field(default_factory=lambda: unique("cg"))

    def __post_init__(self) -> None:
        self._values = itertools.count()

    def setup(self, endpoints: Endpoints) -> None:
        admin = AdminClient({"bootstrap.servers": endpoints.admin,
                             "broker.address.family": "v4"})
        admin.create_topics([NewTopic(self.topic, self.partitions, 1, config={
            "bmq.delay.enable": "true"})], operation_timeout=15)[self.topic].result(30)

    def run(self, endpoints: Endpoints, history: History, stop: threading.Event,
            seed: int) -> None:
        places = consumer_places(endpoints, self.broker_consumers, self.proxy_consumers)
        threads = [threading.Thread(target=run_group_consumer, daemon=True, args=(
                       place, self.group, self.topic, history, f"{self.name}/consumer-{n}", stop))
                   for n, place in enumerate(places)]
        for n in range(self.producers):
            rng = random.Random(seed * 1000 + n)

            def plan(value: int, rng: random.Random = rng) -> tuple[
                    int, Headers, dict[str, Any]]:
                due = wall_ms() + self.min_delay_ms + rng.randrange(self.spread_ms)
                partition = rng.randrange(self.partitions)
                return partition, [(DELIVER_AT, str(due).encode())], {
                    "due_ms": due, "partition": partition}

            threads.append(threading.Thread(target=produce_until, daemon=True, args=(
                endpoints.bootstrap, self.topic, history, f"{self.name}/producer-{n}", stop,
                self.rate, self._values, plan)))
        run_all(threads)

    def check(self, endpoints: Endpoints, history: History) -> Verdict:
        ops = own_ops(history, self.name)
        sent = {op.value["value"] for op in ops if op.f == "send" and op.type == "ok"}
        last_due = max((op.value["due_ms"] for op in ops if op.f == "send"), default=0)
        wait_s = max(0.0, (last_due - wall_ms()) / 1000) + self.bound_s
        read = read_back(endpoints.admin, self.topic, self.partitions,
                         lambda records: sent <= {r.value for r in records}, wait_s)
        return check_scheduled(ops, read, self.name)


def check_scheduled(ops: list[Op], read: list[ReadRecord],
                    workload: str = "scheduled") -> Verdict:
    anomalies: dict[str, list[Any]] = defaultdict(list)
    sends = {op.value["value"]: op for op in ops if op.f == "send"}
    at = {(r.partition, r.offset): r.value for r in read}
    offsets: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r in read:
        offsets[r.value].append((r.partition, r.offset))
        if r.value not in sends:
            anomalies["phantom"].append({"what": "read back", "at": (r.partition, r.offset),
                                         "value": r.value})
    stamps = {(r.partition, r.offset): r.headers.get(SCHEDULED_AT) for r in read}
    resent = 0
    for value, places in offsets.items():
        if len(places) < 2:
            continue
        held = [stamps[place] for place in places]
        if None in held or len(set(held)) < len(held):
            anomalies["duplicate"].append({"value": value, "at": places, "held-at": held})
        else:
            resent += len(places) - 1
    for value, op in sends.items():
        if op.type != "ok":
            continue
        if value not in offsets:
            anomalies["lost"].append({"value": value, "due_ms": op.value["due_ms"],
                                      "partition": op.value["partition"]})
        elif any(p != op.value["partition"] for p, _ in offsets[value]):
            anomalies["wrong-partition"].append({"value": value, "at": offsets[value],
                                                 "sent-to": op.value["partition"]})

    seen: dict[tuple[int, int], list[Op]] = defaultdict(list)
    lateness: list[int] = []
    for op in ops:
        if op.f != "poll" or op.type != "ok":
            continue
        for partition, offset, value in op.value:
            key = (partition, offset)
            seen[key].append(op)
            if value not in sends:
                anomalies["phantom"].append({"what": "delivery", "at": key, "value": value})
                continue
            if at.get(key) != value:
                anomalies["wrong-value"].append({"at": key, "value": value,
                                                 "read-back": at.get(key)})
            due = sends[value].value["due_ms"]
            if len(seen[key]) == 1:
                lateness.append(op.extra["wall_ms"] - due)
            if op.extra["wall_ms"] < due - ALLOWANCE_MS:
                anomalies["early"].append({"value": value, "at": key, "due_ms": due,
                                           "early_ms": due - op.extra["wall_ms"],
                                           "process": op.process})
    assigns = [op for op in ops if op.f == "assign"]
    for (partition, offset), polls in seen.items():
        for first, again in itertools.pairwise(polls):
            if first.process == again.process and not any(
                    a.process == first.process and partition in a.value
                    and (first.completed_ns or 0) <= a.invoked_ns <= (again.completed_ns or 0)
                    for a in assigns):
                anomalies["duplicate-delivery"].append({
                    "at": (partition, offset), "process": first.process,
                    "polls": [first.index, again.index]})
    anomalies["fatal-error"] += fatal_errors(ops)
    lateness.sort()
    stats = {
        "sent": sum(op.type == "ok" for op in sends.values()),
        "read-back": len(read),
        "resent-copies": resent,
        "delivered": len(seen),
        "delivered-again": sum(len(polls) - 1 for polls in seen.values()),
        "lateness_ms": {"p50": lateness[len(lateness) // 2],
                        "p99": lateness[len(lateness) * 99 // 100],
                        "max": lateness[-1]} if lateness else {},
    }
    found = {kind: examples for kind, examples in anomalies.items() if examples}
    return Verdict(workload, not found and bool(seen), found, stats)
