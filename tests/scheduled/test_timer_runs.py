"""The timer's index on storage, in process on a local directory: with runs written every
0.1 s and nothing kept in memory past them, records come back from runs and from the timer log,
survive a hand-over (close, reopen) in the middle, and are delivered once each, in due order."""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from array import array
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bmq.coordinators.timers import TimerService, wheel
from bmq.coordinators.timers.runs import load_window, merge_runs, open_run, write_run
from bmq.protocol.record_codec import Record, encode_batch, iter_records
from bmq.protocol.records import read_header
from bmq.storage import LogConfig
from bmq.storage.local import LocalStorage
from bmq.writepath.partitions import PartitionManager, now_ms

CONFIG = LogConfig(delay_enable=True)


def pairs(entries: list[tuple[int, int]]) -> array[int]:
    """Entries as the timer keeps them before a run: flat (due, offset) pairs."""
    return array("q", itertools.chain.from_iterable(entries))


def test_runs_load_window_by_window(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    rng = random.Random(3)
    entries = sorted((rng.randint(0, 100_000), offset) for offset in range(20_000))
    write_run(storage, "__bmq_timers/t/0/run.a", pairs(entries), (-1, -1), 0)
    run = open_run(storage, "__bmq_timers/t/0/run.a")
    loaded = []
    for end in [*range(0, 100_001, 997), 100_001]:
        got = load_window(storage, run, end)
        assert all(due < end for due, _ in got)
        loaded += got
    assert loaded == entries and run.exhausted
    run.seek(50_000)       # a restart: from the block before the first entry due then
    assert run.position <= next(i for i, e in enumerate(entries) if e[0] >= 50_000)


def test_merged_runs_hold_what_was_not_delivered(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    rng = random.Random(5)
    parts = [[(rng.randint(0, 50_000), offset) for offset in range(first, 30_000, 3)]
             for first in range(3)]
    runs = [write_run(storage, f"__bmq_timers/t/0/run.{i}", pairs(part), (-1, -1), 0)
            for i, part in enumerate(parts)]
    delivered = (20_000, 7)
    merged = merge_runs(storage, "__bmq_timers/t/0/run.m", runs, delivered, 30_000)  # type: ignore[arg-type]
    assert merged is not None
    expected = sorted(e for part in parts for e in part if e > delivered)
    assert (merged.count, merged.last, merged.min_offset) == (
        len(expected), expected[-1], min(o for _, o in expected))
    # Entries due before 30,000 were loaded from the old runs already: loading starts after.
    assert merged.position == next(i for i, e in enumerate(expected) if e[0] >= 30_000)
    reopened = open_run(storage, merged.path)
    loaded = load_window(storage, reopened, 60_000)
    assert loaded == expected


async def _scenario(tmp_path: Path) -> list[Record]:
    storage = LocalStorage(str(tmp_path))
    pool = ThreadPoolExecutor(4)

    async def producer_id() -> int:
        return 4242

    def open_manager() -> tuple[PartitionManager, TimerService]:
        manager = PartitionManager(storage, pool)
        return manager, TimerService(manager, storage, pool, producer_id)

    manager, timers = open_manager()
    partition = await manager.open("t", 0, CONFIG)
    start = now_ms()
    for i in range(40):
        records = [Record(0, start, f"k{i}-{j}".encode(), f"v{i}-{j}".encode(),
                          [("bmq.deliver.at", str(start + 1000 + (i * 37 + j * 11) % 1500)
                            .encode())]) for j in range(5)]
        batch, _ = encode_batch(records)
        view = memoryview(batch)
        held = timers.timer(partition).hold(view, [read_header(view)], now_ms())  # type: ignore[union-attr]
        assert held is not None
        await held[1]
        await asyncio.sleep(0.02)      # a run every few batches
    await asyncio.sleep(0.9)           # some delivered, the rest in runs
    await manager.close("t", 0)        # a hand-over: the state is written
    manager, timers = open_manager()
    partition = await manager.open("t", 0, CONFIG)
    deadline = time.monotonic() + 10
    while partition.log.high_watermark < 200 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.5)           # the next progress write drops what was delivered
    data = partition.log.read(0, 1 << 24)
    timer_log = timers.timer(partition).timer_log.log  # type: ignore[union-attr]
    assert timer_log.log_start_offset == timer_log.high_watermark == 200
    assert not [name for name in storage.list("__bmq_timers/t/0") if "run." in name]
    await manager.close("t", 0)
    pool.shutdown()
    return list(iter_records(data))


def test_records_come_back_from_runs_and_survive_a_handover(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "bmq.coordinators.timers.timer")
    monkeypatch.setattr(wheel, "RUN_INTERVAL_S", 0.1)
    monkeypatch.setattr(wheel, "KEEP_MS", 0)
    monkeypatch.setattr(wheel, "LOOKAHEAD_MS", 100)
    monkeypatch.setattr(wheel, "WINDOW_MS", 100)
    monkeypatch.setattr(wheel, "STATE_INTERVAL_S", 0.2)
    monkeypatch.setattr(wheel, "MAX_RUNS", 2)     # runs are merged all along
    records = asyncio.run(_scenario(tmp_path))
    # The reopened timer had records both delivered and pending, and runs to read them from.
    reopened = [r.args for r in caplog.records if "pending" in r.msg][-1]
    assert isinstance(reopened, tuple)
    _, _, pending, delivered, runs = reopened
    assert pending and delivered and 0 < runs <= 2, reopened
    values = [r.value for r in records]
    assert sorted(values) == sorted(f"v{i}-{j}".encode() for i in range(40) for j in range(5))
    dues = [int(dict(r.headers)["bmq.deliver.at"] or b"0") for r in records]
    assert dues == sorted(dues)
    assert all(r.timestamp >= 0 and dict(r.headers).get("bmq.scheduled.at") for r in records)


def test_a_reopened_partition_gets_a_timer_of_its_own(tmp_path: Path) -> None:
    """A partition abandoned while its timer was still loading (a fault run: taken, fenced by
    a newer epoch at once, taken again) left that timer registered, stopped; the next opening
    got it back from ``start`` and its pending records were never delivered."""
    async def scenario() -> None:
        storage = LocalStorage(str(tmp_path))
        with ThreadPoolExecutor(2) as pool:
            async def producer_id() -> int:
                return 4242

            manager = PartitionManager(storage, pool)
            timers = TimerService(manager, storage, pool, producer_id)
            first = await manager.open("t", 0, CONFIG, leader_epoch=1)
            stale = timers.timer(first)
            assert stale is not None
            first.abandon()      # as if the hooks had run before the timer was registered
            second = await manager.open_unlisted("t", 0, CONFIG, leader_epoch=2)
            timer = await timers.start(second)
            assert timer is not stale and timer.partition is second
            assert timers.timer(second) is timer
            await timer.close()
            await asyncio.get_running_loop().run_in_executor(pool, second.log.close)

    asyncio.run(scenario())
