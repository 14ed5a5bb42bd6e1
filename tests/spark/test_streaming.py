"""`spark.readStream.format("bmq")`: Structured Streaming straight from the segments, into
Spark's Parquet file sink, with records produced by confluent-kafka to `bmq serve`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    for row in spark.read.parquet(str(output)).collect():
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
    new, also of the partition that started at latest."""
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
    produce(spark_broker.bootstrap, produced, mixed_messages(90, 3, "b"))
    run_available_now(spark, output, checkpoint, **options)
    wanted |= set(produced.records) - set(first)
    rows = sink_rows(spark, output)
    check_equal(rows, Produced(topic, 3, {k: produced.records[k] for k in wanted}))
