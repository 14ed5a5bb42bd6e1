"""bench.databus runs end to end with both kinds of clients (issue #35's benchmark): every
message it sends is delivered, directly and through an agent, and the agent sends the cluster
fewer Produce requests. Small counts: it says nothing about speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("client", ["python", "java"])
def test_both_runs_deliver_every_message(tmp_path: Path, client: str) -> None:
    out = tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.databus", "--clients", "6", "--rate", "50",
         "--duration", "4", "--processes", "2", "--client", client, "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=280, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    figures = json.loads(out.read_text())
    for mode in ("direct", "databus"):
        run = figures[mode]
        assert run["sent"] > 6 * 50 * 3, run       # paced: about 1,200 in 4 s
        assert run["errors"] == 0 and run["delivered"] == run["sent"], run
        assert 0 < run["p50_ms"] <= run["p99_ms"] <= run["max_ms"], run
        assert run["clients_cpu_s"] > 0, run
    assert figures["databus"]["agent_cpu_s"] > 0
    assert figures["databus"]["produce_requests"] < figures["direct"]["produce_requests"]
