"""Kafka clients the share and scheduled workloads share: an idempotent producer recording
every send in a history, and a read-back of a topic after the faults are healed.

A send is invoked when handed to the producer and completes in its delivery report: ``ok``
with the partition and offset, ``info`` on any error (an idempotent producer's failed or
timed-out batch may still have been written). An error librdkafka calls fatal is marked
``extra["fatal"]`` so checkers can report it: no client may see a fatal error (issue #30)."""

from __future__ import annotations

import functools
import itertools
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
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

from tests.faults.history import History, Op
from tests.faults.workload import Endpoints

# Long enough to outlast a failover (session timeout + moves); an undelivered send is info.
MESSAGE_TIMEOUT_MS = 60_000
FLUSH_TIMEOUT_S = 70.0

Headers = list[tuple[str, str | bytes | None]]
# How to decide one send: (value) -> (partition, headers, what the invocation records).
Plan = Callable[[int], tuple[int, Headers | None, dict[str, Any]]]


def client_error(op: Op, error: KafkaError) -> str:
    """``error``'s name, noting on ``op`` whether librdkafka called it fatal (or refused a
    call because a fatal error happened before)."""
    if error.fatal() or error.code() == KafkaError._FATAL:
        op.extra["fatal"] = True
    return error.name()


def exception_error(op: Op, exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError):
        return client_error(op, error)
    return repr(exc)


def partition_of(message: Message) -> int:
    partition = message.partition()
    assert partition is not None, "a record without a partition"
    return partition


def client_debug() -> dict[str, str]:
    """librdkafka debug contexts for the workloads' clients, from ``BMQ_FAULTS_CLIENT_DEBUG``
    (``eos``: each epoch bump of a producer and its cause; ``cgrp``: a consumer's group
    membership), logged to the run's stderr."""
    contexts = os.environ.get("BMQ_FAULTS_CLIENT_DEBUG")
    return {"debug": contexts} if contexts else {}


def own_ops(history: History, workload: str) -> list[Op]:
    """The operations of one workload's processes (named ``workload/...``): several
    workloads may record into one history, beside the faults'."""
    return [op for op in history.ops() if op.process.startswith(f"{workload}/")]


def fatal_errors(history: History | list[Op]) -> list[dict[str, Any]]:
    """Every operation that met an error librdkafka calls fatal."""
    return [{"process": op.process, "f": op.f, "error": op.error}
            for op in history if op.extra.get("fatal")]


class RecordingProducer:
    """An idempotent acks=all confluent-kafka producer whose sends are operations ``send``."""

    def __init__(self, bootstrap: str, history: History, process: str) -> None:
        self.history = history
        self.process = process
        self._open: dict[int, Op] = {}
        self._producer = Producer({
            "bootstrap.servers": bootstrap, "broker.address.family": "v4",
            "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": MESSAGE_TIMEOUT_MS, "retry.backoff.max.ms": 500,
            "topic.metadata.refresh.interval.ms": 2000,
            "error_cb": self._error, **client_debug()})

    def _error(self, error: KafkaError) -> None:
        if error.fatal():
            op = self.history.invoke(self.process, "error", error.str())
            self.history.fail(op, client_error(op, error))

    def send(self, topic: str, partition: int, value: int,
             headers: Headers | None, invocation: dict[str, Any]) -> None:
        op = self.history.invoke(self.process, "send", {"value": value, **invocation})
        try:
            self._producer.produce(topic, str(value).encode(), partition=partition,
                                   headers=headers, on_delivery=functools.partial(self._done, op))
        except KafkaException as exc:      # a fatal error: the producer takes nothing more
            self.history.fail(op, exception_error(op, exc))
            raise
        self._open[op.index] = op
        try:
            self._producer.poll(0)
        except SystemError as exc:
            binding_failed(self.history, self.process, exc)
            raise

    def _done(self, op: Op, error: KafkaError | None, message: Message) -> None:
        self._open.pop(op.index, None)
        if error is not None:
            self.history.info(op, client_error(op, error))
        else:
            self.history.ok(op, {**op.value, "partition": message.partition(),
                                 "offset": message.offset()})

    def close(self) -> None:
        """Wait for the last delivery reports; sends still without one are ``info``."""
        failure = retire(self._producer, FLUSH_TIMEOUT_S)
        if failure is not None:
            self.history.event(self.process, "close", repr(failure))
        for op in list(self._open.values()):
            self.history.info(op, "no delivery report before close")
        self._open.clear()


def binding_failed(history: History, process: str, exc: SystemError) -> None:
    """Record a ``client-error``: confluent-kafka's binding raises SystemError from poll() now
    and then under faults ("exception <class 'str'> is not a BaseException subclass"; cause
    not known yet). The producer is to be replaced, as after a fatal error."""
    history.event(process, "client-error", f"{exc!r}, context {exc.__context__!r}")


def retire(producer: Producer, flush_s: float) -> Exception | None:
    """Wait up to ``flush_s`` for the producer's delivery reports, drop what is still queued
    or in flight (its reports, served here, say purged) and destroy it now; the error that
    stopped the flush (a producer dead of a fatal error), if any. Left to the garbage
    collector with messages queued, a producer lives on: their delivery callbacks, held by
    librdkafka where the collector does not look, may lead back to it, and its threads go on
    reconnecting to hosts long gone (seen in CI twenty minutes after a fault run)."""
    failure: Exception | None = None
    try:
        if producer.flush(flush_s):
            producer.purge()
            producer.poll(0)
    except (KafkaException, SystemError) as exc:
        failure = exc
    producer.close()
    return failure


def consumer_places(endpoints: Endpoints, on_brokers: int, on_proxy: int) -> list[str]:
    """Where a workload's consumers connect: ``on_brokers`` of them to the brokers and
    ``on_proxy`` to the proxy, if the cluster has one."""
    proxied = [endpoints.proxy] * on_proxy if endpoints.proxy else []
    return [endpoints.bootstrap] * on_brokers + proxied


def run_all(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def produce_until(bootstrap: str, topic: str, history: History, process: str,
                  stop: threading.Event, rate: float, values: itertools.count[int],
                  plan: Plan) -> None:
    """Send unique ``values`` at about ``rate`` a second until ``stop``, each as ``plan``
    says."""
    producer = RecordingProducer(bootstrap, history, process)
    try:
        while not stop.is_set():
            value = next(values)
            partition, headers, invocation = plan(value)
            try:
                producer.send(topic, partition, value, headers, invocation)
            except BufferError:          # the queue is full while a partition moves
                time.sleep(0.1)
            except KafkaException:       # fatal (recorded): this producer is dead
                break
            except SystemError:          # recorded: its sends still open end as info
                producer.close()
                producer = RecordingProducer(bootstrap, history, process)
            stop.wait(1.0 / rate)
    finally:
        producer.close()


def spread_partitions(partitions: int, seed: int) -> Callable[[], int]:
    rng = random.Random(seed)
    return lambda: rng.randrange(partitions)


@dataclass(frozen=True)
class ReadRecord:
    partition: int
    offset: int
    value: int
    headers: dict[str, str]


def read_back(bootstrap: str, topic: str, partitions: int,
              done: Callable[[list[ReadRecord]], bool], timeout: float) -> list[ReadRecord]:
    """Every record of ``topic`` from the beginning (read_uncommitted), read until each
    partition reached the high watermark it had when the read began and ``done`` says
    enough, or ``timeout`` seconds passed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "group.id": f"read-back-{time.time_ns()}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    records: list[ReadRecord] = []
    deadline = time.monotonic() + timeout
    try:
        ends = {p: _high_watermark(consumer, TopicPartition(topic, p), deadline)
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        reached = {p: -1 for p in range(partitions)}
        while time.monotonic() < deadline:
            if all(reached[p] + 1 >= ends[p] for p in ends) and done(records):
                break
            for message in consumer.consume(1000, 0.2):
                if message.error() is not None:
                    continue
                raw, offset = message.value(), message.offset()
                assert raw is not None and offset is not None
                given = message.headers() or []
                pairs = given.items() if isinstance(given, dict) else given
                headers = {name: v.decode() if isinstance(v, bytes) else str(v)
                           for name, v in pairs}
                records.append(ReadRecord(partition_of(message), offset, int(raw), headers))
                reached[partition_of(message)] = offset
    finally:
        consumer.close()
    return records


def _high_watermark(consumer: Consumer, partition: TopicPartition, deadline: float) -> int:
    """Asked again on errors (a fresh client's metadata may not know the partition yet, a
    broker may still be moving it) until ``deadline``, each time after a metadata request
    for the topic; then fails with what the metadata said."""
    while True:
        try:
            consumer.list_topics(partition.topic, 5)
            return consumer.get_watermark_offsets(partition, 5)[1]
        except KafkaException as exc:
            if time.monotonic() > deadline:
                try:
                    found = consumer.list_topics(partition.topic, 5).topics.get(partition.topic)
                    said = repr(found and (found.error, found.partitions))
                except KafkaException as again:
                    said = repr(again)
                raise AssertionError(f"no high watermark of {partition.topic}-"
                                     f"{partition.partition}: {exc}; metadata: {said}") from exc
            time.sleep(0.5)
