"""The streaming reader's offset decisions, called as Spark calls them (no Spark needed):
per-trigger limits, minOffsetsPerTrigger with maxTriggerDelay, and lost data reported as
Spark's Kafka source reports it."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from bmq.spark.planning import SourceOptions
from bmq.spark.ranges import DataLossError
from bmq.spark.streaming import BMQStreamReader, rate_limit
from tests.conftest import BrokerProcess
from tests.spark.conftest import Produced


def reader(storage: str, topic: str, **options: str) -> BMQStreamReader:
    return BMQStreamReader(SourceOptions.parse(
        {"storage": storage, "subscribe": topic, **options}).resolved())


def test_rate_limit_shares_the_limit_and_never_exceeds_it() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    end = {("t", 0): 300, ("t", 1): 200, ("t", 2): 6, ("t", 3): 10}   # t-3 is new
    for limit in (1, 7, 50, 399, 410):
        cut = rate_limit(start, end, limit)
        assert sum(cut[tp] - start.get(tp, 0) for tp in cut) == min(limit, 411)
        assert all(start.get(tp, 0) <= cut[tp] <= end[tp] for tp in end)
    cut = rate_limit(start, end, 100)
    assert cut[("t", 0)] - 0 > cut[("t", 1)] - 100 > cut[("t", 3)]   # in proportion


def test_min_offsets_per_trigger_waits_up_to_max_trigger_delay(
        spark_broker: BrokerProcess, mixed_topic: Produced) -> None:
    total = len(mixed_topic.records)
    stream = reader(str(spark_broker.data_dir), mixed_topic.topic,
                    minOffsetsPerTrigger=str(total + 1), maxTriggerDelay="2s")
    start = stream.initialOffset()
    limit = stream.getDefaultReadLimit()
    assert isinstance(limit, ReadMaxRows)
    assert stream.latestOffset(start, limit) == start        # too few, not waited enough
    assert stream.latestOffset(start, ReadAllAvailable()) != start   # AvailableNow / Once
    time.sleep(2.1)
    end = stream.latestOffset(start, limit)
    assert sum(end[mixed_topic.topic].values()) == total     # the delay passed: everything


def test_lost_data_fails_or_warns(spark_broker: BrokerProcess, mixed_topic: Produced,
                                  tmp_path: Path) -> None:
    """Offsets deleted by retention before a micro-batch reads them: failOnDataLoss (default)
    fails with the Kafka source's words, false goes on from the log start."""
    topic = mixed_topic.topic
    shutil.copytree(Path(spark_broker.data_dir) / "topics" / topic / "0", tmp_path / topic / "0")
    start = {topic: {"0": 50}}
    ckpt_path = tmp_path / topic / "0" / "checkpoint.json"
    ckpt = json.loads(ckpt_path.read_text())
    ckpt["log_start_offset"] = 100
    ckpt_path.write_text(json.dumps(ckpt))
    end = reader(str(tmp_path), topic).latestOffset(start, ReadAllAvailable())
    with pytest.raises(DataLossError, match=r"Some data may have been lost.*failOnDataLoss"):
        reader(str(tmp_path), topic).partitions(start, end)
    ranges = reader(str(tmp_path), topic, failOnDataLoss="false").partitions(start, end)
    assert ranges[0].value.start_offset == 100
    assert ranges[-1].value.end_offset == end[topic]["0"] == mixed_topic.ends()[0]
    # A partition that disappeared (its topic deleted): lost as well.
    shutil.rmtree(tmp_path / topic)
    with pytest.raises(DataLossError, match="Cannot find partitions"):
        reader(str(tmp_path), topic).latestOffset(start, ReadAllAvailable())
