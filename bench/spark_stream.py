"""The streaming source's figures for bench/spark_bench.py.

* **Throughput**: the benchmark's topic read by ``spark.readStream.format("bmq")`` from the
  earliest offset with ``Trigger.AvailableNow`` into the ``noop`` sink (every row materialised,
  as the batch ``noop`` query), MB of segments / wall seconds from ``start()`` to the query's
  end, a fresh checkpoint each run; compared with the batch source's ``noop`` read.
* **Latency**: a query with a 1 s processing-time trigger into Spark's Parquet file sink while
  confluent-kafka produces at a steady rate; each record's latency is the time from its
  ``produce()`` call to the sink's commit of the micro-batch holding it (the mtime of the
  sink's ``_spark_metadata/<batch>`` file; the batch's end offsets are in the checkpoint's
  ``offsets/<batch>``).
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from bench.stats import percentile

LATENCY_TOPIC = "spark-bench-latency"


def stream_throughput(spark: Any, storage: str, topic: str, work: Path,
                      **options: str) -> float:
    """Wall seconds of one AvailableNow read of the whole topic into the noop sink."""
    checkpoint = work / "stream-chk"
    shutil.rmtree(checkpoint, ignore_errors=True)
    reader = (spark.readStream.format("bmq").option("storage", storage)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for name, value in options.items():
        reader = reader.option(name, value)
    started = time.monotonic()
    query = (reader.load().writeStream.format("noop")
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    wall = time.monotonic() - started
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return wall


def _batch_ends(checkpoint: Path) -> dict[int, dict[int, int]]:
    """batch id -> {partition: end offset} from the checkpoint's offsets log."""
    ends = {}
    for path in (checkpoint / "offsets").iterdir():
        if path.name.isdigit():
            lines = path.read_text().splitlines()
            offsets = json.loads(lines[2])
            ends[int(path.name)] = {int(p): o for parts in offsets.values()
                                    for p, o in parts.items()}
    return ends


def stream_latency(spark: Any, bootstrap: str, storage: str, work: Path, seconds: float,
                   rate: float, partitions: int, **options: str) -> dict[str, Any]:
    """Produce-to-sink-commit latency with a 1 s trigger (see the module notes)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(LATENCY_TOPIC, partitions, 1)]).values():
        try:
            fut.result(30)
        except Exception as error:   # rerun on the same --data-dir: the topic is there
            if "TOPIC_ALREADY_EXISTS" not in str(error):
                raise
    output, checkpoint = work / "latency-out", work / "latency-chk"
    for path in (output, checkpoint):
        shutil.rmtree(path, ignore_errors=True)
    reader = (spark.readStream.format("bmq").option("storage", storage)
              .option("subscribe", LATENCY_TOPIC).option("startingOffsets", "latest"))
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (reader.load().writeStream.format("parquet").option("path", str(output))
             .option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="1 second").start())
    while not (checkpoint / "commits").exists() or not any(
            p.name.isdigit() for p in (checkpoint / "commits").iterdir()):
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        time.sleep(0.2)   # the first (empty) batch: the query has its starting offsets
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    sent: dict[tuple[int, int], float] = {}

    def delivered(at: float) -> Any:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                sent[(msg.partition(), msg.offset())] = at
        return on_delivery

    period = 1.0 / rate
    next_at = start = time.time()
    count = 0
    while time.time() - start < seconds:
        now = time.time()
        producer.produce(LATENCY_TOPIC, value=b"x" * 100, partition=count % partitions,
                         on_delivery=delivered(now))
        producer.poll(0)
        count += 1
        next_at += period
        time.sleep(max(0.0, next_at - time.time()))
    producer.flush(30)
    deadline = time.monotonic() + 60
    while True:   # until a committed batch covers every acknowledged record
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        ends = _batch_ends(checkpoint)
        committed = {int(p.name) for p in (output / "_spark_metadata").iterdir()
                     if p.name.isdigit()} if (output / "_spark_metadata").exists() else set()
        covered = [ends[b] for b in committed if b in ends]
        if all(any(e.get(p, 0) > o for e in covered) for p, o in sent) or \
                time.monotonic() > deadline:
            break
        time.sleep(0.5)
    query.stop()
    commit_time = {b: (output / "_spark_metadata" / str(b)).stat().st_mtime for b in committed}
    order = sorted(b for b in committed if b in ends)
    latencies = []
    for (partition, offset), at in sent.items():
        batch = next((b for b in order if ends[b].get(partition, 0) > offset), None)
        if batch is None:
            raise AssertionError(f"record {partition}:{offset} never reached the sink")
        latencies.append(commit_time[batch] - at)
    return {"records": len(latencies), "rate": rate, "seconds": seconds,
            "p50_s": round(statistics.median(latencies), 3),
            "p99_s": round(percentile(sorted(latencies), 99), 3),
            "max_s": round(max(latencies), 3), "batches": len(order)}
