"""One run's record, written to a directory: what was run (seed, faults asked for, workloads),
the schedule of faults as applied, the full history of operations (JSON lines, one per
operation, the nemesis's included), each workload's verdict, and a short summary in Markdown.
``matrix`` folds many runs' verdicts into the fault-class x workload table the README shows."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tests.faults.history import History
from tests.faults.workload import Verdict

EXAMPLES_SHOWN = 5      # per anomaly kind, in the summary (verdicts.json has them all)


@dataclass
class RunRecord:
    seed: int
    faults: list[str]           # the fault classes the schedule drew from
    workloads: list[str]
    duration_s: float
    schedule: list[dict[str, Any]]
    verdicts: list[Verdict]

    @property
    def valid(self) -> bool:
        return bool(self.verdicts) and all(v.valid for v in self.verdicts)


def write(out: Path, record: RunRecord, history: History) -> Path:
    """Write the run into ``out`` (created); returns the summary's path."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "run.json").write_text(json.dumps(
        {"seed": record.seed, "faults": record.faults, "workloads": record.workloads,
         "duration_s": record.duration_s, "valid": record.valid}, indent=2) + "\n")
    (out / "schedule.json").write_text(json.dumps(record.schedule, indent=2, default=str) + "\n")
    (out / "verdicts.json").write_text(json.dumps(
        [asdict(v) for v in record.verdicts], indent=2, default=str) + "\n")
    history.write_jsonl(out / "history.jsonl")
    summary = out / "summary.md"
    summary.write_text(summarize(record, len(history.ops())))
    return summary


def summarize(record: RunRecord, operations: int) -> str:
    lines = [f"# Fault run, seed {record.seed}: {'valid' if record.valid else 'INVALID'}", "",
             f"Faults drawn from: {', '.join(record.faults)}; {len(record.schedule)} applied "
             f"over {record.duration_s:.0f} s; {operations} operations recorded.", "",
             "| at s | fault | on | duration s |", "| ---: | --- | --- | ---: |"]
    for fault in record.schedule:
        hosts = fault.get("applied_to") or fault.get("hosts", [])
        lines.append(f"| {float(fault.get('at_s', 0)):.1f} | {fault.get('kind')} | "
                     f"{', '.join(map(str, hosts))} | {float(fault.get('duration_s', 0)):.1f} |")
    lines += ["", "| workload | verdict | checked | anomalies |", "| --- | --- | --- | --- |"]
    for verdict in record.verdicts:
        stats = ", ".join(f"{k} {v}" for k, v in verdict.stats.items())
        found = ", ".join(f"{kind} ({len(examples)})"
                          for kind, examples in verdict.anomalies.items() if examples)
        lines.append(f"| {verdict.workload} | {'valid' if verdict.valid else 'INVALID'} | "
                     f"{stats} | {found or 'none'} |")
    for verdict in record.verdicts:
        for kind, examples in verdict.anomalies.items():
            if examples:
                lines += ["", f"## {verdict.workload}: {kind}", ""]
                lines += [f"- `{json.dumps(e, default=str)}`" for e in examples[:EXAMPLES_SHOWN]]
    return "\n".join(lines) + "\n"


def read(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A written run's ``run.json`` and verdicts."""
    return (json.loads((out / "run.json").read_text()),
            json.loads((out / "verdicts.json").read_text()))


def matrix(runs: Iterable[Path], fault_classes: Sequence[str],
           workloads: Sequence[str]) -> str:
    """A Markdown table: for each fault class and workload, how many runs that drew from the
    class held (``valid``) out of how many ran."""
    held: dict[tuple[str, str], list[bool]] = {}
    for out in runs:
        run, verdicts = read(out)
        for verdict in verdicts:
            for fault in run["faults"]:
                held.setdefault((fault, verdict["workload"]), []).append(bool(verdict["valid"]))
    lines = ["| fault | " + " | ".join(workloads) + " |",
             "| --- |" + " --- |" * len(workloads)]
    for fault in fault_classes:
        cells = []
        for workload in workloads:
            results = held.get((fault, workload), [])
            cells.append(f"{sum(results)}/{len(results)} valid" if results else "not run")
        lines.append(f"| {fault} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
