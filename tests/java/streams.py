"""Kafka Streams on BMQ: running instances of bmq.clients.StreamsApp (a count and sum per word,
exactly once, with a repartition topic and a changelogged store), writing its input and
checking its output with confluent-kafka.

The input's i-th record is "w{i % WORDS} {i % 5 + 1}", so each word's count and sum are known
(``expected``). With the record cache off, the app writes "COUNT,SUM" for every record it
counts, so a word's output, read with read_committed, must be "1,…", "2,…" up to its count,
each once and in order: a record counted twice (a zombie's transaction seen) or lost shows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.groups.helpers import create_topic, unique
from tests.integration.helpers import admin, consume, topic_configs, wait_until, watermarks
from tests.java.checks import Ready, no_wait
from tests.java.conftest import BROKER_CONFIG, BROKER_ENV, JVM_OPTIONS

WORDS = 7
PARTITIONS = 3
# The input and output topics have as many partitions as the repartition topic gets, so task
# 1_P (the store's partition P) writes output partition P.
STATEFUL_TASKS = [f"1_{p}" for p in range(PARTITIONS)]
ALL_TASKS = sorted([f"0_{p}" for p in range(PARTITIONS)] + STATEFUL_TASKS)
# Streams settings of the tests' instances, for a kill to be noticed and recovered from in
# seconds: the killed member leaves the group after 6 s (the broker's least session timeout);
# its open transaction is aborted 5 s after it began (the broker looks every 0.5 s:
# STREAMS_BROKER_CONFIG). Commits every second with batches sent within 5 ms keep each
# transaction open, with records in it, for most of a second: the tests kill an instance then.
STREAMS_SETTINGS = {"consumer.session.timeout.ms": 6000, "consumer.heartbeat.interval.ms": 500,
                    "producer.transaction.timeout.ms": 5000, "producer.linger.ms": 5,
                    "commit.interval.ms": 1000,
                    # Streams deletes what it has read of a repartition topic (DeleteRecords)
                    # at most this often: every 30 s by default, longer than a test.
                    "repartition.purge.interval.ms": 1000,
                    # Streams warns at start unless this is set; it changes nothing here.
                    "processing.exception.handler.global.enabled": "true"}
STREAMS_BROKER_CONFIG = {**BROKER_CONFIG,
                         "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}
STREAMS_BROKER_ENV = {**BROKER_ENV,
                      "BMQ_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS": "500"}
# Stores in memory rather than in RocksDB: the store suppliers setting.
IN_MEMORY_STORES = {"dsl.store.suppliers.class": "org.apache.kafka.streams.state."
                                                 "BuiltInDslStoreSuppliers$InMemoryDslStoreSuppliers"}
# Internal topics (``topic.`` settings go to the changelog and the repartition topic) that the
# cleaner compacts soon: small segments, cleaned as soon as anything is dirty.
SMALL_SEGMENTS = {"topic.segment.bytes": 16384, "topic.min.cleanable.dirty.ratio": 0.01}
START_TIMEOUT_S = 60.0


def input_value(i: int) -> str:
    return f"w{i % WORDS} {i % 5 + 1}"


def expected(count: int) -> dict[str, str]:
    """Each word's "COUNT,SUM" after the first ``count`` input records."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for i in range(count):
        word, amount = input_value(i).split()
        counts[word][0] += 1
        counts[word][1] += int(amount)
    return {word: f"{n},{total}" for word, (n, total) in sorted(counts.items())}


class StreamsTopics:
    """An application id with its input and output topics."""

    def __init__(self, bootstrap: str, ready: Ready = no_wait) -> None:
        self.bootstrap = bootstrap
        self.application_id = unique("streams")
        self.input, self.output = f"{self.application_id}-in", f"{self.application_id}-out"
        for topic in (self.input, self.output):
            create_topic(bootstrap, topic, PARTITIONS)
            ready(topic)
        self.written = 0

    @property
    def repartition(self) -> str:
        return f"{self.application_id}-by-word-repartition"

    @property
    def changelog(self) -> str:
        return f"{self.application_id}-sums-changelog"

    def write(self, count: int, per_second: float | None = None) -> None:
        """The next ``count`` input records; at ``per_second`` records a second if given."""
        producer = Producer({"bootstrap.servers": self.bootstrap, "broker.address.family": "v4",
                             "enable.idempotence": True, "linger.ms": 5})
        started = time.monotonic()
        for n in range(count):
            producer.produce(self.input, key=f"r{self.written}".encode(),
                             value=input_value(self.written).encode())
            self.written += 1
            if per_second is not None:
                producer.poll(0)
                time.sleep(max(0.0, started + n / per_second - time.monotonic()))
        assert producer.flush(30) == 0

    def write_in_background(self, count: int, per_second: float) -> threading.Thread:
        writer = threading.Thread(target=self.write, args=(count, per_second), daemon=True)
        writer.start()
        return writer

    def output_records(self, isolation_level: str = "read_committed",
                       partitions: Sequence[int] = range(PARTITIONS)) -> list[tuple[str, str, int]]:
        """(word, "COUNT,SUM", partition) of every output record, each partition in order."""
        read = consume(self.bootstrap, self.output, partitions=partitions,
                       isolation_level=isolation_level)
        return [(m.key.decode(), m.value.decode(), p) for p, messages in read.items()
                for m in messages if m.key is not None and m.value is not None]

    def wait_for_output(self, timeout: float) -> list[tuple[str, str, int]]:
        """Once the committed output has a record for every input record written."""
        records: list[tuple[str, str, int]] = []

        def complete() -> bool:
            records[:] = self.output_records()
            return len(records) >= self.written
        try:
            wait_until(complete, timeout, interval=0.5,
                       message=f"{self.written} committed output records")
        except AssertionError as error:
            raise AssertionError(f"{error}: {len(records)} read") from None
        return records

    def check_output(self, records: list[tuple[str, str, int]]) -> None:
        """Each word's updates "1,…" to "COUNT,SUM", once each, in order, on one partition,
        sums rising; the last is the word's count and sum over the whole input."""
        by_word: dict[str, list[tuple[int, int]]] = defaultdict(list)
        partitions: dict[str, set[int]] = defaultdict(set)
        for word, value, partition in records:
            count, total = value.split(",")
            by_word[word].append((int(count), int(total)))
            partitions[word].add(partition)
        want = expected(self.written)
        assert sorted(by_word) == sorted(want)
        for word, updates in by_word.items():
            counts = [count for count, _ in updates]
            assert counts == list(range(1, len(counts) + 1)), (word, counts)
            sums = [total for _, total in updates]
            assert sums == sorted(set(sums)), (word, sums)
            assert f"{counts[-1]},{sums[-1]}" == want[word], word
            assert len(partitions[word]) == 1, (word, partitions[word])

    def check_internal_topics(self) -> None:
        """The topics Streams created, with as many partitions as the input: the repartition
        topic (records deleted, never by age: Streams deletes what it has read, and has) and
        the store's changelog (compacted)."""
        listed = admin(self.bootstrap).list_topics(timeout=15).topics
        internal = sorted(t for t in listed if t.startswith(f"{self.application_id}-")
                          and t not in (self.input, self.output))
        assert internal == sorted([self.repartition, self.changelog])
        assert {len(listed[topic].partitions) for topic in internal} == {PARTITIONS}
        repartition = topic_configs(self.bootstrap, self.repartition)
        assert (repartition["cleanup.policy"], repartition["retention.ms"]) == ("delete", "-1")
        assert topic_configs(self.bootstrap, self.changelog)["cleanup.policy"] == "compact"
        wait_until(lambda: all(watermarks(self.bootstrap, self.repartition, p)[0] > 0
                               for p in range(PARTITIONS)), 30, interval=0.5,
                   message=f"records of {self.repartition} deleted by Streams")

    def wait_compacted(self, timeout: float) -> None:
        """Until the cleaner has removed records from the changelog: fewer are left than
        the updates committed to it (one for each input record)."""
        def compacted() -> bool:
            read = consume(self.bootstrap, self.changelog, partitions=range(PARTITIONS),
                           isolation_level="read_committed")
            return sum(len(messages) for messages in read.values()) < self.written
        wait_until(compacted, timeout, interval=1, message=f"{self.changelog} compacted")

    def open_transaction_in(self, partitions: list[int]) -> bool:
        """Whether one of these output partitions has records of a transaction still open
        (its last stable offset is below its high watermark)."""
        for partition in partitions:
            ends = []
            for isolation_level in ("read_committed", "read_uncommitted"):
                reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "unused",
                                   "broker.address.family": "v4",
                                   "isolation.level": isolation_level})
                try:
                    ends.append(reader.get_watermark_offsets(
                        TopicPartition(self.output, partition), timeout=10, cached=False)[1])
                finally:
                    reader.close()
            if ends[0] < ends[1]:
                return True
        return False


class StreamsInstance:
    """One JVM of StreamsApp: its events (the JSON lines it prints) and its commands."""

    def __init__(self, classpath: str, bootstrap: str, topics: StreamsTopics, state_dir: Path,
                 settings: Mapping[str, object], output: Path) -> None:
        self.command = ["java", *JVM_OPTIONS, "-cp", classpath, "bmq.clients.StreamsApp",
                        bootstrap, "-", topics.application_id, topics.input, topics.output,
                        str(state_dir), *(f"{key}={value}" for key, value in settings.items())]
        # Output to files: nobody reads a pipe while waiting for something else.
        self.stdout, self.stderr = output.with_suffix(".out"), output.with_suffix(".err")
        with open(self.stdout, "wb") as out, open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=out,
                                         stderr=err, text=True)

    def events(self) -> list[dict[str, Any]]:
        lines = self.stdout.read_text(errors="replace").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def describe(self) -> str:
        return (f"exit code {self.proc.poll()}, events {self.events()}\n--- stderr ---\n"
                f"{self.stderr.read_text(errors='replace')[-6000:]}")

    def _wait(self, found: Callable[[list[dict[str, Any]]], Any], timeout: float,
              what: str) -> Any:
        result: list[Any] = []

        def check() -> bool:
            events = self.events()
            errors = [e["error"] for e in events if "error" in e]
            assert not errors and self.proc.poll() is None, f"{what}: {self.describe()}"
            result[:] = [found(events)]
            return bool(result[0])
        try:
            wait_until(check, timeout, interval=0.2, message=what)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.describe()}") from None
        return result[0]

    def wait_for_error(self, timeout: float) -> str:
        """Until a stream thread dies: its error."""
        def errors() -> list[str]:
            return [e["error"] for e in self.events() if "error" in e]
        try:
            wait_until(errors, timeout, message="a stream thread's error")
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.describe()}") from None
        return errors()[0]

    def tasks(self) -> list[str]:
        """The active tasks of the last state change, if it was to RUNNING."""
        states = [e for e in self.events() if "state" in e]
        running = states and states[-1]["state"] == "RUNNING"
        return [str(task) for task in states[-1]["tasks"]] if running else []

    def rebalances(self) -> int:
        """How many rebalances it has gone through (state changes to REBALANCING)."""
        return sum(1 for e in self.events() if e.get("state") == "REBALANCING")

    def wait_running(self, tasks: Callable[[list[str]], bool] = bool,
                     timeout: float = START_TIMEOUT_S) -> list[str]:
        """Until it is RUNNING with active tasks that ``tasks`` accepts; returns them."""
        def accepted(events: list[dict[str, Any]]) -> bool:
            states = [e for e in events if "state" in e]
            return bool(states) and states[-1]["state"] == "RUNNING" and tasks(self.tasks())
        self._wait(accepted, timeout, "RUNNING with the tasks expected")
        return self.tasks()

    def restored(self, since: int = 0) -> dict[int, int]:
        """Records restored from the changelog, by changelog partition (the last restore),
        in its events from the ``since``-th on."""
        return {e["restored"]["partition"]: e["restored"]["records"]
                for e in self.events()[since:] if "restored" in e}

    def query(self, timeout: float = 30) -> dict[str, str]:
        """The store's local contents (asked again while the store is not queryable)."""
        deadline = time.monotonic() + timeout
        while True:
            seen = len([e for e in self.events() if "query" in e or "query_error" in e])

            def new_answers(events: list[dict[str, Any]], seen: int = seen) -> list[Any]:
                return [e for e in events if "query" in e or "query_error" in e][seen:]
            self._send("query")
            answer = self._wait(new_answers, 10, "an answer to a query")[0]
            if "query" in answer:
                return dict(answer["query"])
            assert time.monotonic() < deadline, answer["query_error"]
            time.sleep(0.5)

    def close(self, timeout: float = 60) -> None:
        """A clean close: it leaves the group, its tasks move at once."""
        self._send("close")
        self.proc.wait(timeout)
        assert {"closed": True} in self.events(), self.describe()

    def kill(self) -> None:
        """kill -9 of the JVM."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def pause(self) -> None:
        """SIGSTOP: every thread stops (heartbeats too), as in a long GC pause."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def _send(self, command: str) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        stdin.write(command + "\n")
        stdin.flush()


class StreamsInstances:
    """Starts instances of one application; kills what is left at the end."""

    def __init__(self, classpath: str, workdir: Path) -> None:
        self.classpath = classpath
        self.workdir = workdir
        self.started: list[StreamsInstance] = []

    def start(self, bootstrap: str, topics: StreamsTopics,
              settings: Mapping[str, object] | None = None) -> StreamsInstance:
        """A new instance with a fresh state directory of its own."""
        name = f"streams-{len(self.started)}"
        instance = StreamsInstance(self.classpath, bootstrap, topics,
                                   self.workdir / f"{name}-state",
                                   {**STREAMS_SETTINGS, **(settings or {})},
                                   self.workdir / name)
        self.started.append(instance)
        return instance

    def cleanup(self) -> None:
        for instance in self.started:
            instance.kill()
