"""One storage URL for every tool: the Spark source and the Parquet job take the URL the brokers
were given (`bmq serve --data-dir DIR`: DIR or file://DIR) as well as DIR/topics, and a wrong
URL's error says what is there."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from bmq.spark.parquet_export import JobConfig, run
from bmq.spark.parquet_output import committed_files
from bmq.spark.planning import OptionError, SourceOptions, plan
from tests.conftest import BrokerProcess
from tests.spark.conftest import Produced


@pytest.mark.parametrize("form", ["path", "file-url-slash"])
def test_batch_read_given_the_brokers_url(spark: Any, spark_broker: BrokerProcess,
                                          mixed_topic: Produced, form: str) -> None:
    # (DATA_DIR/topics is what every other test of the source is given.)
    url = {"path": str(spark_broker.data_dir),
           "file-url-slash": f"file://{spark_broker.data_dir}/"}[form]
    df = (spark.read.format("bmq").option("storage", url).option("topic", mixed_topic.topic)
          .load())
    rows = {(r.partition, r.offset): (r.key, r.value) for r in df.collect()}
    assert rows == {k: v[:2] for k, v in mixed_topic.records.items()}


def test_subscribe_pattern(spark: Any, spark_broker: BrokerProcess,
                           mixed_topic: Produced) -> None:
    df = (spark.read.format("bmq").option("storage", str(spark_broker.data_dir))
          .option("subscribePattern", mixed_topic.topic[:-3] + ".*").load())
    assert df.count() == len(mixed_topic.records)


def test_parquet_job_given_the_brokers_url(spark: Any, spark_broker: BrokerProcess,
                                           mixed_topic: Produced, tmp_path: Path) -> None:
    cfg = JobConfig(storage=f"file://{spark_broker.data_dir}", topics=[mixed_topic.topic],
                    output=str(tmp_path / "out"))
    summary = run(spark, cfg, io.StringIO())
    assert summary["records"] == len(mixed_topic.records)
    assert committed_files(str(tmp_path / "out"))


def test_wrong_url_says_what_is_there(spark_broker: BrokerProcess, mixed_topic: Produced,
                                      tmp_path: Path) -> None:
    def error(url: str, topic: str = mixed_topic.topic) -> str:
        with pytest.raises(OptionError) as info:
            plan(SourceOptions.parse({"storage": url, "topic": topic}).resolved())
        return str(info.value)

    assert "found nothing" in error(str(tmp_path / "empty"))
    # The broker's metadata directory: no partitions there, its entries named.
    meta = error(f"file://{spark_broker.data_dir}/meta")
    assert "no topic directories" in meta and ".json" in meta, meta
    # The right URL, a topic that is not there: the topics that are.
    missing = error(str(spark_broker.data_dir), "no-such-topic")
    assert f"the topics {mixed_topic.topic}" in missing or mixed_topic.topic in missing, missing
    with pytest.raises(OptionError, match="matches no topic"):
        plan(SourceOptions.parse({"storage": str(spark_broker.data_dir),
                                  "subscribePattern": "nothing-like-this.*"}).resolved())
