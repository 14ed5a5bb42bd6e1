"""Steady acks=all producers of other clients for ``bench.failover --client``.

Each records what ``tests.cluster.workload.SteadyProducer`` (confluent-kafka) records: the
value of every message is ``<partition>:<sequence>``, ``acked[partition][seq]`` the offset it
was acknowledged at, ``ack_times[partition]`` when each acknowledgement reached the
application, ``failed`` the errors of failed deliveries. So the bench measures every client the
same way and ``tests.cluster.workload.verify`` reads any of them back.

The producers keep their client's defaults but for acks=all and idempotence (kafka-python
3.x has both by default; aiokafka asks for them), as the confluent-kafka one does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import threading
import time
from collections import defaultdict
from typing import Any, Protocol

CLIENTS = ("confluent", "kafka-python", "aiokafka")
# librdkafka's defaults for what the test workload shortens (tests/cluster/workload.py).
LIBRDKAFKA_DEFAULTS = {"retry.backoff.ms": 100, "retry.backoff.max.ms": 1000,
                       "reconnect.backoff.max.ms": 10000,
                       "topic.metadata.refresh.interval.ms": 300000}


class Producer(Protocol):
    topic: str
    partitions: int
    acked: dict[int, dict[int, int | None]]
    ack_times: dict[int, list[float]]
    failed: list[str]

    def start(self) -> Producer: ...
    def stop(self, flush_timeout: float = 120.0) -> None: ...
    def max_gap(self, partition: int, after: float = 0.0) -> float: ...


class _Steady:
    """What the producers share: the records of acknowledgements and a paced send loop."""

    def __init__(self, topic: str, partitions: int, rate: float) -> None:
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.acked: dict[int, dict[int, int | None]] = defaultdict(dict)
        self.ack_times: dict[int, list[float]] = defaultdict(list)
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def _acked(self, partition: int, seq: int, offset: int) -> None:
        with self._lock:
            self.acked[partition][seq] = offset
            self.ack_times[partition].append(time.monotonic())

    def _failed(self, error: object) -> None:
        with self._lock:
            self.failed.append(repr(error))

    def _schedule(self) -> Any:
        """(partition, seq, seconds to sleep before the next) for ever, at ``rate``."""
        period = 1.0 / self.rate
        next_at = time.monotonic()
        for seq in itertools.count():
            next_at += period
            yield seq % self.partitions, seq, next_at - time.monotonic()

    def max_gap(self, partition: int, after: float = 0.0) -> float:
        times = [t for t in self.ack_times[partition] if t >= after]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


class KafkaPythonProducer(_Steady):
    """kafka-python's KafkaProducer, its defaults (acks=all, idempotent in 3.x)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 500.0,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(topic, partitions, rate)
        from kafka import KafkaProducer

        self.producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all",
                                      enable_idempotence=True, **(extra or {}))
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        for partition, seq, delay in self._schedule():
            if self._stop.is_set():
                return
            future = self.producer.send(self.topic, value=f"{partition}:{seq}".encode(),
                                        partition=partition)
            future.add_callback(lambda md, p=partition, s=seq: self._acked(p, s, md.offset))
            future.add_errback(self._failed)
            self.sent = seq + 1
            if delay > 0:
                time.sleep(delay)

    def start(self) -> KafkaPythonProducer:
        self._thread.start()
        return self

    def stop(self, flush_timeout: float = 120.0) -> None:
        self._stop.set()
        self._thread.join()
        self.producer.flush(flush_timeout)
        self.producer.close(10)


class AiokafkaProducer(_Steady):
    """aiokafka's AIOKafkaProducer on its own event loop thread, acks=all and idempotent."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 500.0,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(topic, partitions, rate)
        self.bootstrap = bootstrap
        self.extra = extra or {}
        self.loop = asyncio.new_event_loop()
        self._pending: set[asyncio.Future[Any]] = set()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._task: concurrent.futures.Future[None] | None = None

    async def _open(self) -> Any:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all",
                                    enable_idempotence=True, **self.extra)
        await producer.start()
        return producer

    def _done(self, future: asyncio.Future[Any], partition: int, seq: int) -> None:
        self._pending.discard(future)
        error = future.exception()
        if error is not None:
            self._failed(error)
        else:
            self._acked(partition, seq, future.result().offset)

    async def _run(self) -> None:
        for partition, seq, delay in self._schedule():
            if self._stop.is_set():
                return
            future = await self.producer.send(self.topic, value=f"{partition}:{seq}".encode(),
                                              partition=partition)
            self._pending.add(future)
            self.sent = seq + 1
            future.add_done_callback(lambda f, p=partition, s=seq: self._done(f, p, s))
            await asyncio.sleep(max(0.0, delay))

    def start(self) -> AiokafkaProducer:
        self._thread.start()
        self.producer = asyncio.run_coroutine_threadsafe(self._open(), self.loop).result(60)
        self._task = asyncio.run_coroutine_threadsafe(self._run(), self.loop)
        return self

    def stop(self, flush_timeout: float = 120.0) -> None:
        self._stop.set()
        assert self._task is not None
        self._task.result(flush_timeout)

        async def close() -> None:
            await asyncio.wait_for(self.producer.flush(), flush_timeout)
            await self.producer.stop()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(flush_timeout + 10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


def make_producer(client: str, bootstrap: str, topic: str, partitions: int, rate: float,
                  metadata_refresh_ms: int | None) -> tuple[Producer, str]:
    """The client's steady producer and a description of its metadata refresh setting."""
    if client == "confluent":
        from tests.cluster.workload import SteadyProducer

        extra: dict[str, Any] = dict(LIBRDKAFKA_DEFAULTS)
        if metadata_refresh_ms is not None:     # with the test workload's short back-offs
            extra = {"topic.metadata.refresh.interval.ms": metadata_refresh_ms}
        refresh = extra["topic.metadata.refresh.interval.ms"]
        return (SteadyProducer(bootstrap, topic, partitions, rate=rate, extra=extra),
                f"topic.metadata.refresh.interval.ms {refresh}")
    extra = {} if metadata_refresh_ms is None else {"metadata_max_age_ms": metadata_refresh_ms}
    refresh = f"metadata_max_age_ms {metadata_refresh_ms or 'default (300000)'}"
    if client == "kafka-python":
        return KafkaPythonProducer(bootstrap, topic, partitions, rate, extra), refresh
    if client == "aiokafka":
        return AiokafkaProducer(bootstrap, topic, partitions, rate, extra), refresh
    raise ValueError(f"unknown client {client!r}; one of {', '.join(CLIENTS)}")
