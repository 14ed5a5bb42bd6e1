"""The queue workload, after Jepsen's Kafka test: idempotent acks=all producers send unique
values to the partitions of one topic (some through the proxy, some straight to the brokers),
consumers of one group (likewise) poll and commit; after the faults are healed a member of the
group drains what is left, a fresh consumer reads every partition in full, and the checker
judges the history.

History: ``send`` ({partition, value} -> ok with its offset, or info), ``poll`` (ok with
[partition, offset, value] records), ``commit``, events ``assign``/``revoke`` (partitions),
``restart`` (a consumer closed and a new one started), ``fatal`` (a client's fatal error),
``client-error`` (confluent-kafka's binding failing in poll(): the producer is replaced),
and the ``final-read`` event ({partition: [[offset, value]]}). Its processes are named after its
topic (``queue-1a2b3c4d/producer-0-proxy``): several workloads may record into one history.

Anomalies (Jepsen's names): ``lost-write`` (acknowledged, not in the final read or not at its
acknowledged offset), ``duplicate`` (one value at two offsets), ``inconsistent-offsets`` (two
values at one offset: an offset reused), ``nonmonotonic-send`` (a producer's acknowledged sends
to a partition out of offset order), ``poll-skip`` / ``nonmonotonic-poll`` (a consumer skipping
records or going back within one assignment), ``unseen`` (acknowledged, never polled by the
group, even by the final drain), ``unexpected-value`` (read, never sent), ``nonmonotonic-read``
(the final read going back), ``fatal`` (a client's fatal error: no freeze or partition may kill
an idempotent producer).
"""

from __future__ import annotations

import bisect
import itertools
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.faults.elle import Anomalies, Log, offset_anomalies
from tests.faults.history import History, Op
from tests.faults.recorded_clients import (
    binding_failed,
    client_debug,
    own_ops,
    retire,
    run_all,
)
from tests.faults.workload import Endpoints, Verdict
from tests.faults.writers import Writers, read_writers, renumbered, writer_at

GROUP_SESSION_MS = 10_000
READ_TIMEOUT_S = 90.0
DRAIN_IDLE_S = 10.0
# A value the client itself wrote twice, under two epochs of its producer id: librdkafka's
# renumbering after an epoch bump (tests.faults.writers), which Kafka takes as new records too.
ALLOWED = frozenset({"duplicate-renumbered"})
COMMIT_RATIO = 0.5            # of a consumer's polls followed by a commit
RESTART_RATIO = 0.01          # of a consumer's polls followed by a new consumer


def create_topic(admin: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Create ``topic`` and wait until its metadata names a leader for every partition."""
    client = AdminClient({"bootstrap.servers": admin})
    for future in client.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        meta = client.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions \
                and all(p.leader >= 0 and p.error is None for p in meta.partitions.values()):
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic}: no leader for every partition after {timeout}s")


def client_route(endpoints: Endpoints, i: int) -> tuple[str, str]:
    """Where client ``i`` bootstraps: every other one on the proxy, if there is one. (BMQ's
    metadata names a proxy as every partition's leader, if the cluster has one: produce and
    fetch go through it either way, coordinators are brokers.)"""
    if endpoints.proxy is not None and i % 2 == 0:
        return endpoints.proxy, "proxy"
    return endpoints.bootstrap, "brokers"


def run_clients(*clients: Callable[[], None]) -> None:
    """Run each client in its own thread until all have returned."""
    run_all([threading.Thread(target=client, daemon=True) for client in clients])


def read_log(bootstrap: str, topic: str, partitions: int, isolation: str) -> Log:
    """Every record of every partition, from the start up to the high watermark each had when
    the read began (for read_committed, until the consumer's position passes it: no open
    transaction may hold its last stable offset back by then)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": True})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 30, False)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        log: Log = {p: [] for p in range(partitions)}
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(done) < partitions:
            assert time.monotonic() < deadline, f"read of {topic} stuck: {ends}, done {done}"
            for message in consumer.consume(500, 0.5):
                error = message.error()
                partition = message.partition()
                if error is None:
                    log[partition].append((message.offset(), message.value().decode()))
                elif error.code() == KafkaError._PARTITION_EOF:
                    if message.offset() >= ends[partition]:
                        done.add(partition)
                else:
                    raise AssertionError(f"read of {topic}: {error}")
        return log
    finally:
        consumer.close()


def final_read(history: History, endpoints: Endpoints, topic: str, partitions: int,
               isolation: str) -> Log:
    """Read the topic in full and record it in ``history`` as the ``final-read`` event, and
    who wrote its batches as the ``final-writers`` event."""
    log = read_log(endpoints.admin, topic, partitions, isolation)
    history.event(f"{topic}/final-read", "final-read",
                  {p: [list(r) for r in rs] for p, rs in log.items()})
    history.event(f"{topic}/final-writers", "final-writers",
                  read_writers(endpoints.admin, topic, partitions))
    return log


def recorded_final_read(ops: list[Op]) -> Log:
    reads = [op.value for op in ops if op.f == "final-read"]
    assert len(reads) == 1, f"{len(reads)} final reads in the history"
    return {int(p): [(int(o), str(v)) for o, v in records] for p, records in reads[0].items()}


def recorded_writers(ops: list[Op]) -> Writers | None:
    """The ``final-writers`` event's batches (None in a history without one)."""
    found = [op.value for op in ops if op.f == "final-writers"]
    return {int(p): batches for p, batches in found[0].items()} if found else None


def _delivery_order_anomalies(found: Anomalies, sends: list[Op]) -> None:
    last: dict[tuple[str, int], tuple[int, str]] = {}
    for op in sends:
        partition, offset = op.value["partition"], op.value["offset"]
        if offset is None:
            continue
        key = (op.process, partition)
        if key in last and offset <= last[key][0]:
            found.add("nonmonotonic-send", {"process": op.process, "partition": partition,
                                            "before": last[key], "then": [offset,
                                                                          op.value["value"]]})
        last[key] = (offset, op.value["value"])


def poll_order_anomalies(found: Anomalies, ops: list[Op], final: Log) -> None:
    """Each consumer's polls, in the order it saw them, against the final read's offsets: no
    step back and no record skipped within one assignment (an assign, a revoke or a new
    consumer starts over)."""
    offsets = {p: [o for o, _ in records] for p, records in final.items()}
    by_process: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f in ("poll", "assign", "revoke", "restart") and op.type == "ok":
            by_process[op.process].append(op)
    for process, seen in by_process.items():
        last: dict[int, int] = {}
        for op in sorted(seen, key=lambda o: (o.completed_ns or 0, o.index)):
            if op.f != "poll":
                last.clear()
                continue
            for partition, offset, _value in op.value:
                if partition in last:
                    before = last[partition]
                    log = offsets.get(partition, [])
                    skipped = log[bisect.bisect_right(log, before):bisect.bisect_left(log, offset)]
                    if offset <= before:
                        found.add("nonmonotonic-poll", {"process": process, "op": op.index,
                                                        "partition": partition,
                                                        "from": before, "to": offset})
                    elif skipped:
                        found.add("poll-skip", {"process": process, "op": op.index,
                                                "partition": partition, "from": before,
                                                "to": offset, "skipped": len(skipped)})
                last[partition] = offset


def check_queue(workload: str, ops: list[Op]) -> Verdict:
    """Judge a queue workload's history (which ends with its ``final-read`` event)."""
    found = Anomalies()
    final = recorded_final_read(ops)
    sent = {op.value["value"] for op in ops if op.f == "send"}
    acked = [op for op in ops if op.f == "send" and op.type == "ok"]
    polled = [tuple(r) for op in ops if op.f == "poll" and op.type == "ok" for r in op.value]
    positions = [(p, o, v) for p, records in final.items() for o, v in records]
    positions += [(op.value["partition"], op.value["offset"], op.value["value"]) for op in acked
                  if op.value["offset"] is not None]
    positions += [(p, o, v) for p, o, v in polled]
    writers = recorded_writers(ops)
    offset_anomalies(found, positions, partial(renumbered, writers))
    at: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p, records in final.items():
        for o, v in records:
            at[v].append((p, o))
    for op in acked:
        value, partition, offset = op.value["value"], op.value["partition"], op.value["offset"]
        where = at.get(value, [])
        if not any(p == partition and offset in (None, o) for p, o in where):
            found.add("lost-write", {"value": value, "acked": [partition, offset],
                                     "final": where, "process": op.process})
    for partition, records in final.items():
        for (o1, _), (o2, v2) in itertools.pairwise(records):
            if o2 <= o1:
                found.add("nonmonotonic-read", {"partition": partition, "from": o1, "to": o2,
                                                "value": v2})
    for value in sorted({v for _, _, v in positions} - sent):
        found.add("unexpected-value", value)
    _delivery_order_anomalies(found, acked)
    poll_order_anomalies(found, ops, final)
    seen = {v for _, _, v in polled}
    for op in acked:
        if op.value["value"] not in seen:
            found.add("unseen", op.value)
    for op in ops:
        if op.f == "fatal":
            found.add("fatal", {"process": op.process, "error": op.value})
    stats = {"acked-sends": len(acked), "unknown-sends": sum(
        op.f == "send" and op.type == "info" for op in ops), "polled-records": len(polled),
        "final-records": len(at), "client-errors": sum(op.f == "client-error" for op in ops)}
    if writers is not None:     # the two reads of the log agree: every record has its writer
        stats["final-read-records"] = sum(len(records) for records in final.values())
        stats["records-with-producer-id"] = sum(
            (w := writer_at(writers, p, o)) is not None and w[0] >= 0
            for p, records in final.items() for o, _ in records)
    return found.verdict(workload, ALLOWED, stats, tested=bool(acked and polled))


class QueueWorkload:
    name = "queue"

    def __init__(self, partitions: int = 6, producers: int = 4, consumers: int = 3,
                 rate: float = 100.0) -> None:
        self.topic = f"queue-{uuid.uuid4().hex[:8]}"
        self.group = f"{self.topic}-group"
        self.partitions = partitions
        self.producers = producers
        self.consumers = consumers
        self.rate = rate                  # sends per second per producer

    def setup(self, endpoints: Endpoints) -> None:
        create_topic(endpoints.admin, self.topic, self.partitions)

    def run(self, endpoints: Endpoints, history: History, stop: threading.Event,
            seed: int) -> None:
        run_clients(
            *(partial(self._produce, endpoints, history, stop, i, random.Random(seed + i))
              for i in range(self.producers)),
            *(partial(self._consume, endpoints, history, stop, i, random.Random(-seed - i))
              for i in range(self.consumers)))

    def _producer(self, bootstrap: str, history: History, process: str,
                  fatal: threading.Event) -> Producer:
        def on_error(error: KafkaError) -> None:
            if error.fatal():
                history.event(process, "fatal", str(error))
                fatal.set()
        return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "message.timeout.ms": 60_000,
                         "retry.backoff.ms": 50, "retry.backoff.max.ms": 500,
                         "error_cb": on_error, **client_debug()})

    def _produce(self, endpoints: Endpoints, history: History, stop: threading.Event, i: int,
                 rng: random.Random) -> None:
        bootstrap, route = client_route(endpoints, i)
        process = f"{self.topic}/producer-{i}-{route}"
        open_ops: dict[int, Op] = {}

        def delivered(op: Op, error: KafkaError | None, message: Message) -> None:
            open_ops.pop(op.index, None)
            if error is not None:
                history.info(op, str(error))
            else:
                offset = message.offset()
                history.ok(op, {**op.value, "offset": offset if offset >= 0 else None})

        fatal = threading.Event()
        producer = self._producer(bootstrap, history, process, fatal)
        n = 0
        while not stop.is_set():
            if fatal.is_set():         # as an application would: a new producer
                retire(producer, 10)
                fatal.clear()
                producer = self._producer(bootstrap, history, process, fatal)
            partition = rng.randrange(self.partitions)
            value = f"{process}:{n}"
            n += 1
            op = history.invoke(process, "send", {"partition": partition, "value": value})
            try:
                producer.produce(self.topic, value.encode(), partition=partition,
                                 on_delivery=lambda e, m, op=op: delivered(op, e, m))
            except BufferError as exc:      # the queue is full while a partition moves
                history.fail(op, str(exc))
            except KafkaException as exc:   # a fatal error its callback has not told yet
                history.fail(op, str(exc))
                history.event(process, "fatal", str(exc))
                fatal.set()
            else:
                open_ops[op.index] = op
            try:
                producer.poll(0)
            except SystemError as exc:
                binding_failed(history, process, exc)
                fatal.set()
            time.sleep(1.0 / self.rate)
        retire(producer, 90)
        for op in list(open_ops.values()):
            history.info(op, "not delivered by the end")

    def _consumer(self, bootstrap: str, history: History, process: str) -> Consumer:
        consumer = Consumer({**client_debug(), "bootstrap.servers": bootstrap,
                             "group.id": self.group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": GROUP_SESSION_MS,
                             "error_cb": lambda e: e.fatal() and history.event(
                                 process, "fatal", str(e))})

        def assigned(_c: Consumer, partitions: list[TopicPartition]) -> None:
            history.event(process, "assign", sorted(p.partition for p in partitions))

        def revoked(_c: Consumer, partitions: list[TopicPartition]) -> None:
            history.event(process, "revoke", sorted(p.partition for p in partitions))

        consumer.subscribe([self.topic], on_assign=assigned, on_revoke=revoked,
                           on_lost=revoked)
        return consumer

    def _poll(self, consumer: Consumer, history: History, process: str,
              commit: bool = True) -> list[Any]:
        """One poll and, if it returned records and ``commit``, a synchronous commit."""
        op = history.invoke(process, "poll")
        records = []
        for message in consumer.consume(200, 0.2):
            if message.error() is None:
                records.append([message.partition(), message.offset(),
                                message.value().decode()])
        history.ok(op, records)
        if records and commit:
            committed = history.invoke(process, "commit")
            try:
                consumer.commit(asynchronous=False)
                history.ok(committed)
            except Exception as error:   # a commit that fails only means more re-delivery
                history.info(committed, str(error))
        return records

    def _consume(self, endpoints: Endpoints, history: History, stop: threading.Event, i: int,
                 rng: random.Random) -> None:
        """Poll, commit after some polls only, and now and then close the consumer and start
        a new one (as Jepsen's clients crash): rebalances, and records delivered again from
        the group's committed offsets."""
        bootstrap, route = client_route(endpoints, i)
        process = f"{self.topic}/consumer-{i}-{route}"
        consumer = self._consumer(bootstrap, history, process)
        try:
            while not stop.is_set():
                self._poll(consumer, history, process, commit=rng.random() < COMMIT_RATIO)
                if rng.random() < RESTART_RATIO:
                    consumer.close()
                    history.event(process, "restart")
                    consumer = self._consumer(bootstrap, history, process)
        finally:
            consumer.close()

    def drain(self, endpoints: Endpoints, history: History) -> None:
        """A new member of the group polls until it has everything acknowledged that the
        group has not seen, or nothing more comes for DRAIN_IDLE_S."""
        ops = own_ops(history, self.topic)
        seen = {r[2] for op in ops if op.f == "poll" and op.type == "ok" for r in op.value}
        missing = {op.value["value"] for op in ops if op.f == "send" and op.type == "ok"} - seen
        process = f"{self.topic}/drain"
        consumer = self._consumer(endpoints.admin, history, process)
        try:
            idle_since = time.monotonic()
            while missing and time.monotonic() - idle_since < DRAIN_IDLE_S:
                records = self._poll(consumer, history, process)
                if records:
                    idle_since = time.monotonic()
                missing -= {r[2] for r in records}
        finally:
            consumer.close()

    def check(self, endpoints: Endpoints, history: History) -> Verdict:
        self.drain(endpoints, history)
        final_read(history, endpoints, self.topic, self.partitions, "read_uncommitted")
        return check_queue(self.name, own_ops(history, self.topic))
