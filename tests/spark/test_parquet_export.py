"""spark_jobs/export_to_parquet.py: incremental, crash-safe Parquet output, key compaction."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from bmq.spark import parquet_export
from bmq.spark.parquet_export import JobConfig, run
from bmq.spark.parquet_output import MANIFEST, committed_files
from tests.conftest import BrokerProcess, make_topic_name
from tests.spark.conftest import (
    Produced,
    create_topic,
    expected_headers,
    header_pairs,
    produce,
    storage_url,
)

ROOT = Path(__file__).resolve().parents[2]
UNIT_BYTES = 40_000   # several units per partition


def messages(n: int, start: int, tag: str) -> list[tuple[int, bytes | None, bytes | None, Any]]:
    out = []
    for i in range(start, start + n):
        key = None if i % 19 == 0 else f"k{i % 23}".encode()
        value = None if i % 7 == 3 else f"{tag}-{i}-".encode() + os.urandom(20 + i % 300)
        headers = [("n", str(i).encode())] if i % 4 == 0 else None
        out.append((i % 2, key, value, headers))
    return out


@pytest.fixture
def topic_data(spark_broker: BrokerProcess) -> Produced:
    topic = make_topic_name("parquet")
    create_topic(spark_broker.bootstrap, topic, 2)
    produced = Produced(topic, 2)
    produce(spark_broker.bootstrap, produced, messages(700, 0, "a"), "lz4")
    produce(spark_broker.bootstrap, produced, messages(500, 700, "b"), "none")
    return produced


def job(broker: BrokerProcess, produced: Produced, output: Path, **kw: Any) -> JobConfig:
    return JobConfig(storage=storage_url(broker), topics=[produced.topic], output=str(output),
                     max_unit_bytes=kw.pop("max_unit_bytes", UNIT_BYTES), **kw)


def run_job(spark: Any, cfg: JobConfig) -> tuple[dict[str, Any], str]:
    stream = io.StringIO()
    summary = run(spark, cfg, stream)
    return summary, stream.getvalue()


def output_rows(output: Path) -> dict[tuple[int, int], dict[str, Any]]:
    """Every row of the output as pyarrow reads the directory (hidden files are skipped)."""
    table = ds.dataset(str(output), format="parquet", partitioning="hive").to_table()
    rows: dict[tuple[int, int], dict[str, Any]] = {}
    for row in table.to_pylist():
        key = (int(row["partition"]), row["offset"])
        assert key not in rows, f"duplicate {key}"
        rows[key] = row
    # The manifest names exactly the files there are.
    listed = sorted(str(p) for p in output.rglob("*.parquet") if not p.name.startswith("."))
    assert listed == committed_files(str(output))
    return rows


def check_exact(rows: dict[tuple[int, int], dict[str, Any]], produced: Produced) -> None:
    assert set(rows) == set(produced.records)
    for key, (k, v, headers, ts) in produced.records.items():
        row = rows[key]
        assert (row["key"], row["value"]) == (k, v)
        assert header_pairs(row["headers"]) == expected_headers(headers)
        assert int(row["timestamp"].timestamp() * 1000) == ts
        assert row["topic"] == produced.topic


def expected_compacted(produced: Produced) -> set[tuple[int, int]]:
    latest: dict[tuple[int, bytes], int] = {}
    keep = set()
    for (p, o), (k, _v, _h, _ts) in sorted(produced.records.items()):
        if k is None:
            keep.add((p, o))
        else:
            latest[(p, k)] = max(latest.get((p, k), -1), o)
    for (p, _k), o in latest.items():
        if produced.records[(p, o)][1] is not None:
            keep.add((p, o))
    return keep


def test_converts_all_then_only_new_data(spark: Any, spark_broker: BrokerProcess,
                                         topic_data: Produced, tmp_path: Path) -> None:
    output = tmp_path / "out"
    summary, log = run_job(spark, job(spark_broker, topic_data, output))
    assert summary["records"] == len(topic_data.records)
    assert summary["units"] > 2 and summary["segments"] >= 2
    assert "committed" in log and "done:" in log and "MB/s" in log
    check_exact(output_rows(output), topic_data)
    assert {p.name for p in output.iterdir()} == {MANIFEST, f"topic={topic_data.topic}"}
    dates = list(output.glob("topic=*/partition=*/date=*"))
    assert dates and all(len(d.name) == len("date=2024-01-01") for d in dates)
    manifest = json.loads((output / MANIFEST).read_text())
    ends = topic_data.ends()
    assert {k: v["ranges"] for k, v in manifest["partitions"].items()} == {
        f"{topic_data.topic}/{p}": [[0, ends[p]]] for p in ends}

    summary, _ = run_job(spark, job(spark_broker, topic_data, output))
    assert summary["units"] == 0 and summary["records"] == 0

    produce(spark_broker.bootstrap, topic_data, messages(300, 1200, "c"), "zstd")
    summary, _ = run_job(spark, job(spark_broker, topic_data, output))
    assert summary["records"] == 300
    check_exact(output_rows(output), topic_data)


@pytest.mark.parametrize("point", ["before-manifest", "after-manifest", "mid-rename",
                                   "after-rename"])
def test_crash_during_commit_then_rerun(spark: Any, spark_broker: BrokerProcess,
                                        topic_data: Produced, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    output = tmp_path / "out"
    calls = {"n": 0}

    class Crash(BaseException):
        pass

    def crash(name: str) -> None:
        if name == point:
            calls["n"] += 1
            if calls["n"] == 2:   # the second commit dies at this step
                raise Crash(name)

    monkeypatch.setattr(parquet_export, "crash_point", crash)
    with pytest.raises(Crash):
        run_job(spark, job(spark_broker, topic_data, output, max_unit_bytes=100_000))
    monkeypatch.undo()
    _, log = run_job(spark, job(spark_broker, topic_data, output))
    check_exact(output_rows(output), topic_data)
    assert not list(output.rglob("*.tmp"))
    if point == "after-manifest":
        assert "recovered committed file" in log


def test_sigkill_midway_then_rerun(spark: Any, spark_broker: BrokerProcess,
                                   topic_data: Produced, tmp_path: Path) -> None:
    """The job under spark-submit, killed with SIGKILL (its whole process tree) after its
    first commit; the rerun converts the rest exactly once."""
    output = tmp_path / "out"
    # Not the variables of this process's own SparkSession (its gateway port and secret).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    submit = Path(sys.executable).with_name("spark-submit")
    cmd = [str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           str(ROOT / "spark_jobs" / "export_to_parquet.py"),
           "--storage", storage_url(spark_broker), "--topic", topic_data.topic,
           "--output", str(output), "--max-unit-mb", str(UNIT_BYTES / 1e6),
           "--pause-after-commit", "2"]
    # spark-submit's PythonRunner passes the driver's stdout and stderr on as its stdout.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            cwd=str(ROOT), start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        assert proc.stdout is not None
        seen = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline().decode(errors="replace")
            seen.append(line)
            if "[bmq-parquet-export] committed" in line or not line:
                break
        assert any("committed" in line for line in seen), \
            f"exit code {proc.poll()}:\n" + "".join(seen[-30:])
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    manifest = json.loads((output / MANIFEST).read_text())
    converted = sum(e - s for v in manifest["partitions"].values() for s, e in v["ranges"])
    assert 0 < converted < len(topic_data.records)

    summary, _ = run_job(spark, job(spark_broker, topic_data, output))
    assert summary["records"] == len(topic_data.records) - converted
    check_exact(output_rows(output), topic_data)


def test_compact_keys(spark: Any, spark_broker: BrokerProcess, topic_data: Produced,
                      tmp_path: Path) -> None:
    output = tmp_path / "out"
    run_job(spark, job(spark_broker, topic_data, output, compact_keys=True))
    rows = output_rows(output)
    assert set(rows) == expected_compacted(topic_data)
    for key, row in rows.items():
        assert row["value"] == topic_data.records[key][1]

    # New values for some keys, tombstones for others: the snapshot follows.
    more = [(p, f"k{i}".encode(), None if i % 2 else f"new-{i}".encode(), None)
            for i in range(10) for p in (0, 1)]
    produce(spark_broker.bootstrap, topic_data, more, "snappy")
    before = set(committed_files(str(output)))
    summary, _ = run_job(spark, job(spark_broker, topic_data, output, compact_keys=True))
    assert summary["records"] == len(more)
    rows = output_rows(output)
    assert set(rows) == expected_compacted(topic_data)
    assert not before & set(committed_files(str(output)))   # replaced snapshots are gone
    for p in (0, 1):
        for i in range(10):
            k = f"k{i}".encode()
            found = [r for r in rows.values() if r["key"] == k and r["partition"] == p]
            assert [r["value"] for r in found] == ([] if i % 2 else [f"new-{i}".encode()])

    with pytest.raises(ValueError, match="cannot be continued"):
        run_job(spark, job(spark_broker, topic_data, output))


def test_stream_converts_new_data_until_stopped(spark: Any, spark_broker: BrokerProcess,
                                                topic_data: Produced, tmp_path: Path) -> None:
    """--stream: rounds of reruns pick up what is produced meanwhile; stopping ends the last
    round cleanly, with every offset converted once."""
    output = tmp_path / "out"
    stop = threading.Event()
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(parquet_export.run_stream(
        spark, job(spark_broker, topic_data, output), stop, 0.2, io.StringIO())))
    thread.start()
    try:
        for wave in range(3):
            produce(spark_broker.bootstrap, topic_data, messages(100, 1200 + 100 * wave,
                                                                 f"s{wave}"), "zstd")
            time.sleep(0.5)
        ends = topic_data.ends()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            manifest = json.loads((output / MANIFEST).read_text()) \
                if (output / MANIFEST).exists() else {"partitions": {}}
            if {k: v["ranges"] for k, v in manifest["partitions"].items()} == {
                    f"{topic_data.topic}/{p}": [[0, ends[p]]] for p in ends}:
                break
            time.sleep(0.2)
    finally:
        stop.set()
        thread.join(60)
    assert result["rounds"] >= 2 and result["records"] == len(topic_data.records)
    check_exact(output_rows(output), topic_data)


@pytest.mark.slow
def test_stream_killed_and_restarted(spark: Any, spark_broker: BrokerProcess,
                                     topic_data: Produced, tmp_path: Path) -> None:
    """`export_to_parquet.py --stream` killed -9 (its whole process tree) while producers
    write, restarted, stopped with SIGTERM: every offset converted exactly once."""
    from tests.spark.test_streaming import WaveProducer

    output = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    cmd = [sys.executable, str(ROOT / "spark_jobs" / "export_to_parquet.py"), "--master",
           "local[2]", "--storage", f"file://{spark_broker.data_dir}", "--topic",
           topic_data.topic, "--output", str(output), "--max-unit-mb", str(UNIT_BYTES / 1e6),
           "--stream", "--stream-interval", "0.3"]

    log = tmp_path / "job.log"

    def start() -> subprocess.Popen[bytes]:
        with open(log, "ab") as err:
            return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env,
                                    cwd=str(ROOT), start_new_session=True)

    def converted() -> int:
        if not (output / MANIFEST).exists():
            return 0
        manifest = json.loads((output / MANIFEST).read_text())
        return sum(e - s for v in manifest["partitions"].values() for s, e in v["ranges"])

    def wait_for(check: Any, what: str) -> None:
        deadline = time.monotonic() + 180
        while not check():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.2)

    producer = WaveProducer(spark_broker.bootstrap, topic_data).start()
    proc = start()
    try:
        wait_for(lambda: converted() > 0, "a first commit")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        proc = start()
        time.sleep(3)
        producer.stop()
        wait_for(lambda: converted() == len(topic_data.records), "every offset converted")
        proc.send_signal(signal.SIGTERM)   # the driver's Python process, as a user would
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, log.read_text()[-3000:]
        assert json.loads(out.decode().strip().splitlines()[-1])["rounds"] >= 1
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    check_exact(output_rows(output), topic_data)
