"""Transactions in the benchmark (issue 15's bar): the same produce workload with the
idempotent producer and with a transactional one committing every ``--transaction-ms``, then a
transactional topic consumed read_uncommitted and read_committed. Targets: transactional
produce at least 80% of idempotent MB/s, read_committed consume at least 90% of
read_uncommitted, in the same run.

Phases run in ABBA order (idempotent, transactional, transactional, idempotent; likewise for
the two isolation levels) and the shares compare the means, and the page cache's dirty data is
written out (``os.sync``) before each phase: on one machine a phase is otherwise slowed by the
writeback of the one before it, which a fixed order would charge to one mode only."""

from __future__ import annotations

import dataclasses
import os
import statistics
from collections.abc import Callable

from bench.config import BenchConfig
from bench.stats import PhaseResult

# Run one workload (its config) and return its phases.
Runner = Callable[[BenchConfig], list[PhaseResult]]
ABBA = (0, 1, 1, 0)


def compare(cfg: BenchConfig, run: Runner) -> list[PhaseResult]:
    assert cfg.transaction_ms is not None
    producers = (dataclasses.replace(cfg, transaction_ms=None, producer_overrides={
                     "enable.idempotence": "true", **cfg.producer_overrides}),
                 cfg)
    produce_names = ("produce (idempotent)",
                     f"produce (transactional, {cfg.transaction_ms:g} ms)")
    produced: list[PhaseResult] = []
    for round_no, which in enumerate(ABBA):
        topic = f"{cfg.topic}-{'transactional' if which else 'idempotent'}-{round_no}"
        os.sync()
        (result,) = run(dataclasses.replace(producers[which], topic=topic, mode="produce"))
        result.phase = f"{produce_names[which]} #{round_no + 1}"
        result.extra["mode"] = which
        produced.append(result)
    levels = ("read_uncommitted", "read_committed")
    consumed: list[PhaseResult] = []
    for round_no, which in enumerate(ABBA):
        os.sync()
        (result,) = run(dataclasses.replace(cfg, topic=f"{cfg.topic}-transactional-1",
                                            mode="consume", transaction_ms=None,
                                            isolation_level=levels[which]))
        result.phase = f"consume ({levels[which]}) #{round_no + 1}"
        result.extra["mode"] = which
        consumed.append(result)
    _share(produced, "transactional", "idempotent", "share_of_idempotent")
    _share(consumed, "read_committed", "read_uncommitted", "share_of_read_uncommitted")
    return produced + consumed


def _share(results: list[PhaseResult], name: str, base_name: str, key: str) -> None:
    """Note on the last phase the mean MB/s of mode 1 as a share of mode 0's."""
    base = statistics.mean(r.mb_per_s for r in results if r.extra["mode"] == 0)
    other = statistics.mean(r.mb_per_s for r in results if r.extra["mode"] == 1)
    if base > 0:
        share = 100 * other / base
        results[-1].notes.append(f"{name}: mean {other:.1f} MB/s = {share:.0f}% of "
                                 f"{base_name}'s mean {base:.1f} MB/s (ABBA order, same run)")
        results[-1].extra[key] = round(share / 100, 3)
