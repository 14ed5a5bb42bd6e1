"""python -m bench --report DIR: report.md with readable PNG plots, for every kind of phase."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from bench.plots import throughput_series

ROOT = Path(__file__).resolve().parents[2]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def run_bench(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--spawn-server", "--timeout", "60",
         "--report", str(out), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=150, check=False)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    return proc, out


@pytest.mark.timeout(160)
def test_produce_and_consume_report(tmp_path: Path) -> None:
    proc, out = run_bench(tmp_path, "--messages", "20000", "--partitions", "4",
                          "--producers", "2")
    report = (out / "report.md").read_text()
    assert "| produce | 2 | 20000 |" in report
    assert "| consume | 1 | 20000 |" in report
    assert "![throughput over time](throughput.png)" in report
    assert "![latency CDF](latency-cdf.png)" in report
    for name in ("throughput.png", "latency-cdf.png"):
        width, height = png_size(out / name)
        assert width >= 800 and height >= 400
        assert (out / name).stat().st_size > 10_000  # axes, lines and labels, not a blank
    assert (out / "results.json").exists()
    # The progress bars ran (and finished at the full count).
    assert "20000/20000" in proc.stderr
    assert f"report written to {out / 'report.md'}" in proc.stderr


@pytest.mark.timeout(160)
def test_e2e_report(tmp_path: Path) -> None:
    _, out = run_bench(tmp_path, "--mode", "e2e", "--duration", "3", "--rate", "1",
                       "--warmup", "0.5", "--partitions", "2", "--no-progress")
    report = (out / "report.md").read_text()
    assert "| e2e-produce | 1 |" in report and "| e2e | 1 |" in report
    assert "e2e rate / warm-up | 1 MB/s / 0.5 s" in report
    png_size(out / "throughput.png")
    png_size(out / "latency-cdf.png")


def test_throughput_series_adds_workers_up() -> None:
    # Two workers, 1000 messages of 1000 bytes per second each, noted at different moments.
    first = [(10.0 + t / 10, 100 * t, 100_000 * t) for t in range(0, 51)]
    second = [(10.05 + t / 10, 100 * t, 100_000 * t) for t in range(0, 51)]
    x, mbps, msgps = throughput_series([first, second], origin=10.0, points=20)
    assert len(x) == len(mbps) == len(msgps) > 10
    middle = len(msgps) // 2
    assert msgps[middle] == pytest.approx(2000, rel=0.05)
    assert mbps[middle] == pytest.approx(2.0, rel=0.05)
    assert throughput_series([], 0.0) == ([], [], [])
