"""Spark integration goals: Parquet conversion MB/s, and data source vs Kafka client reads.

    .venv/bin/python bench/spark_bench.py [--mb 300] [--message-size 512] [--partitions 4]
        [--compression none] [--master local[2]] [--data-dir DIR] [--json OUT]

1. Starts `bmq serve` (data in --data-dir, or a temporary directory) and produces --mb MB of
   random (incompressible) message values with confluent-kafka (acks=all, idempotence off; keys
   repeat every 10000 messages, every tenth message has a header), unless the topic already
   holds data (rerun with the same --data-dir to skip producing).
2. Converts the topic to Parquet with the Parquet export job (bmq.spark.parquet_export.run) on a
   SparkSession with --master; MB/s = segment bytes converted / job wall time (the Spark
   session is already up: its start is not counted).
3. Reads the topic through the data source into Spark, and two Kafka-client ways
   (--kafka-routes): `driver`, one confluent-kafka consumer in the driver reads every partition
   from the start to the high watermark into columns, builds an Arrow table,
   `spark.createDataFrame(table)`; `executors`, one Spark task per topic partition consumes it
   with its own consumer into Arrow batches (`mapInArrow`), the way Spark's own Kafka source
   works (that source needs the spark-sql-kafka jar, which pyspark does not ship and this
   environment cannot fetch). Each route is timed end to
   end with two queries: `noop` writes every column of every row nowhere (all materialised as
   Spark rows); `agg` counts rows and sums value bytes per partition (a typical scan). Runs are
   interleaved (data source, then each Kafka route, --repeat rounds after --warmup untimed
   ones) so that the routes share the load of a busy machine; the best of each and the ratio
   of every round are reported.
4. Reads it as a stream (`spark.readStream.format("bmq")`, Trigger.AvailableNow into noop),
   and measures produce-to-sink-commit latency of a 1 s trigger (bench/spark_stream.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "spark-bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(data_dir: Path, segment_bytes: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    env = dict(os.environ, BMQ_LOG_SEGMENT_BYTES=str(segment_bytes))
    log = open(data_dir.parent / "broker.log", "ab")  # noqa: SIM115 - lives with the process
    proc = subprocess.Popen([sys.executable, "-m", "bmq", "serve", "--data-dir", str(data_dir),
                             "--listen", bootstrap], stdout=log, stderr=log, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, bootstrap
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("bmq serve did not start")


def produce(bootstrap: str, args: argparse.Namespace) -> tuple[int, float]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, args.partitions, 1)]).values():
        fut.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 10,
                         "batch.size": 1_000_000, "compression.type": args.compression,
                         "queue.buffering.max.kbytes": 1 << 20,
                         "queue.buffering.max.messages": 1_000_000})
    count = int(args.mb * 1e6 / args.message_size)
    started = time.monotonic()
    for i in range(count):
        value = os.urandom(args.message_size)   # incompressible, as in bench/
        while True:
            try:
                producer.produce(TOPIC, key=str(i % 10_000).encode(), value=value,
                                 partition=i % args.partitions,
                                 headers=[("seq", str(i).encode())] if i % 10 == 0 else None)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)
    return count, time.monotonic() - started


def _proc_cpu(pid: int) -> tuple[float, int]:
    """(utime+stime in seconds, parent pid) of a process: its own CPU, not its children's."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), int(fields[1])


def _descendants_cpu(root_pids: list[int]) -> dict[int, float]:
    """Own CPU seconds of these processes and of all their live descendants."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                cpu[int(entry)], parents[int(entry)] = _proc_cpu(int(entry))
    found: dict[int, float] = {}
    for pid in cpu:
        p = pid
        while p > 1:
            if p in root_pids:
                found[pid] = cpu[pid]
                break
            p = parents.get(p, 0)
    return found


class Meter:
    """Wall time and CPU seconds of the driver, the Spark JVM and its workers, and the
    broker (which serves the Kafka client route's fetches).

    A thread samples every process of the tree every 50 ms and keeps the last figure of each,
    so a Python worker that exits during the measure still counts (its parent may not reap
    it, so the parent's children-CPU fields would miss it)."""

    def __init__(self, spark: Any, broker_pid: int) -> None:
        proc = getattr(spark.sparkContext._gateway, "proc", None)
        self.roots = [os.getpid(), broker_pid] + ([proc.pid] if proc is not None else [])
        self._seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self._seen.update(_descendants_cpu(self.roots))

    def __enter__(self) -> Meter:
        self.wall = time.monotonic()
        self._start = _descendants_cpu(self.roots)
        self._seen = dict(self._start)
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.monotonic() - self.wall
        self._stop.set()
        self._sampler.join()
        self._seen.update(_descendants_cpu(self.roots))
        self.cpu = sum(cpu - self._start.get(pid, 0.0) for pid, cpu in self._seen.items())


def session(master: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from bmq.spark import BMQDataSource

    spark = (SparkSession.builder.master(master).appName("bmq-spark-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "4g")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(BMQDataSource)
    return spark


def consume_df(df: Any, query: str) -> int | None:
    """``noop``: write every row of every column nowhere (all materialised in the JVM);
    ``agg``: a typical scan query (count, bytes of values, max offset per partition), which
    returns the number of rows (the benchmark checks every route read them all)."""
    if query == "noop":
        df.write.format("noop").mode("overwrite").save()
        return None
    from pyspark.sql import functions as F

    rows = df.groupBy("partition").agg(F.count("*").alias("n"), F.sum(F.length("value")),
                                       F.max("offset")).collect()
    return sum(r["n"] for r in rows)


def read_datasource(spark: Any, storage: str, query: str = "noop") -> int | None:
    df = spark.read.format("bmq").option("storage", storage).option("topic", TOPIC).load()
    return consume_df(df, query)


def partition_ends(storage: str) -> dict[int, int]:
    """Each partition's high watermark (what a consumer would get from the watermarks)."""
    from bmq.storage import open_storage
    from bmq.storage.log.durable import list_partitions, open_durable

    store = open_storage(storage)
    return {p: open_durable(store, TOPIC, p).high_watermark for p in list_partitions(store, TOPIC)}


def consume_batches(bootstrap: str, ends: dict[int, int],
                    rows_per_batch: int | None = None) -> Iterator[Any]:
    """The Kafka-client reader a data engineer would write: one confluent-kafka consumer reads
    the partitions of ``ends`` from offset 0 to their end, column lists -> Arrow record batches
    (the data source's schema, null headers where a record has none as in Spark's Kafka
    source), every ``rows_per_batch`` rows or once at the end."""
    import pyarrow as pa
    from confluent_kafka import Consumer, TopicPartition

    from bmq.spark.decode import ARROW_SCHEMA

    def to_batch(cols: dict[str, list[Any]]) -> Any:
        return pa.RecordBatch.from_arrays([
            pa.array(cols["key"], pa.binary()),
            pa.array(cols["value"], pa.binary()),
            pa.array(cols["topic"], pa.string()),
            pa.array(cols["partition"], pa.int32()),
            pa.array(cols["offset"], pa.int64()),
            pa.array(cols["timestamp"], pa.timestamp("ms", tz="UTC")).cast(
                ARROW_SCHEMA.field("timestamp").type),
            pa.array(cols["timestampType"], pa.int32()),
            pa.array(cols["headers"], ARROW_SCHEMA.field("headers").type),
        ], schema=ARROW_SCHEMA)

    def new_cols() -> tuple[dict[str, list[Any]], tuple[Any, ...]]:
        cols: dict[str, list[Any]] = {name: [] for name in ARROW_SCHEMA.names}
        return cols, tuple(cols[name].append for name in ARROW_SCHEMA.names)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-bench",
                         "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
                         "max.partition.fetch.bytes": 8 << 20})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in ends])
    remaining = {p for p, e in ends.items() if e > 0}
    # consume(n) waits for n messages or its timeout: never ask for more than are left, or
    # the last call would sit out the timeout.
    left = sum(ends.values())
    cols, (key, value, topic, partition, offset, timestamp, timestamp_type,
           headers_col) = new_cols()   # bound appends: the per-message loop is the hot path
    try:
        while remaining:
            for m in consumer.consume(min(10_000, left), 1.0):
                if m.error():
                    continue
                p = m.partition()
                if p not in remaining:
                    continue
                left -= 1
                ts_type, ts = m.timestamp()
                key(m.key())
                value(m.value())
                topic(m.topic())
                partition(p)
                offset(m.offset())
                timestamp(ts)
                timestamp_type(0 if ts_type == 1 else 1)   # confluent-kafka: 1 create, 2 append
                headers = m.headers()
                headers_col(headers and [{"key": k, "value": v} for k, v in headers])
                if m.offset() + 1 >= ends[p]:
                    remaining.discard(p)
            if rows_per_batch and len(cols["offset"]) >= rows_per_batch:
                yield to_batch(cols)
                cols, (key, value, topic, partition, offset, timestamp, timestamp_type,
                       headers_col) = new_cols()
    finally:
        consumer.close()
    if cols["offset"]:
        yield to_batch(cols)


def read_kafka_client(spark: Any, bootstrap: str, storage: str,
                      query: str = "noop") -> int | None:
    """The ``driver`` route: one consumer in the driver, Arrow table, createDataFrame."""
    import pyarrow as pa

    ends = partition_ends(storage)
    table = pa.Table.from_batches(list(consume_batches(bootstrap, ends)))
    return consume_df(spark.createDataFrame(table), query)


def read_kafka_executors(spark: Any, bootstrap: str, storage: str,
                         query: str = "noop") -> int | None:
    """The ``executors`` route: one Spark task per topic partition runs its own consumer
    (``mapInArrow``), as Spark's own Kafka source does; nothing passes through the driver."""
    from bmq.spark.datasource import SPARK_SCHEMA_DDL

    ends = partition_ends(storage)
    parts = sorted(ends)

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for i in batch.column("id").to_pylist():
                yield from consume_batches(bootstrap, {parts[i]: ends[parts[i]]}, 50_000)

    df = spark.range(0, len(parts), 1, len(parts)).mapInArrow(task, SPARK_SCHEMA_DDL)
    return consume_df(df, query)


KAFKA_ROUTES = {"driver": read_kafka_client, "executors": read_kafka_executors}


def run_streaming(spark: Any, storage: str, work: Path, args: argparse.Namespace,
                  results: dict[str, Any]) -> None:
    """The streaming source over the same topic (AvailableNow into noop), against the batch
    source's noop read when it was timed."""
    from bench.spark_stream import stream_throughput

    for _ in range(args.warmup):
        stream_throughput(spark, storage, TOPIC, work)
    walls = [stream_throughput(spark, storage, TOPIC, work) for _ in range(args.repeat)]
    seg_bytes = results["segment_bytes"]
    results["stream_noop"] = {"seconds": round(min(walls), 3),
                              "mb_per_s": round(seg_bytes / 1e6 / min(walls), 1),
                              "all_seconds": [round(w, 2) for w in walls]}
    batch = results.get("datasource_noop")
    versus = f" (batch source: {batch['mb_per_s']} MB/s)" if batch else ""
    print(f"[stream] AvailableNow into noop: best {min(walls):.2f}s = "
          f"{results['stream_noop']['mb_per_s']} MB/s{versus}; all runs "
          f"{', '.join(f'{w:.2f}' for w in walls)} s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=300.0, help="MB of values to produce")
    parser.add_argument("--message-size", type=int, default=512)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--compression", default="none")
    parser.add_argument("--segment-mb", type=int, default=64)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--data-dir", default=None, help="keep/reuse the broker data here")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed runs of each read route and query first (the JVM's JIT "
                             "and Spark's Python workers warm up over the first queries)")
    parser.add_argument("--skip", default="",
                        help="comma list of: compact,read,kafka,stream,latency")
    parser.add_argument("--latency-seconds", type=float, default=20.0,
                        help="how long to produce during the streaming latency run")
    parser.add_argument("--latency-rate", type=float, default=200.0,
                        help="messages per second produced during the latency run")
    parser.add_argument("--kafka-routes", default="driver,executors",
                        help="Kafka client routes to time: driver (one consumer in the driver, "
                             "createDataFrame), executors (a consumer per partition in Spark "
                             "tasks)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    skip = set(filter(None, args.skip.split(",")))

    work = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="bmq-sb-"))
    work.mkdir(parents=True, exist_ok=True)
    data_dir = work / "data"
    storage = f"file://{data_dir}/topics"
    proc, bootstrap = start_broker(data_dir, args.segment_mb << 20)
    results: dict[str, Any] = {"args": vars(args), "cpus": os.cpu_count(),
                               "load_before": os.getloadavg()}
    try:
        if not (data_dir / "topics" / TOPIC).exists():
            count, secs = produce(bootstrap, args)
            results["produced"] = {"messages": count, "seconds": round(secs, 2)}
            print(f"produced {count} messages in {secs:.1f}s", flush=True)
        from bench.spark_stream import stream_latency
        from bmq.spark.parquet_export import JobConfig, run
        from bmq.storage import open_storage
        from bmq.storage.log.durable import list_partitions, open_durable

        store = open_storage(storage)
        views = [open_durable(store, TOPIC, p) for p in list_partitions(store, TOPIC)]
        seg_bytes = sum(v.size_bytes for v in views)
        results["segment_bytes"] = seg_bytes
        results["records"] = sum(v.high_watermark - v.log_start_offset for v in views)
        print(f"topic: {results['records']} records, {seg_bytes / 1e6:.1f} MB of segments in "
              f"{sum(len(v.segments) for v in views)} segment files", flush=True)
        spark = session(args.master)

        if "compact" not in skip:
            best = None
            for _ in range(args.repeat):
                out = work / "parquet"
                shutil.rmtree(out, ignore_errors=True)
                with Meter(spark, proc.pid) as meter:
                    summary = run(spark, JobConfig(storage=storage, topics=[TOPIC],
                                                   output=str(out)))
                summary["cpu_seconds"] = round(meter.cpu, 2)
                summary["mb_per_cpu_s"] = round(seg_bytes / 1e6 / meter.cpu, 1)
                if best is None or summary["seconds"] < best["seconds"]:
                    best = summary
            assert best is not None
            parquet_bytes = sum(f.stat().st_size for f in (work / "parquet").rglob("*.parquet"))
            results["compact"] = dict(best, parquet_bytes=parquet_bytes)
            print(f"parquet conversion: {best['segment_bytes'] / 1e6:.1f} MB in "
                  f"{best['seconds']:.2f}s = {best['mb_per_s']:.1f} MB/s "
                  f"({best['cpu_seconds']} CPU s)", flush=True)

        routes: dict[str, Any] = {}
        if "read" not in skip:
            routes["datasource"] = lambda q: read_datasource(spark, storage, q)
        if "kafka" not in skip:
            for name in filter(None, args.kafka_routes.split(",")):
                routes[f"kafka_{name}"] = (
                    lambda q, fn=KAFKA_ROUTES[name]: fn(spark, bootstrap, storage, q))
        for query in ("noop", "agg"):
            for _ in range(args.warmup):
                for read in routes.values():
                    read(query)
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in routes}
            for _ in range(args.repeat):
                # Interleaved, so that every route sees about the same load in each round.
                for name, read in routes.items():
                    with Meter(spark, proc.pid) as meter:
                        rows = read(query)
                    runs[name].append((meter.wall, meter.cpu))
                    if rows is not None and rows != results["records"]:
                        raise AssertionError(f"{name} read {rows} of {results['records']} rows")
            for name, timed in runs.items():
                wall, cpu = min(timed)
                results[f"{name}_{query}"] = {
                    "seconds": round(wall, 3), "cpu_seconds": round(cpu, 2),
                    "mb_per_s": round(seg_bytes / 1e6 / wall, 1),
                    "all_seconds": [round(w, 2) for w, _ in timed]}
                print(f"[{query}] {name}: best {wall:.2f}s ({cpu:.1f} CPU s); all runs "
                      f"{', '.join(f'{w:.2f}' for w, _ in timed)} s", flush=True)
            ds = runs.get("datasource")
            for name in (n for n in runs if n.startswith("kafka_") and ds):
                assert ds is not None
                best = min(runs[name])[0] / min(ds)[0]
                cpu_ratio = min(c for _, c in runs[name]) / min(c for _, c in ds)
                rounds = sorted(k[0] / d[0] for k, d in zip(runs[name], ds, strict=True))
                results[f"speedup_{name}_{query}"] = {
                    "best": round(best, 2), "cpu": round(cpu_ratio, 2),
                    "per_round": [round(r, 2) for r in rounds]}
                print(f"[{query}] data source vs {name}: {best:.1f}x (best of each), "
                      f"{rounds[0]:.1f}-{rounds[-1]:.1f}x per round, CPU seconds "
                      f"{cpu_ratio:.1f}x", flush=True)
        if "stream" not in skip:
            run_streaming(spark, storage, work, args, results)
        if "latency" not in skip:
            # Listing storage at every trigger, then waiting on the broker's notifications.
            for name, options in (("stream_latency", {}),
                                  ("stream_latency_watch", {"watch": bootstrap})):
                latency = stream_latency(spark, bootstrap, f"file://{data_dir}", work,
                                         args.latency_seconds, args.latency_rate,
                                         args.partitions, **options)
                results[name] = latency
                print(f"[stream] produce-to-sink-commit latency, 1 s trigger"
                      f"{', watch' if options else ''}, {latency['records']} records at "
                      f"{args.latency_rate:.0f}/s: p50 {latency['p50_s']:.2f}s, p99 "
                      f"{latency['p99_s']:.2f}s, max {latency['max_s']:.2f}s", flush=True)
        spark.stop()
    finally:
        proc.terminate()
        proc.wait(60)
        if not args.data_dir:
            shutil.rmtree(work, ignore_errors=True)
    results["load_after"] = os.getloadavg()
    text = json.dumps(results, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
