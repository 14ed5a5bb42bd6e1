"""The report's plots: throughput over time and latency CDF, as PNG files (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.config import MB
from bench.stats import PhaseResult, Point

COLORS = {"produce": "#1f77b4", "consume": "#2ca02c", "e2e-produce": "#ff7f0e",
          "e2e": "#d62728"}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as error:  # an extra: pip install -e '.[bench]'
        raise RuntimeError("--report needs matplotlib (pip install -e '.[bench]')") from error
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def throughput_series(timelines: list[list[Point]], origin: float,
                      points: int = 120) -> tuple[list[float], list[float], list[float]]:
    """(seconds since origin, MB/s, msgs/s) in equal buckets, summed over the workers.

    Each worker's cumulative counts are interpolated at the bucket edges, so workers that
    noted their progress at different moments add up correctly.
    """
    import numpy as np

    timelines = [t for t in timelines if t]
    if not timelines:
        return [], [], []
    end = max(t[-1][0] for t in timelines)
    span = max(end - origin, 1e-3)
    width = max(span / points, 0.05)
    edges = np.arange(origin, end + width, width)
    if len(edges) < 2:
        edges = np.array([origin, origin + width])
    messages = np.zeros(len(edges))
    nbytes = np.zeros(len(edges))
    for timeline in timelines:
        times = np.array([p[0] for p in timeline])
        messages += np.interp(edges, times, np.array([p[1] for p in timeline], dtype=float),
                              left=0.0)
        nbytes += np.interp(edges, times, np.array([p[2] for p in timeline], dtype=float),
                            left=0.0)
    mid = (edges[1:] + edges[:-1]) / 2 - origin
    mbps = np.diff(nbytes) / width / MB
    msgps = np.diff(messages) / width
    return mid.tolist(), mbps.tolist(), msgps.tolist()


def plot_throughput(results: list[PhaseResult], path: Path) -> bool:
    """One panel per phase with a timeline; False when there is nothing to draw."""
    phases = [r for r in results if r.timelines]
    if not phases:
        return False
    plt = _pyplot()
    fig, axes = plt.subplots(len(phases), 1, figsize=(9, 2.8 * len(phases) + 0.6),
                             squeeze=False)
    for ax, phase in zip(axes[:, 0], phases, strict=True):
        origin = min(t[0][0] for t in phase.timelines)
        x, mbps, msgps = throughput_series(phase.timelines, origin)
        color = COLORS.get(phase.phase, "#444444")
        ax.plot(x, mbps, color=color, linewidth=1.6, label="MB/s")
        ax.fill_between(x, mbps, color=color, alpha=0.15)
        ax.axhline(phase.mb_per_s, color=color, linestyle="--", linewidth=1,
                   label=f"average {phase.mb_per_s:.1f} MB/s")
        ax.set_title(f"{phase.phase}: {phase.mb_per_s:.1f} MB/s, {phase.msgs_per_s:,.0f} msgs/s "
                     f"average, {phase.processes} process(es)", fontsize=10, loc="left")
        ax.set_ylabel("MB/s")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        if msgps:
            per_mb = (max(msgps) / max(mbps)) if max(mbps) > 0 else 0.0
            if per_mb > 0:
                right = ax.twinx()
                right.set_ylim(0, ax.get_ylim()[1] * per_mb)
                right.set_ylabel("messages/s")
                right.ticklabel_format(axis="y", style="plain")
                right.yaxis.set_major_formatter(_thousands())
    axes[-1, 0].set_xlabel("seconds since the phase started")
    fig.suptitle("Throughput over time", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _thousands() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: f"{value:,.0f}")


def _plain() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: f"{value:g}")


def plot_latency_cdf(results: list[PhaseResult], path: Path) -> bool:
    """Latency CDF of every phase that timed messages; False when none did."""
    import numpy as np

    phases = [r for r in results if r.latencies]
    if not phases:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.6))
    for phase in phases:
        values = np.sort(np.array(phase.latencies))
        share = np.arange(1, len(values) + 1) / len(values) * 100
        color = COLORS.get(phase.phase)
        lat = phase.latency_ms
        label = phase.phase if lat is None else (
            f"{phase.phase} ({phase.latency_kind}): p50 {lat.p50:.1f}, p99 {lat.p99:.1f} ms")
        ax.plot(values, share, color=color, linewidth=1.8, label=label)
        if lat is not None:
            for pct, value in ((50, lat.p50), (99, lat.p99)):
                ax.plot([value], [pct], marker="o", color=color, markersize=4)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(_plain())
    ax.set_xlabel("latency, ms (log scale)")
    ax.set_ylabel("messages at or below, %")
    ax.set_ylim(0, 100.5)
    ax.set_yticks([0, 10, 25, 50, 75, 90, 100])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Latency CDF", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
