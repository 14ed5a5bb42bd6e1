"""A streaming query from the `bmq` source into Spark's Parquet file sink, run as its own
process (a Spark driver the tests can kill -9):

    python -m tests.spark.stream_job OUTPUT CHECKPOINT --option storage=URL --option topic=T

It runs until killed; each micro-batch's end offsets go to stdout as one JSON line."""

from __future__ import annotations

import argparse
import json
import os
import sys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("output")
    parser.add_argument("checkpoint")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--trigger", default="500 milliseconds")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from bmq.spark import BMQDataSource

    spark = (SparkSession.builder.master("local[2]").appName("bmq-stream-job")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", "1g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(BMQDataSource)
    reader = spark.readStream.format("bmq")
    for option in args.option:
        name, value = option.split("=", 1)
        reader = reader.option(name, value)
    query = (reader.load().writeStream.format("parquet")
             .option("path", args.output).option("checkpointLocation", args.checkpoint)
             .trigger(processingTime=args.trigger).start())
    seen = -1
    while query.isActive:
        progress = query.lastProgress
        if progress and progress["batchId"] != seen:
            seen = progress["batchId"]
            print(json.dumps({"batch": seen, "rows": progress["numInputRows"],
                              "end": progress["sources"][0]["endOffset"]}), flush=True)
        query.awaitTermination(0.2)
    query.awaitTermination()


if __name__ == "__main__":
    main()
