"""Convert BMQ topics to Parquet, incrementally and crash-safely (see docs/spark.md).

    python spark_jobs/export_to_parquet.py --storage DATA_DIR --topic orders \\
        --output /lake/orders [--compact-keys] [--master local[2]] [--stream]
    spark-submit spark_jobs/export_to_parquet.py --storage ... --topic ... --output ...

Output: Parquet under OUTPUT/topic=T/partition=P/date=YYYY-MM-DD/ and a manifest of the
converted offset ranges (OUTPUT/_bmq_manifest.json). A rerun converts only what is new; a run
killed at any point and rerun leaves no duplicates and no gaps. With --compact-keys each
partition's output is a snapshot holding the latest record per key (a null value deletes the
key). With --stream it keeps converting new data, round after round, until SIGTERM. Progress
goes to stderr; the summary is printed as JSON on stdout at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage", required=True,
                        help="the storage URL the brokers were given: `bmq serve --data-dir "
                             "DIR`'s DIR (a path or file:///DIR), a cluster's --storage URL "
                             "(s3://..., hdfs://..., file:///...), or its topics directory")
    parser.add_argument("--topic", required=True, action="append",
                        help="topic to convert (repeat, or separate with commas)")
    parser.add_argument("--output", required=True, help="output root (path or fsspec URL)")
    parser.add_argument("--compact-keys", action="store_true",
                        help="keep only the latest record per key (null value = delete)")
    parser.add_argument("--partitions", default=None, help="only these partitions, e.g. 0,2,5")
    parser.add_argument("--max-unit-mb", type=float, default=128.0,
                        help="segment data per task and per output file (MB) [128]")
    parser.add_argument("--compression", default="snappy",
                        help="Parquet codec: snappy, zstd, gzip, lz4, none [snappy]")
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="filesystem setting for the storage URL (e.g. host=namenode)")
    parser.add_argument("--master", default=None,
                        help="Spark master when not run by spark-submit [local[*]]")
    parser.add_argument("--summary-json", default=None, help="also write the summary here")
    parser.add_argument("--no-verify-crc", action="store_true",
                        help="skip the CRC-32C check of each batch")
    parser.add_argument("--isolation-level", choices=("read_committed", "read_uncommitted"),
                        default="read_committed",
                        help="read_committed (default): only committed transactions, up to the "
                             "last stable offset; read_uncommitted: everything durable")
    parser.add_argument("--stream", action="store_true",
                        help="keep converting new data until SIGTERM or Ctrl-C (each round "
                             "is a rerun: as crash-safe as rerunning the job)")
    parser.add_argument("--stream-interval", type=float, default=5.0, metavar="SECONDS",
                        help="with --stream: pause between rounds [5]")
    parser.add_argument("--pause-after-commit", type=float, default=0.0,
                        help=argparse.SUPPRESS)   # tests: a window to kill the job in
    return parser.parse_args(argv)


def session(master: str | None) -> Any:
    # Workers must run an interpreter that has bmq installed: by default this one.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("bmq-export-to-parquet")
    if master or not SparkConf().contains("spark.master"):
        builder = builder.master(master or "local[*]")
    return builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bmq.startup import MissingPackageError
    try:
        from bmq.spark.parquet_export import JobConfig, run, run_stream
    except MissingPackageError as error:   # the install hint in one line, not a traceback
        print(f"export_to_parquet: error: {error}", file=sys.stderr, flush=True)
        return int(error.exit_code)

    topics = [t.strip() for arg in args.topic for t in arg.split(",") if t.strip()]
    partitions = None
    if args.partitions:
        partitions = sorted({int(p) for p in args.partitions.split(",") if p.strip()})
    options = dict(opt.split("=", 1) for opt in args.storage_option)
    cfg = JobConfig(storage=args.storage, topics=topics, output=args.output,
                    compact_keys=args.compact_keys, partitions=partitions,
                    max_unit_bytes=max(1, int(args.max_unit_mb * 1e6)),
                    compression=args.compression, storage_options=options,
                    verify_crc=not args.no_verify_crc,
                    pause_after_commit=args.pause_after_commit,
                    read_committed=args.isolation_level == "read_committed")
    spark = session(args.master)
    spark.sparkContext.setLogLevel("WARN")
    try:
        if args.stream:
            stop = threading.Event()
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda _signum, _frame: stop.set())
            summary = run_stream(spark, cfg, stop, args.stream_interval)
        else:
            summary = run(spark, cfg)
    except ValueError as error:   # a wrong URL, topic or partition: say so in one line
        print(f"export_to_parquet: error: {error}", file=sys.stderr, flush=True)
        return 2
    finally:
        spark.stop()
    text = json.dumps(summary)
    print(text, flush=True)
    if args.summary_json:
        with open(args.summary_json, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
