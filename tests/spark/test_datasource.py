"""The `bmq` Spark data source over segments written by real clients to `bmq serve`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from bmq.protocol.record_codec import iter_records
from bmq.spark.decode import read_range
from bmq.spark.planning import OptionError, SourceOptions, plan
from bmq.storage import open_storage
from bmq.storage.log.durable import open_durable
from tests.conftest import BrokerProcess, make_topic_name
from tests.spark.conftest import (
    Produced,
    create_topic,
    expected_headers,
    header_pairs,
    produce,
    storage_url,
)


def load(spark: Any, broker: BrokerProcess, topic: str, **options: str) -> Any:
    reader = (spark.read.format("bmq").option("storage", storage_url(broker))
              .option("topic", topic))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def rows_by_offset(df: Any) -> dict[tuple[int, int], Any]:
    rows = {}
    for row in df.collect():
        key = (row.partition, row.offset)
        assert key not in rows, f"duplicate row {key}"
        rows[key] = row
    return rows


def check_rows(rows: dict[tuple[int, int], Any], produced: Produced,
               wanted: set[tuple[int, int]]) -> None:
    assert set(rows) == wanted
    for key in wanted:
        row = rows[key]
        p_key, p_value, p_headers, p_ts = produced.records[key]
        assert row.topic == produced.topic
        assert (row.key, row.value) == (p_key, p_value), key
        assert header_pairs(row.headers) == expected_headers(p_headers), key
        assert int(row.timestamp.timestamp() * 1000) == p_ts
        assert row.timestampType == 0


def test_schema_is_the_kafka_source_schema(spark: Any, spark_broker: BrokerProcess,
                                           mixed_topic: Produced) -> None:
    df = load(spark, spark_broker, mixed_topic.topic)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,"
        "headers:array<struct<key:string,value:binary>>>")
    no_headers = load(spark, spark_broker, mixed_topic.topic, includeHeaders="false")
    assert "headers" not in no_headers.columns
    assert no_headers.count() == len(mixed_topic.records)


def test_reads_everything_produced(spark: Any, spark_broker: BrokerProcess,
                                   mixed_topic: Produced) -> None:
    df = load(spark, spark_broker, mixed_topic.topic)
    rows = rows_by_offset(df)
    check_rows(rows, mixed_topic, set(mixed_topic.records))
    # Several segments per partition, so several input partitions.
    assert df.rdd.getNumPartitions() > 3


def test_filter_option_reads_the_source_as_its_view(spark: Any, spark_broker: BrokerProcess,
                                                    mixed_topic: Produced) -> None:
    """A view's filter over its source (every codec): only the matching records, with the
    source's offsets, as a consumer of the view gets them."""
    rows = rows_by_offset(load(spark, spark_broker, mixed_topic.topic,
                               filter="trace IS NOT NULL AND empty IS NULL"))
    with_trace = {k for k, record in mixed_topic.records.items() if record[2]}
    assert with_trace and len(with_trace) < len(mixed_topic.records)
    check_rows(rows, mixed_topic, with_trace)


def test_small_splits_give_the_same_rows(spark: Any, spark_broker: BrokerProcess,
                                         mixed_topic: Produced) -> None:
    df = load(spark, spark_broker, mixed_topic.topic, maxBytesPerPartition="8192")
    many = df.rdd.getNumPartitions()
    assert many > load(spark, spark_broker, mixed_topic.topic).rdd.getNumPartitions()
    check_rows(rows_by_offset(df), mixed_topic, set(mixed_topic.records))


def test_offset_options(spark: Any, spark_broker: BrokerProcess,
                        mixed_topic: Produced) -> None:
    topic = mixed_topic.topic
    ends = mixed_topic.ends()
    # Mid-batch offsets: batches straddling both ends are trimmed to the range.
    starting = {topic: {"0": 101, "1": -2, "2": 1000}}
    ending = {topic: {"0": 1203, "1": 77, "2": -1}}
    df = load(spark, spark_broker, topic, startingOffsets=json.dumps(starting),
              endingOffsets=json.dumps(ending))
    wanted = ({(0, o) for o in range(101, 1203)} | {(1, o) for o in range(0, 77)}
              | {(2, o) for o in range(1000, ends[2])})
    check_rows(rows_by_offset(df), mixed_topic, wanted)

    # Partitions left out of the JSON: earliest to latest.
    df = load(spark, spark_broker, topic, startingOffsets=json.dumps({topic: {"1": 1400}}))
    assert df.count() == len(mixed_topic.records) - 1400

    # The plain strings.
    assert load(spark, spark_broker, topic, startingOffsets="latest").count() == 0
    assert load(spark, spark_broker, topic, endingOffsets="earliest").count() == 0
    assert load(spark, spark_broker, topic, startingOffsets="earliest",
                endingOffsets="latest").count() == len(mixed_topic.records)


def test_partitions_option(spark: Any, spark_broker: BrokerProcess,
                           mixed_topic: Produced) -> None:
    df = load(spark, spark_broker, mixed_topic.topic, partitions="0,2")
    rows = rows_by_offset(df)
    check_rows(rows, mixed_topic, {k for k in mixed_topic.records if k[0] in (0, 2)})
    df = load(spark, spark_broker, mixed_topic.topic, partitions="1",
              startingOffsets=json.dumps({mixed_topic.topic: {"1": 10}}),
              endingOffsets=json.dumps({mixed_topic.topic: {"1": 20}}))
    assert sorted(r.offset for r in df.collect()) == list(range(10, 20))


def test_dataframe_operations(spark: Any, spark_broker: BrokerProcess,
                              mixed_topic: Produced) -> None:
    from pyspark.sql import functions as F

    df = load(spark, spark_broker, mixed_topic.topic)
    counts = {r.partition: r["count"] for r in df.groupBy("partition").count().collect()}
    assert counts == {p: n for p, n in mixed_topic.ends().items()}
    nulls = df.where(F.col("value").isNull()).count()
    assert nulls == sum(1 for v in mixed_topic.records.values() if v[1] is None)
    with_headers = df.where(F.size("headers") > 0).count()
    assert with_headers == sum(1 for v in mixed_topic.records.values() if v[2])
    # As in Spark's Kafka source, a record without headers has null headers, not [].
    assert df.where(F.col("headers").isNull()).count() == len(mixed_topic.records) - with_headers


def test_topic_without_any_headers(spark: Any, spark_broker: BrokerProcess) -> None:
    """Bulk data often has no headers at all: every row's headers are null."""
    produced = Produced(make_topic_name("spark-nohdr"), 2)
    create_topic(spark_broker.bootstrap, produced.topic, 2)
    for codec in ("none", "zstd"):
        produce(spark_broker.bootstrap, produced,
                [(i % 2, None if i % 5 == 0 else str(i).encode(), os.urandom(i % 100), None)
                 for i in range(2000)], codec, **{"batch.size": 16384})   # < segment size
    rows = rows_by_offset(load(spark, spark_broker, produced.topic))
    check_rows(rows, produced, set(produced.records))
    assert all(row.headers is None for row in rows.values())


@pytest.mark.parametrize("options, message", [
    ({}, "storage is required"),
    ({"storage": "/nowhere"}, "exactly one of the options topic"),
    ({"storage": "/nowhere", "topic": "t", "subscribePattern": "t.*"}, "exactly one"),
    ({"storage": "/nowhere", "topic": "t", "maxOffsetsPerTrigger": "0"}, "positive"),
    ({"storage": "/nowhere", "topic": "t", "maxTriggerDelay": "soon"}, "maxTriggerDelay"),
    ({"storage": "/nowhere", "topic": "t", "startingOffsets": "{bad"}, "startingOffsets"),
    ({"storage": "/nowhere", "topic": "t", "endingOffsets": '{"other": {"0": 1}}'},
     "names topics not read"),
    ({"storage": "/nowhere", "topic": "t", "partitions": "a,b"}, "partitions"),
    ({"storage": "/nowhere", "topic": "t", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"storage": "/nowhere", "topic": "t", "isolationLevel": "dirty"}, "isolationLevel"),
    ({"storage": "/nowhere", "topic": "t", "filter": "trace ="}, "filter: expected a number"),
])
def test_bad_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        SourceOptions.parse(options)


def test_planning_errors(spark_broker: BrokerProcess, mixed_topic: Produced) -> None:
    url = storage_url(spark_broker)
    with pytest.raises(OptionError, match="not found"):
        plan(SourceOptions.parse({"storage": url, "topic": "no-such-topic"}))
    with pytest.raises(OptionError, match="no partitions"):
        plan(SourceOptions.parse({"storage": url, "topic": mixed_topic.topic,
                                  "partitions": "0,7"}))
    with pytest.raises(OptionError, match="after the ending offset"):
        plan(SourceOptions.parse({
            "storage": url, "topic": mixed_topic.topic,
            "startingOffsets": json.dumps({mixed_topic.topic: {"0": 50}}),
            "endingOffsets": json.dumps({mixed_topic.topic: {"0": 10}})}))


def test_error_surfaces_in_spark(spark: Any, spark_broker: BrokerProcess) -> None:
    with pytest.raises(Exception, match="not found"):
        load(spark, spark_broker, "no-such-topic").collect()


def test_decoder_matches_reference_decoder(spark_broker: BrokerProcess,
                                           mixed_topic: Produced) -> None:
    """The columnar decoder against record_codec.iter_records, segment by segment."""
    storage = open_storage(storage_url(spark_broker))
    opts = SourceOptions.parse({"storage": storage_url(spark_broker),
                                "topic": mixed_topic.topic})
    for rng in plan(opts, storage):
        ours = []
        for batch in read_range(storage, rng):
            d = batch.to_pydict()
            ours += [(d["offset"][i], d["key"][i], d["value"][i],
                      header_pairs(d["headers"][i]),
                      int(d["timestamp"][i].timestamp() * 1000))
                     for i in range(batch.num_rows)]
        data = storage.read_range(rng.path, rng.start_pos, rng.end_pos - rng.start_pos)
        ref = [(r.offset, r.key, r.value, expected_headers(r.headers), r.timestamp)
               for r in iter_records(data)
               if rng.start_offset <= r.offset < rng.end_offset]
        assert ours == ref


def test_decoder_headers_on_every_record() -> None:
    """Records that all carry headers (several, null values, a key that is not UTF-8, records
    over 8 KiB), in batches encoded by kafka-python, decoded as the reference decoder does,
    also when the asked range cuts batches."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from bmq.protocol.record_codec import decode_batch
    from bmq.protocol.records import read_header
    from bmq.spark.decode import ColumnBuilder

    batches = []
    for b in range(6):
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
        for i in range(50):
            headers = [(f"h{j}-é", None if (i + j) % 7 == 0 else os.urandom(j * 3))
                       for j in range(i % 5)] or [("only", b"x")]
            builder.append(i, 1_700_000_000_000 + i, None if i % 9 == 0 else b"k%d" % i,
                           os.urandom(9000 if i % 10 == 3 else i), headers)
        data = bytearray(builder.build())
        data[0:8] = (b * 50).to_bytes(8, "big")        # base offset
        if b == 2:   # make one header key invalid UTF-8 (no CRC check on this path)
            at = data.index("h1-é".encode())
            data[at + 3:at + 5] = b"\xff\xfe"
        batches.append(bytes(data))
    reference = [(r.offset, r.key, r.value, expected_headers(r.headers))
                 for d in batches for r in decode_batch(d, read_header(d))]
    assert any(k == "h1-\ufffd\ufffd" for *_, hs in reference for k, _v in hs or [])
    for start, end in ((0, 300), (37, 263)):
        cols = ColumnBuilder("t", 0, start, end)
        for d in batches:
            cols.add(d, 0, read_header(d))
        out = cols.build()
        assert out is not None
        out.validate(full=True)
        d = out.to_pydict()
        ours = [(d["offset"][i], d["key"][i], d["value"][i], header_pairs(d["headers"][i]))
                for i in range(out.num_rows)]
        assert ours == [r for r in reference if start <= r[0] < end]


def test_view_stops_at_torn_tail(tmp_path: Path, spark_broker: BrokerProcess,
                                 mixed_topic: Produced) -> None:
    """Bytes past the last complete, CRC-valid batch (a batch being written, a torn tail) are
    not part of the view, and the view never writes to the log."""
    src = Path(spark_broker.data_dir) / "topics" / mixed_topic.topic / "0"
    dst = tmp_path / mixed_topic.topic / "0"
    shutil.copytree(src, dst)
    storage = open_storage(str(tmp_path))
    before = open_durable(storage, mixed_topic.topic, 0)
    assert before.high_watermark == mixed_topic.ends()[0]
    last = dst / f"{before.segments[-1].base:020d}.log"
    whole = last.read_bytes()
    # A copy of the last batch with a wrong offset, then a half-written batch.
    with open(last, "ab") as fh:
        fh.write(whole[:40])
    listing = {p.name: p.stat().st_size for p in dst.iterdir()}
    after = open_durable(storage, mixed_topic.topic, 0)
    assert after.high_watermark == before.high_watermark
    assert after.segments == before.segments
    assert {p.name: p.stat().st_size for p in dst.iterdir()} == listing
    # Without the checkpoint the whole log is scanned, with the same result.
    os.remove(dst / "checkpoint.json")
    scanned = open_durable(storage, mixed_topic.topic, 0)
    assert scanned.high_watermark == before.high_watermark
    assert [s.base for s in scanned.segments] == [s.base for s in before.segments]


def test_cluster_mode_layout_is_read_through_the_log_reader(tmp_path: Path) -> None:
    """Partitions written by a cluster-mode owner (leader epoch > 0: epoch-named checkpoints
    and segments) are read through PartitionLog.open_reader, with the same rows."""
    from bmq.storage import LogConfig, PartitionLog
    from bmq.storage.log.durable import open_durable
    from tests.storage.batches import make_batch, request

    storage = open_storage(str(tmp_path))
    config = LogConfig(segment_bytes=4096)
    log = PartitionLog.open(storage, "epochs", 0, config, epoch=3)
    expected = []
    offset = 0
    for i in range(40):
        values = [f"v{i}-{j}".encode() * 20 for j in range(5)]
        view, headers = request(make_batch(values, key=f"k{i}".encode()))
        log.append(view, headers, 1_700_000_000_000 + i)
        log.flush()
        expected += [(offset + j, f"k{i}".encode(), v) for j, v in enumerate(values)]
        offset += len(values)
    log.checkpoint()
    log.close()
    assert any(n.startswith("checkpoint-") for n in os.listdir(tmp_path / "epochs" / "0"))
    view = open_durable(storage, "epochs", 0)
    assert view.via_reader and view.high_watermark == offset
    for max_bytes, start, end in ((1 << 20, -2, -1), (2000, 7, 181)):
        opts = SourceOptions.parse({
            "storage": str(tmp_path), "topic": "epochs", "maxBytesPerPartition": str(max_bytes),
            "startingOffsets": json.dumps({"epochs": {"0": start}}),
            "endingOffsets": json.dumps({"epochs": {"0": end}})})
        ranges = plan(opts, storage)
        got = [(o, k, v) for rng in ranges for b in read_range(storage, rng)
               for o, k, v in zip(b.column("offset").to_pylist(), b.column("key").to_pylist(),
                                  b.column("value").to_pylist(), strict=True)]
        lo = 0 if start == -2 else start
        hi = offset if end == -1 else end
        assert got == expected[lo:hi]
        assert len(ranges) >= (1 if max_bytes > 4096 else 3)


def test_fail_on_data_loss(tmp_path: Path, spark_broker: BrokerProcess,
                           mixed_topic: Produced) -> None:
    """A starting offset below the log start (records deleted) fails unless failOnDataLoss is
    false, which starts at the log start instead; `earliest` is the log start."""
    topic = mixed_topic.topic
    shutil.copytree(Path(spark_broker.data_dir) / "topics" / topic / "0", tmp_path / topic / "0")
    ckpt_path = tmp_path / topic / "0" / "checkpoint.json"
    ckpt = json.loads(ckpt_path.read_text())
    ckpt["log_start_offset"] = 100
    ckpt_path.write_text(json.dumps(ckpt))
    options = {"storage": str(tmp_path), "topic": topic,
               "startingOffsets": json.dumps({topic: {"0": 50}})}
    with pytest.raises(OptionError, match="before the log start offset 100"):
        plan(SourceOptions.parse(options))
    ranges = plan(SourceOptions.parse({**options, "failOnDataLoss": "false"}))
    assert ranges[0].start_offset == 100
    earliest = plan(SourceOptions.parse({"storage": str(tmp_path), "topic": topic}))
    assert earliest[0].start_offset == 100
    assert earliest[-1].end_offset == mixed_topic.ends()[0]
