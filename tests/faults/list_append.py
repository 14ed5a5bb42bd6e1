"""The list-append workload over Kafka's transactions, after Jepsen's Kafka test: each key is a
partition of one topic; transactional producers (some through the proxy) append unique values
to a few keys per transaction, and in some transactions also poll a read_committed consumer of
their own (assigned every partition, reading on from where it was); some transactions are
aborted on purpose. Read-only read_committed consumers poll alongside. After the faults are
healed a fresh read_committed consumer reads every partition in full, and ``tests.faults.elle``
judges the history.

History: ``txn`` ops, invoked with the planned micro-operations ``["append", key, value]`` and
``["poll"]``, completed with ``["append", key, value, offset]`` and ``["poll", [[key, offset,
value], ...]]``: ``ok`` committed, ``fail`` aborted (on purpose, or after an error that required
it), ``info`` unknown (the commit's answer was lost, or the producer died); the readers' ``poll``
ops (``[[key, offset, value]]``), and the ``final-read`` event; processes named after the topic.
"""

from __future__ import annotations

import random
import threading
import uuid
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

from tests.faults import elle
from tests.faults.history import History, Op
from tests.faults.queue import (
    client_route,
    create_topic,
    final_read,
    poll_order_anomalies,
    recorded_final_read,
    run_clients,
)
from tests.faults.recorded_clients import own_ops, retire
from tests.faults.workload import Endpoints, Verdict

# What Kafka's transactions allow (module doc of tests.faults.elle); G0 cannot show without ww
# edges, and a G1c is then a cycle of wr edges alone: forbidden at read_committed.
KAFKA_ALLOWED = frozenset({"G1b", "lost-update", "G-single", "G2"})
TXN_TIMEOUT_MS = 10_000
CLIENT_TIMEOUT_S = 30.0
ABORT_RATIO = 0.15
POLL_RATIO = 0.5


def txns_of(ops: list[Op]) -> list[elle.Txn]:
    """The transactions of a history, and each reader's poll as a read-only one."""
    txns = []
    for op in ops:
        if op.f == "txn" and op.type in ("ok", "fail", "info"):
            appends = tuple((m[1], m[2], m[3] if len(m) > 3 else None)
                            for m in op.value if m[0] == "append")
            reads = tuple((k, o, v) for m in op.value if m[0] == "poll" and len(m) > 1
                          for k, o, v in m[1])
            txns.append(elle.Txn(op.index, op.process, op.type, appends, reads))
        elif op.f == "poll" and op.type == "ok" and op.value:
            txns.append(elle.Txn(op.index, op.process, "ok",
                                 reads=tuple((k, o, v) for k, o, v in op.value)))
    return txns


def check_list_append(workload: str, ops: list[Op]) -> Verdict:
    """Judge a list-append history (which ends with its ``final-read`` event) by what Kafka's
    transactions promise; the stats count the cycles ww edges would add (allowed in Kafka)."""
    final = recorded_final_read(ops)
    txns = txns_of(ops)
    found = elle.Anomalies()
    poll_order_anomalies(found, ops, final)
    verdict = elle.check(workload, txns, final, allowed=KAFKA_ALLOWED, found=found)
    with_ww = elle.check(workload, txns, final, ww_deps=True,
                         allowed=frozenset({"G0", "G1c", *KAFKA_ALLOWED}))
    verdict.stats["allowed-with-ww-edges"] = with_ww.stats["allowed-anomalies"]
    return verdict


class ListAppendWorkload:
    name = "list-append"

    def __init__(self, keys: int = 6, producers: int = 4, readers: int = 2) -> None:
        self.topic = f"append-{uuid.uuid4().hex[:8]}"
        self.keys = keys
        self.producers = producers
        self.readers = readers

    def setup(self, endpoints: Endpoints) -> None:
        create_topic(endpoints.admin, self.topic, self.keys)

    def _consumer(self, bootstrap: str) -> Consumer:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{self.topic}-read",
                             "enable.auto.commit": False, "isolation.level": "read_committed"})
        consumer.assign([TopicPartition(self.topic, k, OFFSET_BEGINNING)
                         for k in range(self.keys)])
        return consumer

    def run(self, endpoints: Endpoints, history: History, stop: threading.Event,
            seed: int) -> None:
        run_clients(
            *(partial(self._transact, endpoints, history, stop, i, random.Random(seed + i))
              for i in range(self.producers)),
            *(partial(self._read, endpoints, history, stop, i) for i in range(self.readers)))

    def _read(self, endpoints: Endpoints, history: History, stop: threading.Event,
              i: int) -> None:
        bootstrap, route = client_route(endpoints, i)
        consumer = self._consumer(bootstrap)
        try:
            while not stop.is_set():
                op = history.invoke(f"{self.topic}/reader-{i}-{route}", "poll")
                history.ok(op, _records(consumer))
        finally:
            consumer.close()

    def _plan(self, process: str, n: int, rng: random.Random) -> list[list[Any]]:
        keys = rng.sample(range(self.keys), rng.randint(1, 3))
        plan: list[list[Any]] = [["append", k, f"{process}:{n}:{j}"]
                                 for j, k in enumerate(rng.choices(keys, k=rng.randint(1, 4)))]
        if rng.random() < POLL_RATIO:
            plan.insert(rng.randint(0, len(plan)), ["poll"])
        return plan

    def _transact(self, endpoints: Endpoints, history: History, stop: threading.Event, i: int,
                  rng: random.Random) -> None:
        bootstrap, route = client_route(endpoints, i)
        process = f"{self.topic}/txn-{i}-{route}"
        consumer = self._consumer(bootstrap)
        producer: Producer | None = None
        n = 0
        try:
            while not stop.is_set():
                if producer is None:
                    producer = Producer({"bootstrap.servers": bootstrap,
                                         "transactional.id": f"{self.topic}-{i}",
                                         "transaction.timeout.ms": TXN_TIMEOUT_MS,
                                         "linger.ms": 2})
                    try:
                        producer.init_transactions(CLIENT_TIMEOUT_S)
                    except KafkaException:
                        retire(producer, 0)
                        producer = None
                        continue
                plan = self._plan(process, n, rng)
                n += 1
                op = history.invoke(process, "txn", plan)
                if not self._one(producer, consumer, history, op, plan, rng):
                    retire(producer, 0)        # fatal, or in a state only a new one clears
                    producer = None
        finally:
            consumer.close()
            if producer is not None:
                retire(producer, CLIENT_TIMEOUT_S)

    def _one(self, producer: Producer, consumer: Consumer, history: History, op: Op,
             plan: list[list[Any]], rng: random.Random) -> bool:
        """Run one transaction, completing ``op``; False if the producer must be replaced."""
        offsets: dict[str, int] = {}
        done: list[list[Any]] = []

        def acked(error: KafkaError | None, message: Message) -> None:
            if error is None:
                offsets[message.value().decode()] = message.offset()

        def result() -> list[list[Any]]:
            return [[*m, offsets.get(m[2])] if m[0] == "append" else m for m in done]

        try:
            producer.begin_transaction()
            for mop in plan:
                if mop[0] == "poll":
                    done.append(["poll", _records(consumer)])
                    continue
                _, key, value = mop
                producer.produce(self.topic, value.encode(), partition=key, on_delivery=acked)
                done.append(mop)
            producer.flush(CLIENT_TIMEOUT_S)
            if rng.random() < ABORT_RATIO:
                producer.abort_transaction(CLIENT_TIMEOUT_S)
                history.fail(op, "aborted on purpose", result())
                return True
            _commit(producer)
            history.ok(op, result())
            return True
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():     # then a successful abort means it is aborted
                try:
                    producer.abort_transaction(CLIENT_TIMEOUT_S)
                    history.fail(op, f"aborted after {error}", result())
                    return True
                except KafkaException as abort_error:
                    history.info(op, f"{error}; then abort: {abort_error}", result())
                    return False
            # A commit's outcome is unknown unless it was answered; replace the producer (a
            # new one's InitProducerId finishes or aborts what this one left open).
            history.info(op, str(error), result())
            return False

    def check(self, endpoints: Endpoints, history: History) -> Verdict:
        final_read(history, endpoints, self.topic, self.keys, "read_committed")
        return check_list_append(self.name, own_ops(history, self.topic))


def _commit(producer: Producer, attempts: int = 3) -> None:
    """Commit, retrying what librdkafka calls retriable (the outcome is not known yet)."""
    for attempt in range(attempts):
        try:
            producer.commit_transaction(CLIENT_TIMEOUT_S)
            return
        except KafkaException as exc:
            if not exc.args[0].retriable() or attempt == attempts - 1:
                raise


def _records(consumer: Consumer) -> list[list[Any]]:
    return [[m.partition(), m.offset(), m.value().decode()]
            for m in consumer.consume(200, 0.2) if m.error() is None]
