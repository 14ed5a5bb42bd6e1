"""The fault matrix: workloads on a ``FaultCluster`` under seeded schedules of the issue's fault
classes, each run's verdicts valid. CI runs one short mixed schedule with every workload at once
(a fixed seed: the same schedule each time); the slow set runs each fault class on its own with a
fresh seed (``BMQ_FAULTS_SEED`` repeats one). Reports go to ``BMQ_FAULTS_REPORTS`` if set (the
README's matrix is made from them), else next to the test's files."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.faults.cluster import FaultCluster
from tests.faults.run import FAULT_CLASSES, MIXED, WORKLOADS, run

CI_SEED = 30
CI_DURATION_S = 45.0
SLOW_DURATION_S = 60.0


def _out(tmp_path: Path, name: str) -> Path:
    reports = os.environ.get("BMQ_FAULTS_REPORTS")
    return Path(reports) / name if reports else tmp_path / name


def _assert_valid(out: Path, valid: bool) -> None:
    assert valid, (out / "summary.md").read_text()


def test_a_mixed_schedule_holds_for_every_workload(fault_cluster: FaultCluster,
                                                   tmp_path: Path) -> None:
    out = _out(tmp_path, f"{MIXED}-seed{CI_SEED}")
    record = run(fault_cluster, out, MIXED, sorted(WORKLOADS), CI_SEED, CI_DURATION_S)
    assert len(record.schedule) >= 3, "the schedule applied too few faults to test anything"
    _assert_valid(out, record.valid)


@pytest.mark.slow
@pytest.mark.parametrize("fault_class", sorted(FAULT_CLASSES))
def test_each_fault_class_holds_for_every_workload(fault_cluster: FaultCluster, tmp_path: Path,
                                                   fault_class: str) -> None:
    seed = int(os.environ.get("BMQ_FAULTS_SEED") or random.randrange(1 << 20))
    out = _out(tmp_path, f"{fault_class}-seed{seed}")
    record = run(fault_cluster, out, fault_class, sorted(WORKLOADS), seed, SLOW_DURATION_S)
    _assert_valid(out, record.valid)
