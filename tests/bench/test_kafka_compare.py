"""Smoke test of bench.kafka_compare: BMQ and Apache Kafka 4.4 side by side, with small counts
(it says nothing about speed): every workload runs on both, every figure is there and sane, and
the markdown table names both brokers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = 5_000


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_both_brokers_run_every_workload(tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    ran = subprocess.run(
        [sys.executable, "-m", "bench.kafka_compare", "--peers", "bmq,kafka",
         "--messages", str(MESSAGES), "--rate", "1", "--duration", "3",
         "--data-root", str(tmp_path), "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=560, check=False)
    assert ran.returncode == 0, ran.stderr[-4000:]
    results = json.loads(out.read_text())
    assert [r["peer"] for r in results] == ["BMQ", "Kafka 4.4 (fsync each write)"]
    for result in results:
        assert result["produce"]["messages"] == result["consume"]["messages"] == MESSAGES
        latency = result["paced_produce"]["latency_ms"]
        assert 0 < latency["p50"] <= latency["p99"] <= latency["p99.9"] <= latency["max"]
        assert result["java_produce_mb_per_s"] > 0 and result["java_consume_mb_per_s"] > 0
        assert result["produce_cpu_s_per_gb"] > 0 and result["consume_cpu_s_per_gb"] > 0
        assert 0 < result["rss_mb"] <= result["peak_rss_mb"]
        for key in ("start_s", "restart_s", "restart_after_kill_s"):
            assert 0 < result[key] < 120, (key, result[key])
    table = ran.stdout
    assert "| | BMQ | Kafka 4.4 (fsync each write) |" in table
    assert "| start to first accepted produce, s |" in table
