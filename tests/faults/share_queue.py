"""The share group workload (KIP-932): idempotent producers of unique values, and several
confluent-kafka ShareConsumers of one share group (some through the proxy, some on the
brokers) acknowledging what they get: mostly ACCEPT, some RELEASE, a few REJECT, and "poison"
values always released, so that delivery counts reach the group's limit and the dead-letter
topic (KIP-1191) takes them.

The history: ``send`` (``recorded_clients``); ``poll`` completes ``ok`` with the records it
returned as ``[partition, offset, value, delivery count]``; ``ack`` is one partition's part of
a ``commit_sync``, invoked with ``{"partition", "acks": [[offset, value, type], ...]}`` and
completed with that partition's result: ``ok``, ``fail`` for ``INVALID_RECORD_STATE`` (the
broker applied none of the partition's acknowledgements: the lock had expired or the record
moved on), ``info`` for any other error or none (the answer may have been lost after they were
applied). A ``fail`` is still not proof that nothing was applied: had the client retried an
acknowledgement whose first answer was lost, the retry would meet the record acknowledged
already and fail; so the loss check counts a failed final acknowledgement, as an ``info`` one,
``indeterminate``, unless the record was delivered again after it (then it was not applied,
and the record must be settled anew).

What Kafka's share groups promise, and what the checker holds them to (``check_share``):

- at-least-once delivery: every acknowledged produce is, once the faults are healed,
  accepted by some consumer or, rejected or delivered ``share.delivery.count.limit`` times,
  copied to the dead-letter topic (``lost`` otherwise; a record with a final acknowledgement
  not answered ``ok`` is counted ``indeterminate``, not lost);
- an acknowledgement that was answered is final: no record is acknowledged (ACCEPT or REJECT)
  successfully twice (``duplicate-ack``), none is acquired anew after such an acknowledgement
  completed (``delivered-after-ack``: a delivery by a poll invoked after it, with a delivery
  count above every count that record was delivered with before it), no accepted record is
  also dead-lettered (``accepted-and-dead-lettered``). A poll's interval does not bound when
  its records were acquired: librdkafka hands out the answer of a ShareFetch sent during an
  earlier poll, so a broker frozen with an answer unsent (SIGSTOP) delivers, once resumed,
  records acquired before the freeze, and accepted by another consumer since (its
  acknowledgement then fails); the count tells that acquisition from a new one;
- a delivery is of the record at that offset (``wrong-value``; a value never sent:
  ``phantom``), and two values are never acknowledged at one offset (``offset-reused``);
- delivery counts: between 1 and the limit, and no two deliveries of one record with the same
  count (BMQ writes every acquisition with its count before answering; Kafka itself may
  undercount after a leader change), else ``delivery-count``;
- a dead letter names its record truly (``wrong-value``) and why it was given up: a REJECT
  was sent for it, or it was delivered the limit's number of times (``unexplained-dead-letter``);
- no client meets a fatal error (``fatal-error``).

Not checked, as Kafka does not promise it: that a record is delivered once (a lock expires, a
leader dies: it comes again), that the dead-letter topic holds a record once (a crash between
its write and the archiving copies it again), or any order.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaError, KafkaException, ShareConsumer

from tests.faults.history import History, Op
from tests.faults.recorded_clients import (
    ReadRecord,
    consumer_places,
    exception_error,
    fatal_errors,
    own_ops,
    partition_of,
    produce_until,
    read_back,
    run_all,
    spread_partitions,
)
from tests.faults.workload import Endpoints, Verdict
from tests.faults.writers import Writers, read_writers, renumbered
from tests.groups.helpers import create_topic, unique
from tests.share.helpers import create_dead_letter_topic, set_group_configs

ACK_TYPES = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE,
             "reject": AcknowledgeType.REJECT}
FINAL = ("accept", "reject")
POISON_EVERY = 41       # values always released: dead-lettered at the delivery limit
REJECT_EVERY = 29       # values always rejected
RELEASE_SHARE = 0.05    # of the others, released at random
COMMIT_TIMEOUT_S = 30.0

Key = tuple[int, int]   # (partition, offset)


def ack_type(value: int, rng: random.Random) -> str:
    if value % POISON_EVERY == 0:
        return "release"
    if value % REJECT_EVERY == 0:
        return "reject"
    return "release" if rng.random() < RELEASE_SHARE else "accept"


@dataclass(frozen=True)
class DeadLetter:
    """A record of the dead-letter topic, by the ``bmq.dlq.*`` headers BMQ adds."""

    partition: int
    offset: int
    value: int
    reason: str
    delivery_count: int

    @classmethod
    def of(cls, record: ReadRecord) -> DeadLetter:
        h = record.headers
        return cls(int(h["bmq.dlq.partition"]), int(h["bmq.dlq.offset"]), record.value,
                   h["bmq.dlq.reason"], int(h["bmq.dlq.delivery.count"]))


def share_round(consumer: ShareConsumer, history: History, process: str,
                rng: random.Random) -> bool:
    """One poll, its acknowledgements and their commit; False once the consumer is dead."""
    op = history.invoke(process, "poll")
    try:
        messages = consumer.poll(0.3)
    except KafkaException as exc:
        history.fail(op, exception_error(op, exc))
        return not op.extra.get("fatal")
    got = [m for m in messages if m.error() is None]
    history.ok(op, [[partition_of(m), m.offset(), int(m.value() or b"-1"), m.delivery_count()]
                    for m in got])
    for m in messages:
        error = m.error()
        if isinstance(error, KafkaError) and error.fatal():
            op.extra["fatal"] = True
            op.error = error.name()
    if not got:
        return not op.extra.get("fatal")
    acks: dict[int, list[list[Any]]] = defaultdict(list)
    for m in got:
        kind = ack_type(int(m.value() or b"-1"), rng)
        consumer.acknowledge(m, ACK_TYPES[kind])
        acks[partition_of(m)].append([m.offset(), int(m.value() or b"-1"), kind])
    ops = {p: history.invoke(process, "ack", {"partition": p, "acks": a})
           for p, a in acks.items()}
    try:
        results = consumer.commit_sync(COMMIT_TIMEOUT_S)
    except KafkaException as exc:
        for ack in ops.values():
            history.info(ack, exception_error(ack, exc))
        return not any(ack.extra.get("fatal") for ack in ops.values())
    answered = {tp.partition: result for tp, result in results.items()}
    for p, ack in ops.items():
        if p not in answered:
            history.info(ack, "no result for the partition")
        elif (failure := answered[p]) is None:
            history.ok(ack)
        else:
            name = exception_error(ack, failure)
            if name == "INVALID_RECORD_STATE":
                history.fail(ack, name)
            else:
                history.info(ack, name)
    return True


def run_share_consumer(bootstrap: str, group: str, topic: str, history: History,
                       process: str, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                              "group.id": group, "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        while not stop.is_set() and share_round(consumer, history, process, rng):
            pass
    finally:
        try:
            consumer.close()
        except KafkaException as exc:
            history.event(process, "close", str(exc))


@dataclass
class ShareWorkload:
    """Producers and share consumers of one share group over ``partitions`` partitions."""

    name: str = "share-queue"
    partitions: int = 3
    producers: int = 1
    rate: float = 100.0             # records a second per producer
    broker_consumers: int = 2
    proxy_consumers: int = 1
    delivery_limit: int = 3
    lock_ms: int = 5000             # short: a consumer cut off gives its records back soon
    drain_s: float = 90.0
    topic: str = field(default_factory=lambda: unique("share"))
    group: str = field(default_factory=lambda: unique("sg"))
    dead_letters: str = ""

    def __post_init__(self) -> None:
        self.dead_letters = self.dead_letters or f"dlq.{self.topic}"
        self._values = itertools.count()

    def setup(self, endpoints: Endpoints) -> None:
        create_topic(endpoints.admin, self.topic, self.partitions)
        create_dead_letter_topic(endpoints.admin, self.dead_letters)
        set_group_configs(endpoints.admin, self.group, {
            "share.auto.offset.reset": "earliest",
            "share.delivery.count.limit": str(self.delivery_limit),
            "share.record.lock.duration.ms": str(self.lock_ms),
            "bmq.share.retry.backoff.ms": "100",
            "errors.deadletterqueue.topic.name": self.dead_letters})

    def _consumers(self, endpoints: Endpoints, history: History, stop: threading.Event,
                   seed: int, prefix: str) -> list[threading.Thread]:
        places = consumer_places(endpoints, self.broker_consumers, self.proxy_consumers)
        return [threading.Thread(target=run_share_consumer, daemon=True, args=(
                    place, self.group, self.topic, history, f"{self.name}/{prefix}{n}", stop,
                    seed + n))
                for n, place in enumerate(places)]

    def run(self, endpoints: Endpoints, history: History, stop: threading.Event,
            seed: int) -> None:
        threads = self._consumers(endpoints, history, stop, seed, "consumer-")
        for n in range(self.producers):
            spread = spread_partitions(self.partitions, seed * 1000 + n)
            threads.append(threading.Thread(target=produce_until, daemon=True, args=(
                endpoints.bootstrap, self.topic, history, f"{self.name}/producer-{n}", stop,
                self.rate, self._values, lambda value, spread=spread: (spread(), None, {}))))
        run_all(threads)

    def check(self, endpoints: Endpoints, history: History) -> Verdict:
        """Drain: fresh consumers of the group run until every acknowledged produce is
        settled (accepted, or in the dead-letter topic) or ``drain_s`` passed; then judge."""
        stop = threading.Event()
        threads = self._consumers(endpoints, history, stop, 7, "drain-")
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + self.drain_s
        letters: list[DeadLetter] = []
        while time.monotonic() < deadline:
            letters = self.read_dead_letters(endpoints)
            if not unsettled(own_ops(history, self.name), letters):
                break
            time.sleep(2.0)
        stop.set()
        for thread in threads:
            thread.join()
        letters = self.read_dead_letters(endpoints)
        return check_share(own_ops(history, self.name), letters, self.delivery_limit,
                           self.name, read_writers(endpoints.admin, self.topic, self.partitions))

    def read_dead_letters(self, endpoints: Endpoints) -> list[DeadLetter]:
        return [DeadLetter.of(r) for r in read_back(endpoints.admin, self.dead_letters, 1,
                                                    lambda _: True, 30.0)]


def _acks(ops: Iterable[Op]) -> Iterable[tuple[Op, int, int, int, str]]:
    """(op, partition, offset, value, type) of every acknowledgement sent."""
    for op in ops:
        if op.f == "ack":
            for offset, value, kind in op.value["acks"]:
                yield op, op.value["partition"], offset, value, kind


def unsettled(ops: list[Op], letters: list[DeadLetter]) -> set[int]:
    """Values acknowledged by their producer and neither accepted nor dead-lettered, nor
    given a final acknowledgement not answered ``ok`` (indeterminate)."""
    sent = {op.value["value"] for op in ops if op.f == "send" and op.type == "ok"}
    return sent - _indeterminate(ops) - {letter.value for letter in letters} - {
        value for op, _, _, value, kind in _acks(ops) if op.type == "ok" and kind == "accept"}


def _indeterminate(ops: list[Op]) -> set[int]:
    """Values whose last delivery was given a final acknowledgement not answered ``ok``."""
    last_poll: dict[Key, int] = {}
    for op in ops:
        if op.f == "poll" and op.type == "ok":
            for partition, offset, _, _ in op.value:
                last_poll[(partition, offset)] = max(op.invoked_ns,
                                                     last_poll.get((partition, offset), 0))
    return {value for op, partition, offset, value, kind in _acks(ops)
            if op.type != "ok" and kind in FINAL
            and (op.completed_ns or op.invoked_ns) >= last_poll.get((partition, offset), 0)}


def check_share(ops: list[Op], letters: list[DeadLetter], delivery_limit: int,
                workload: str = "share-queue", writers: Writers | None = None) -> Verdict:
    """``writers``: who wrote the topic's batches (``tests.faults.writers``): a delivery of
    the other copy of a value its producer renumbered is that value's record too."""
    anomalies: dict[str, list[Any]] = defaultdict(list)
    copies: set[Key] = set()        # the renumbered copies delivered
    sends = [op for op in ops if op.f == "send"]
    invoked = {op.value["value"] for op in sends}
    at: dict[Key, int] = {}                 # acknowledged produces: where each value is
    where: dict[int, Key] = {}
    for op in sends:
        # An acknowledgement without an offset (librdkafka reports -1 for some, e.g. a
        # retried batch the broker already had) says nothing of where the value is.
        if op.type == "ok" and op.value["offset"] is not None and op.value["offset"] >= 0:
            key = (op.value["partition"], op.value["offset"])
            if at.get(key, op.value["value"]) != op.value["value"]:
                anomalies["offset-reused"].append({"at": key, "values": [at[key],
                                                                           op.value["value"]]})
            at[key] = op.value["value"]
            where[op.value["value"]] = key

    def wrong(kind: str, key: Key, value: int) -> None:
        if value not in invoked:
            anomalies["phantom"].append({"what": kind, "at": key, "value": value})
        elif at.get(key, value) != value:
            anomalies["wrong-value"].append({"what": kind, "at": key, "value": value,
                                             "acked-at": where.get(value),
                                             "acked-there": at.get(key)})
        elif where.get(value, key) == key:
            pass
        elif renumbered(writers, [key, where[value]]):
            copies.add(key)
        else:
            anomalies["wrong-value"].append({"what": kind, "at": key, "value": value,
                                             "acked-at": where.get(value),
                                             "acked-there": at.get(key)})

    deliveries: dict[Key, list[tuple[Op, int]]] = defaultdict(list)
    for op in ops:
        if op.f == "poll" and op.type == "ok":
            for partition, offset, value, count in op.value:
                key = (partition, offset)
                deliveries[key].append((op, count))
                wrong("delivery", key, value)
                if not 1 <= count <= delivery_limit:
                    anomalies["delivery-count"].append({"at": key, "count": count,
                                                        "process": op.process})
    for key, seen in deliveries.items():
        counts = [count for _, count in seen]
        if len(set(counts)) < len(counts):
            anomalies["delivery-count"].append({"at": key, "counts": counts,
                                                "ops": [op.index for op, _ in seen]})

    final: dict[Key, list[tuple[Op, str]]] = defaultdict(list)
    for op, partition, offset, _, kind in _acks(ops):
        if op.type == "ok" and kind in FINAL:
            final[(partition, offset)].append((op, kind))
    accepted: set[Key] = set()
    for key, answered in final.items():
        accepted |= {key} if any(kind == "accept" for _, kind in answered) else set()
        if len(answered) > 1:
            anomalies["duplicate-ack"].append({"at": key, "acks": [
                {"op": op.index, "process": op.process, "type": kind} for op, kind in answered]})
        done = min(op.completed_ns or 0 for op, _ in answered)
        known = max((count for poll, count in deliveries.get(key, [])
                     if (poll.completed_ns or 0) < done), default=0)
        for poll, count in deliveries.get(key, []):
            if poll.invoked_ns > done and count > known:
                anomalies["delivered-after-ack"].append({"at": key, "poll": poll.index,
                                                         "process": poll.process,
                                                         "count": count})

    rejects = {(partition, offset) for op, partition, offset, _, kind in _acks(ops)
               if kind == "reject" and op.type in ("ok", "info")}
    lettered: set[int] = set()
    for letter in letters:
        key = (letter.partition, letter.offset)
        lettered.add(letter.value)
        wrong("dead-letter", key, letter.value)
        if key in accepted:
            anomalies["accepted-and-dead-lettered"].append({"at": key, "value": letter.value})
        if not ((letter.reason == "rejected" and key in rejects)
                or (letter.reason == "delivery.count.limit"
                    and letter.delivery_count >= delivery_limit)):
            anomalies["unexplained-dead-letter"].append({
                "at": key, "reason": letter.reason, "count": letter.delivery_count})

    missing = unsettled(ops, letters)
    for value in sorted(missing):
        place = where.get(value)
        anomalies["lost"].append({"value": value, "at": place, "deliveries":
                                  len(deliveries[place]) if place in deliveries else 0})
    anomalies["fatal-error"] += fatal_errors(ops)
    ack_ops = [op for op in ops if op.f == "ack"]
    stats = {
        "sent": sum(op.type == "ok" for op in sends),
        "deliveries": sum(len(seen) for seen in deliveries.values()),
        "redeliveries": sum(len(seen) - 1 for seen in deliveries.values()),
        "accepted": len(accepted),
        "dead-letters": len(letters),
        "dead-lettered-twice": len(letters) - len({(d.partition, d.offset) for d in letters}),
        "ack-commits": {t: sum(op.type == t for op in ack_ops) for t in ("ok", "fail", "info")},
        "indeterminate": len(_indeterminate(ops) - lettered - {at[k] for k in accepted if k in at}),
        "renumbered-copies": len(copies),
    }
    found = {kind: examples for kind, examples in anomalies.items() if examples}
    return Verdict(workload, not found and bool(accepted), found, stats)
