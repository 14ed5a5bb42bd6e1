"""Smoke test of the benchmark tool (python -m bench) against a throw-away bmq serve.

Small counts, so it says nothing about speed: it checks that the tool runs end
to end, that every produced message is consumed and that the figures are sane.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]  # python -m bench runs from the repository root
MESSAGES = 20_000


def run_bench(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--spawn-server", "--timeout", "60",
         "--json", str(out), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=110, check=False)
    assert out.exists(), (f"no JSON written (exit {proc.returncode})\n"
                          f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}")
    print(proc.stdout)  # the summary table, shown by pytest -s or on failure
    return proc.returncode, json.loads(out.read_text())


def phase(doc: dict[str, Any], name: str) -> dict[str, Any]:
    found = [r for r in doc["results"] if r["phase"] == name]
    assert len(found) == 1, doc["results"]
    return found[0]


@pytest.mark.timeout(120)
def test_produce_then_consume_counts_match(tmp_path: Path) -> None:
    code, doc = run_bench(tmp_path, "--messages", str(MESSAGES), "--partitions", "8",
                          "--message-size", "1024", "--acks", "all",
                          "--producers", "2", "--consumers", "2")
    produced, consumed = phase(doc, "produce"), phase(doc, "consume")
    assert produced["messages"] == consumed["messages"] == MESSAGES
    assert produced["bytes"] == consumed["bytes"] == MESSAGES * 1024
    assert produced["errors"] == consumed["errors"] == 0
    assert produced["complete"] and consumed["complete"]
    for result in (produced, consumed):
        assert result["processes"] == 2
        assert result["elapsed_s"] > 0
        assert result["mb_per_s"] > 0
        assert result["msgs_per_s"] > 0
    latency = produced["latency_ms"]
    assert latency["samples"] > 0
    assert 0 < latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]
    assert doc["config"]["partitions_used"] == 8
    assert code == 0


@pytest.mark.timeout(120)
def test_e2e_short_run(tmp_path: Path) -> None:
    code, doc = run_bench(tmp_path, "--mode", "e2e", "--duration", "3", "--rate", "1",
                          "--warmup", "0.5", "--partitions", "4")
    produced, e2e = phase(doc, "e2e-produce"), phase(doc, "e2e")
    assert produced["messages"] > 0
    assert e2e["messages"] == produced["messages"]
    assert e2e["duplicates"] == 0
    latency = e2e["latency_ms"]
    assert latency["samples"] > 0
    assert 0 < latency["p50"] <= latency["p99"] <= latency["max"]
    assert code == 0


@pytest.mark.timeout(120)
def test_sasl_ssl_compared_with_plaintext_in_one_run(tmp_path: Path) -> None:
    code, doc = run_bench(tmp_path, "--messages", "5000", "--security", "sasl_ssl",
                          "--compare-plaintext")
    for listener in ("PLAINTEXT", "SASL_SSL"):
        produced = phase(doc, f"produce ({listener})")
        consumed = phase(doc, f"consume ({listener})")
        assert produced["messages"] == consumed["messages"] == 5000
    share = phase(doc, "consume (SASL_SSL)")["share_of_plaintext"]
    assert share > 0
    assert doc["config"]["client_overrides"]["sasl.password"] == "(hidden)"
    assert code == 0
