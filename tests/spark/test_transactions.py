"""The Spark source and the Parquet job over transactional data written by a real
confluent-kafka transactional producer: by default (read_committed) committed records only, up
to the last stable offset, never an aborted record or a control batch; read_uncommitted reads
everything durable. The aborted transactions come from the partition's published producer state
and recovery's scan past it, never from a scan of the whole log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bmq.spark.parquet_export import JobConfig
from tests.conftest import BrokerProcess, make_topic_name
from tests.spark.conftest import create_topic, storage_url
from tests.spark.test_datasource import load
from tests.spark.test_parquet_export import output_rows, run_job
from tests.transactions.helpers import txn_producer

PARTITIONS = 2


def _write(bootstrap: str, topic: str) -> Any:
    """Committed a-*, aborted b-*, committed c-*, and d-* left in an open transaction."""
    producer = txn_producer(bootstrap, "spark-" + topic)
    producer.init_transactions(60)
    for tag, end in (("a", "commit"), ("b", "abort"), ("c", "commit"), ("d", "open")):
        producer.begin_transaction()
        for i in range(20):
            producer.produce(topic, f"{tag}-{i}".encode(), partition=i % PARTITIONS)
        producer.flush(30)
        if end == "commit":
            producer.commit_transaction(30)
        elif end == "abort":
            producer.abort_transaction(30)
    return producer     # kept alive: its transaction stays open


def test_read_committed_by_default_and_read_uncommitted_on_request(
        spark: Any, spark_broker: BrokerProcess, tmp_path: Path) -> None:
    topic = make_topic_name("spark-txn")
    create_topic(spark_broker.bootstrap, topic, PARTITIONS)
    producer = _write(spark_broker.bootstrap, topic)
    committed = sorted(f"{t}-{i}" for t in "ac" for i in range(20))

    values = sorted(r.value.decode() for r in load(spark, spark_broker, topic).collect())
    assert values == committed
    everything = load(spark, spark_broker, topic, isolationLevel="read_uncommitted").collect()
    assert sorted(r.value.decode() for r in everything) == \
        sorted(f"{t}-{i}" for t in "abcd" for i in range(20))

    run_job(spark, JobConfig(storage=storage_url(spark_broker), topics=[topic],
                             output=str(tmp_path / "out")))
    rows = output_rows(tmp_path / "out")
    assert sorted(row["value"].decode() for row in rows.values()) == committed
    producer.abort_transaction(30)


def test_stream_stops_at_the_last_stable_offset(spark: Any, spark_broker: BrokerProcess,
                                                tmp_path: Path) -> None:
    """A read_committed stream reads committed records only and stops at the open
    transaction; once it commits, the next micro-batch reads it (and never the aborted)."""
    from tests.spark.test_streaming import run_available_now, sink_rows

    topic = make_topic_name("stream-txn")
    create_topic(spark_broker.bootstrap, topic, PARTITIONS)
    producer = _write(spark_broker.bootstrap, topic)
    options = {"storage": str(spark_broker.data_dir), "subscribe": topic}
    run_available_now(spark, tmp_path / "out", tmp_path / "chk", **options)
    values = sorted(r.value.decode() for r in sink_rows(spark, tmp_path / "out").values())
    assert values == sorted(f"{t}-{i}" for t in "ac" for i in range(20))
    producer.commit_transaction(30)
    run_available_now(spark, tmp_path / "out", tmp_path / "chk", **options)
    values = sorted(r.value.decode() for r in sink_rows(spark, tmp_path / "out").values())
    assert values == sorted(f"{t}-{i}" for t in "acd" for i in range(20))
