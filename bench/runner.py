"""Run the phases, spreading producers and consumers over spawned processes."""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import time
import traceback
from collections.abc import Callable
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any

from bench.config import BenchConfig
from bench.consume import Range, run_consumer
from bench.e2e import run_tail_consumer
from bench.produce import run_producer
from bench.progress import phase_progress
from bench.stats import PhaseResult, WorkerResult, aggregate
from bench.topic import BenchError

START_GRACE_S = 120.0  # time for spawned processes to import, connect and reach the barrier


def _child(results: Any, index: int, fn: Callable[..., WorkerResult],
           args: tuple[Any, ...]) -> None:
    try:
        results.put((index, fn(*args), None))
    except BaseException:
        results.put((index, None, traceback.format_exc()))


class _Pool:
    """A handful of spawned processes, each running one worker function."""

    def __init__(self) -> None:
        self.ctx: SpawnContext = mp.get_context("spawn")
        self.results: Any = self.ctx.Queue()
        self.procs: dict[int, SpawnProcess] = {}

    def start(self, index: int, fn: Callable[..., WorkerResult], *args: Any) -> None:
        proc = self.ctx.Process(target=_child, args=(self.results, index, fn, args),
                                name=f"bench-{fn.__name__}-{index}", daemon=True)
        proc.start()
        self.procs[index] = proc

    def collect(self, indexes: list[int], timeout: float) -> dict[int, WorkerResult]:
        got: dict[int, WorkerResult] = {}
        deadline = time.monotonic() + timeout
        died_at: dict[int, float] = {}
        while len(got) < len(indexes):
            if time.monotonic() > deadline:
                self.stop()
                raise BenchError(f"worker processes {sorted(set(indexes) - set(got))} "
                                 f"did not finish in {timeout:.0f} s")
            try:
                index, result, error = self.results.get(timeout=0.5)
            except queue_mod.Empty:
                for i in indexes:
                    proc = self.procs[i]
                    if i in got or proc.exitcode is None:
                        continue
                    # give its queued result a moment to arrive before calling it dead
                    if time.monotonic() - died_at.setdefault(i, time.monotonic()) > 5:
                        self.stop()
                        raise BenchError(
                            f"worker process {i} exited with code {proc.exitcode}") from None
                continue
            if error is not None:
                self.stop()
                raise BenchError(f"worker process {index} failed:\n{error}")
            got[index] = result
        return got

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.is_alive():
                proc.terminate()
        for proc in self.procs.values():
            proc.join(timeout=10)

    def join(self) -> None:
        for proc in self.procs.values():
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()


def _phase_timeout(cfg: BenchConfig) -> float:
    return START_GRACE_S + cfg.timeout_s + (cfg.duration_limit() or 0.0) + 60.0


def split_count(total: int | None, parts: int) -> list[int | None]:
    """Split total messages over parts workers as evenly as possible."""
    if total is None:
        return [None] * parts
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def produce_phase(cfg: BenchConfig, show_progress: bool = False) -> PhaseResult:
    """Produce with cfg.producers processes (in this process when there is one)."""
    counts = split_count(cfg.message_limit(), cfg.producers)
    with phase_progress(show_progress, "produce", cfg.producers, cfg.message_limit(),
                        cfg.duration_limit()) as counters:
        if cfg.producers == 1:
            results = [run_producer(cfg, 0, counts[0], None, None, counters)]
        else:
            pool = _Pool()
            barrier = pool.ctx.Barrier(cfg.producers)
            for i, count in enumerate(counts):
                pool.start(i, run_producer, cfg, i, count, barrier, None, counters)
            got = pool.collect(list(range(cfg.producers)), _phase_timeout(cfg))
            pool.join()
            results = [got[i] for i in range(cfg.producers)]
    phase = aggregate("produce", results, "produce() -> delivery report")
    phase.extra["sent"] = sum(int(r.extra.get("sent", 0)) for r in results)
    return phase


def split_ranges(ranges: list[Range], parts: int) -> list[list[Range]]:
    """Deal the partitions out round-robin over parts workers."""
    return [ranges[i::parts] for i in range(parts)]


def consume_phase(cfg: BenchConfig, ranges: list[Range],
                  show_progress: bool = False) -> PhaseResult:
    """Consume the ranges with cfg.consumers processes (in this process when there is one)."""
    workers = max(1, min(cfg.consumers, len(ranges)))
    shares = split_ranges(ranges, workers)
    expected = sum(end - first for _, first, end in ranges)
    with phase_progress(show_progress, "consume", workers, expected) as counters:
        if workers == 1:
            results = [run_consumer(cfg, 0, shares[0], None, counters)]
        else:
            pool = _Pool()
            barrier = pool.ctx.Barrier(workers)
            for i, share in enumerate(shares):
                pool.start(i, run_consumer, cfg, i, share, barrier, counters)
            got = pool.collect(list(range(workers)), _phase_timeout(cfg))
            pool.join()
            results = [got[i] for i in range(workers)]
    phase = aggregate("consume", results)
    phase.extra["expected"] = sum(end - first for _, first, end in ranges)
    if workers != cfg.consumers:
        phase.notes.append(f"{cfg.consumers} consumers asked, {workers} used "
                           f"(one partition is read by one consumer)")
    return phase


def e2e_phase(cfg: BenchConfig, starts: list[tuple[int, int]],
              show_progress: bool = False) -> list[PhaseResult]:
    """One paced producer process and one tailing consumer process."""
    pool = _Pool()
    ready = pool.ctx.Event()
    expected = pool.ctx.Value("q", -1)
    msgs_per_s = cfg.rate_mb * 1e6 / cfg.message_size
    warmup_messages = int(cfg.warmup_s * msgs_per_s)
    limit = cfg.message_limit()
    with phase_progress(show_progress, "e2e", 2, limit, cfg.duration_limit(),
                        count_slots=[1]) as counters:
        pool.start(1, run_tail_consumer, cfg, starts, ready, expected, warmup_messages,
                   counters)
        deadline = time.monotonic() + START_GRACE_S
        while not ready.wait(0.5):
            if time.monotonic() > deadline or pool.procs[1].exitcode is not None:
                pool.collect([1], 5.0)  # surfaces the consumer's error, if it posted one
                pool.stop()
                raise BenchError("the tailing consumer did not start")
        pool.start(0, run_producer, cfg, 0, limit, None, cfg.rate_mb, counters)
        produced = pool.collect([0], _phase_timeout(cfg))[0]
        expected.value = produced.messages
        consumed = pool.collect([1], _phase_timeout(cfg))[1]
        pool.join()
    prod = aggregate("e2e-produce", [produced], "produce() -> delivery report")
    prod.extra["target_mb_per_s"] = cfg.rate_mb
    e2e = aggregate("e2e", [consumed], "produce() -> consumed")
    e2e.extra.update(consumed.extra)
    e2e.extra["warmup_messages_excluded"] = warmup_messages
    return [prod, e2e]
