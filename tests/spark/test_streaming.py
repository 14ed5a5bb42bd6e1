"""`spark.readStream.format("bmq")`: Structured Streaming straight from the segments, into
Spark's Parquet file sink, with records produced by confluent-kafka to `bmq serve`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from bmq.spark.datasource import SPARK_SCHEMA_DDL
from tests.conftest import BrokerProcess, make_topic_name
from tests.spark.conftest import (
    Produced,
    create_topic,
    expected_headers,
    header_pairs,
    mixed_messages,
    produce,
)

ROOT = Path(__file__).resolve().parents[2]


def brokers_url(broker: BrokerProcess) -> str:
    """The URL the broker was given (`bmq serve --data-dir DIR`), not DIR/topics."""
    return f"file://{broker.data_dir}"


def sink_rows(spark: Any, output: Path) -> dict[tuple[int, int], Any]:
    """What the file sink committed (Spark reads it through its _spark_metadata log, so files
    of a batch that was never committed are not seen), checking that no row is there twice."""
    rows: dict[tuple[int, int], Any] = {}
    if not (output / "_spark_metadata").exists():
        return rows
    # The schema given: before its first non-empty batch the sink has no file to infer it from.
    for row in spark.read.schema(SPARK_SCHEMA_DDL).parquet(str(output)).collect():
        key = (row.partition, row.offset)
        assert key not in rows, f"duplicate row {key}"
        rows[key] = row
    return rows


def check_equal(rows: dict[tuple[int, int], Any], produced: Produced) -> None:
    """The sink holds the topic record by record: every offset once, the same fields."""
    assert sorted(rows) == sorted(produced.records)
    for key, (p_key, p_value, p_headers, p_ts) in produced.records.items():
        row = rows[key]
        assert (row.topic, row.key, row.value) == (produced.topic, p_key, p_value), key
        assert header_pairs(row.headers) == expected_headers(p_headers), key
        assert int(row.timestamp.timestamp() * 1000) == p_ts, key


def add_partitions(bootstrap: str, topic: str, count: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, count)]).values():
        future.result(15)


def run_available_now(spark: Any, output: Path, checkpoint: Path, **options: str) -> Any:
    reader = spark.readStream.format("bmq")
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (reader.load().writeStream.format("parquet").option("path", str(output))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert not query.isActive and query.exception() is None, query.exception()
    return query


def test_starting_offsets_json_and_max_offsets_per_trigger(
        spark: Any, spark_broker: BrokerProcess, tmp_path: Path) -> None:
    """startingOffsets per partition (an offset, earliest, latest), maxOffsetsPerTrigger
    respected by every micro-batch, and a restart from the checkpoint reading only what is
    new, also of the partition that started at latest and of a partition added meanwhile."""
    produced = Produced(make_topic_name("stream-opts"), 3)
    create_topic(spark_broker.bootstrap, produced.topic, 3)
    produce(spark_broker.bootstrap, produced, mixed_messages(600, 3, "a"))
    topic = produced.topic
    output, checkpoint = tmp_path / "out", tmp_path / "chk"
    options = {"storage": brokers_url(spark_broker), "subscribe": topic,
               "startingOffsets": json.dumps({topic: {"0": 150, "1": -2, "2": -1}}),
               "maxOffsetsPerTrigger": "70"}
    query = run_available_now(spark, output, checkpoint, **options)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    wanted = {k for k in produced.records if (k[0] == 0 and k[1] >= 150) or k[0] == 1}
    assert sum(sizes) == len(wanted) == 50 + 200
    assert max(sizes) <= 70 and len(sizes) >= 4, sizes
    first = dict(produced.records)
    add_partitions(spark_broker.bootstrap, topic, 4)   # read from its start at the restart
    produce(spark_broker.bootstrap, produced, mixed_messages(120, 4, "b"))
    run_available_now(spark, output, checkpoint, **options)
    wanted |= set(produced.records) - set(first)
    assert any(p == 3 for p, _o in wanted)
    rows = sink_rows(spark, output)
    check_equal(rows, Produced(topic, 4, {k: produced.records[k] for k in wanted}))


class WaveProducer:
    """Produces waves of mixed records (confluent-kafka, acks=all) until stopped, recording
    every acknowledged record in ``produced``; a wave spreads over ``produced.partitions``."""

    def __init__(self, bootstrap: str, produced: Produced, wave: int = 20) -> None:
        self.bootstrap = bootstrap
        self.produced = produced
        self.wave = wave
        self.waves = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.3):
                produce(self.bootstrap, self.produced,
                        mixed_messages(self.wave, self.produced.partitions, f"w{self.waves}"))
                self.waves += 1
        except BaseException as error:   # reported by stop()
            self.error = error

    def start(self) -> WaveProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert self.error is None, self.error


class StreamJob:
    """tests/spark/stream_job.py as its own process group: a Spark driver to kill -9."""

    def __init__(self, workdir: Path, options: dict[str, str]) -> None:
        self.output, self.checkpoint = workdir / "out", workdir / "chk"
        self.log = workdir / "job.log"
        self.options = options
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [sys.executable, "-m", "tests.spark.stream_job", str(self.output),
                str(self.checkpoint), *[f"--option={k}={v}" for k, v in self.options.items()]]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         env={**os.environ, "PYTHONPATH": str(ROOT)})

    def committed_batches(self) -> int:
        commits = self.checkpoint / "commits"
        return len([p for p in commits.iterdir() if p.name.isdigit()]) \
            if commits.exists() else 0

    def wait(self, check: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert self.proc is not None and self.proc.poll() is None, \
                f"the stream job exited:\n{self.log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, \
                f"timed out waiting for {what}:\n{self.log.read_text()[-4000:]}"
            time.sleep(0.2)

    def kill(self) -> None:
        """kill -9 of the driver: the Python process and its JVM."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


# Slow: two Spark drivers start in subprocesses (60-140 s on the loaded 2-core VM); the default
# set restarts a query from its checkpoint in-process (the first test).
@pytest.mark.slow
def test_killed_driver_restarts_from_its_checkpoint(
        spark: Any, spark_broker: BrokerProcess, tmp_path: Path) -> None:
    """A streaming query to the Parquet file sink while confluent-kafka produces; the driver is
    killed mid-stream, a partition is added while it is down, the query restarts from its
    checkpoint: the sink ends up equal to the topic, record by record (no duplicate, no gap,
    the new partition included)."""
    produced = Produced(make_topic_name("stream-kill"), 2)
    create_topic(spark_broker.bootstrap, produced.topic, 2)
    produce(spark_broker.bootstrap, produced, mixed_messages(300, 2, "first"))
    job = StreamJob(tmp_path, {"storage": brokers_url(spark_broker),
                               "subscribe": produced.topic})
    producer = WaveProducer(spark_broker.bootstrap, produced).start()
    try:
        job.start()
        job.wait(lambda: job.committed_batches() >= 2, 180, "two committed micro-batches")
        job.kill()
        add_partitions(spark_broker.bootstrap, produced.topic, 3)
        produced.partitions = 3
        job.start()
        restarted = job.committed_batches()
        job.wait(lambda: job.committed_batches() >= restarted + 1, 180,
                 "a micro-batch after the restart")
    finally:
        producer.stop()
    try:
        assert any(p == 2 for p, _o in produced.records)
        job.wait(lambda: len(sink_rows(spark, job.output)) >= len(produced.records), 120,
                 f"all {len(produced.records)} records in the sink")
    finally:
        job.kill()
    check_equal(sink_rows(spark, job.output), produced)


def test_watch_reads_new_data_as_the_broker_announces_it(
        spark: Any, spark_broker: BrokerProcess, tmp_path: Path) -> None:
    """With `watch`, an idle stream waits on the broker's partition notifications: a record
    produced long before the next 30 s trigger tick are in the sink within seconds."""
    produced = Produced(make_topic_name("stream-watch"), 2)
    create_topic(spark_broker.bootstrap, produced.topic, 2)
    commits = tmp_path / "chk" / "commits"
    query = (spark.readStream.format("bmq").option("storage", brokers_url(spark_broker))
             .option("subscribe", produced.topic).option("watch", spark_broker.bootstrap)
             .option("watchMaxWait", "30s").load()
             .writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(processingTime="30 seconds").start())
    try:
        time.sleep(5)   # the first trigger found nothing: the stream waits on the broker
        started = time.monotonic()
        produce(spark_broker.bootstrap, produced, mixed_messages(1, 2, "a"))
        while not commits.exists() or not any(p.name.isdigit() for p in commits.iterdir()):
            assert query.exception() is None, query.exception()
            assert time.monotonic() - started < 20, "new data waited for the trigger"
            time.sleep(0.1)
        waited = time.monotonic() - started
    finally:
        query.stop()
    check_equal(sink_rows(spark, tmp_path / "out"), produced)
    print(f"produce to sink commit with watch: {waited:.1f} s")
