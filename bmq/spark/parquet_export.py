"""Incremental, crash-safe conversion of BMQ partitions to Parquet (the Parquet export job,
``spark_jobs/export_to_parquet.py``).

Layout under the output root::

    _bmq_manifest.json                                   the commit record (see below)
    topic=T/partition=P/date=YYYY-MM-DD/part-S-E.parquet records of offsets [S, E) of that day
    topic=T/partition=P/date=YYYY-MM-DD/compacted-E.parquet   (--compact-keys) a snapshot

Files hold ``key, value, offset, timestamp, timestampType, headers``; topic, partition and date
come from the directory names (Hive partitioning, as Spark and pyarrow.dataset read it).

Work is cut into units: contiguous offset ranges of one partition of at most ``max_unit_bytes``
of segment data (with ``compact_keys``: everything new of one partition, merged with the
partition's previous snapshot). Each unit is one Spark task that writes its files under hidden
temporary names (``.NAME.TOKEN.tmp``); the driver then commits units one by one:

1. add the unit (its offset range, its files' final and temporary names) to the manifest and
   replace the manifest atomically (write a temporary file, then rename it over): the commit;
2. rename the unit's temporary files to their final names;
3. (compact mode) delete the snapshot files the commit replaced.

On every start the job first repairs the output: a committed file still under its temporary
name is renamed (step 2 rolled forward), and every file of ours that the manifest does not
reference (temporary files of uncommitted units, replaced snapshots) is deleted. A job killed at
any point and rerun therefore converts each offset exactly once: no duplicates, no gaps. The
manifest's converted ranges are also what makes a rerun incremental.

The output root, the manifest and the repair live in ``parquet_output``; this module plans
units, converts them in Spark tasks and commits them.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TextIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bmq.spark.decode import read_range
from bmq.spark.parquet_output import MANIFEST, FileEntry, Manifest, Output, recover
from bmq.spark.planning import split_partition, topic_not_found
from bmq.spark.ranges import ReadRange
from bmq.storage.factory import open_storage
from bmq.storage.log.durable import list_partitions, open_durable
from bmq.storage.partitions_root import partitions_root_url

FILE_COLUMNS = ["key", "value", "offset", "timestamp", "timestampType", "headers"]
DEFAULT_UNIT_BYTES = 128 << 20
CRASH_ENV = "BMQ_PARQUET_EXPORT_CRASH_AT"   # test hook: SIGKILL ourselves at a named commit step


def crash_point(name: str) -> None:
    """Die abruptly at a commit step when the test hook asks for it."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


# ------------------------------------------------------------------------------ tasks
@dataclass(frozen=True)
class TaskConfig:
    storage: str
    storage_options: dict[str, str]
    output: str
    compression: str
    verify_crc: bool


@dataclass(frozen=True)
class Unit:
    topic: str
    partition: int
    ranges: tuple[ReadRange, ...]
    intervals: tuple[tuple[int, int], ...]   # offset intervals converted by this unit
    compact: bool = False                    # merge with ``previous``, keep latest per key
    previous: tuple[str, ...] = ()           # the partition's current snapshot files

    @property
    def start(self) -> int:
        return self.intervals[0][0]

    @property
    def end(self) -> int:
        return self.intervals[-1][1]

    @property
    def size(self) -> int:
        return sum(r.size for r in self.ranges)

    @property
    def segments(self) -> set[tuple[str, int, int]]:
        return {(self.topic, self.partition, r.segment) for r in self.ranges}


def _file_schema() -> pa.Schema:
    from bmq.spark.decode import ARROW_SCHEMA

    return pa.schema([ARROW_SCHEMA.field(c) for c in FILE_COLUMNS])


class _DateWriters:
    """One Parquet file per day (UTC) of record timestamps, under temporary names."""

    def __init__(self, out: Output, unit: Unit, name: str, compression: str) -> None:
        self.out = out
        self.unit = unit
        self.name = name
        self.compression = compression
        self.token = uuid.uuid4().hex[:12]
        self.schema = _file_schema()
        self.open: dict[str, tuple[Any, Any, FileEntry]] = {}

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        table = pa.Table.from_batches([batch]).select(FILE_COLUMNS)
        days = pc.cast(table["timestamp"], pa.date32())
        lo, hi = pc.min(days).as_py(), pc.max(days).as_py()
        if lo == hi:
            self._write_day(lo.isoformat(), table)
            return
        for day in pc.unique(days).to_pylist():
            self._write_day(day.isoformat(), table.filter(pc.equal(days, pa.scalar(day))))

    def _write_day(self, day: str, table: pa.Table) -> None:
        entry = self.open.get(day)
        if entry is None:
            d = f"topic={self.unit.topic}/partition={self.unit.partition}/date={day}"
            final = f"{d}/{self.name}"
            tmp = f"{d}/.{self.name}.{self.token}.tmp"
            sink = self.out.open_write(tmp)
            writer = pq.ParquetWriter(sink, self.schema, compression=self.compression)
            entry = (writer, sink, FileEntry(final, tmp, day, 0, -1, -1, 0))
            self.open[day] = entry
        writer, _sink, meta = entry
        writer.write_table(table)
        offsets = table["offset"]
        first, last = pc.min(offsets).as_py(), pc.max(offsets).as_py()
        meta.first_offset = first if meta.first_offset < 0 else min(meta.first_offset, first)
        meta.last_offset = max(meta.last_offset, last)
        meta.rows += table.num_rows

    def close(self) -> list[FileEntry]:
        files = []
        for writer, sink, meta in self.open.values():
            writer.close()
            sink.close()
            self.out.sync(meta.tmp)
            meta.bytes = int(self.out.fs.size(self.out.path(meta.tmp)))
            files.append(meta)
        return sorted(files, key=lambda f: f.date)


def _compact(table: pa.Table) -> pa.Table:
    """Kafka's compaction rule: per key the record with the highest offset, dropped when its
    value is null (a tombstone). Records without a key cannot be superseded and are kept."""
    if table.num_rows == 0:
        return table
    keyed = table.filter(pc.is_valid(table["key"]))
    latest = keyed.group_by("key").aggregate([("offset", "max")])["offset_max"]
    keep = pc.or_(pc.is_in(table["offset"], value_set=latest), pc.is_null(table["key"]))
    survivors = table.filter(keep)
    survivors = survivors.filter(pc.or_(pc.is_valid(survivors["value"]),
                                        pc.is_null(survivors["key"])))
    return survivors.sort_by("offset")


def convert_unit(unit: Unit, cfg: TaskConfig) -> dict[str, Any]:
    """The Spark task: decode the unit's ranges and write its files (temporary names)."""
    started = time.monotonic()
    storage = open_storage(cfg.storage, cfg.storage_options or None)
    out = Output(cfg.output)
    records = 0
    try:
        def batches() -> Iterator[pa.RecordBatch]:
            for rng in unit.ranges:
                yield from read_range(storage, rng, verify_crc=cfg.verify_crc)

        if not unit.compact:
            writers = _DateWriters(out, unit, f"part-{unit.start:020d}-{unit.end:020d}.parquet",
                                   cfg.compression)
            for batch in batches():
                records += batch.num_rows
                writers.write(batch)
        else:
            writers = _DateWriters(out, unit, f"compacted-{unit.end:020d}.parquet",
                                   cfg.compression)
            parts = [pq.ParquetFile(out.fs.open(out.path(p), "rb")).read()
                     for p in unit.previous]
            schema = _file_schema()
            new = [pa.Table.from_batches([b]).select(FILE_COLUMNS) for b in batches()]
            records = sum(t.num_rows for t in new)
            merged = pa.concat_tables([t.cast(schema) for t in [*parts, *new]]) \
                if parts or new else schema.empty_table()
            for batch in _compact(merged).to_batches(max_chunksize=65536):
                writers.write(batch)
        files = writers.close()
    finally:
        storage.close()
    return {"files": [asdict(f) for f in files], "records": records,
            "seconds": time.monotonic() - started}


# ------------------------------------------------------------------------------ the job
@dataclass
class JobConfig:
    storage: str
    topics: list[str]
    output: str
    compact_keys: bool = False
    partitions: list[int] | None = None
    max_unit_bytes: int = DEFAULT_UNIT_BYTES
    compression: str = "snappy"
    storage_options: dict[str, str] = field(default_factory=dict)
    verify_crc: bool = True
    pause_after_commit: float = 0.0   # test hook: widen the window between commits
    # As the data source's: only committed transactions (up to the last stable offset),
    # unless read_uncommitted.
    read_committed: bool = True


def _subtract(start: int, end: int, done: list[list[int]]) -> list[tuple[int, int]]:
    todo = []
    pos = start
    for s, e in sorted(done):
        if e <= pos:
            continue
        if s >= end:
            break
        if s > pos:
            todo.append((pos, s))
        pos = max(pos, e)
    if pos < end:
        todo.append((pos, end))
    return todo


def plan_units(cfg: JobConfig, manifest: Manifest,
               log: Callable[[str], None]) -> list[Unit]:
    storage = open_storage(cfg.storage, cfg.storage_options or None)
    units: list[Unit] = []
    try:
        for topic in cfg.topics:
            existing = list_partitions(storage, topic)
            if not existing:
                raise topic_not_found(storage, topic)
            chosen = existing if cfg.partitions is None else cfg.partitions
            missing = sorted(set(chosen) - set(existing))
            if missing:
                raise ValueError(f"topic {topic!r} has no partitions {missing}")
            for partition in chosen:
                view = open_durable(storage, topic, partition)
                state = manifest.state(topic, partition)
                converted_end = max((e for _s, e in state.ranges), default=None)
                if converted_end is not None and converted_end < view.log_start_offset:
                    log(f"warning: {topic}-{partition} offsets {converted_end}-"
                        f"{view.log_start_offset} were deleted from the log before they were "
                        f"converted")
                todo = _subtract(view.log_start_offset, view.end(cfg.read_committed),
                                 state.ranges)
                if cfg.compact_keys:
                    if not todo:
                        continue
                    ranges = tuple(r for s, e in todo for r in
                                   split_partition(storage, view, s, e, cfg.max_unit_bytes,
                                                   cfg.read_committed))
                    units.append(Unit(topic, partition, ranges, tuple(todo), True,
                                      tuple(f.path for f in state.files)))
                    continue
                for s, e in todo:
                    group: list[ReadRange] = []
                    for rng in split_partition(storage, view, s, e, cfg.max_unit_bytes,
                                                   cfg.read_committed):
                        if group and sum(r.size for r in group) + rng.size > cfg.max_unit_bytes:
                            units.append(_append_unit(topic, partition, group))
                            group = []
                        group.append(rng)
                    if group:
                        units.append(_append_unit(topic, partition, group))
    finally:
        storage.close()
    return units


def _append_unit(topic: str, partition: int, group: list[ReadRange]) -> Unit:
    return Unit(topic, partition, tuple(group),
                ((group[0].start_offset, group[-1].end_offset),))


@dataclass
class Progress:
    units: int
    segments: int
    bytes: int
    started: float = field(default_factory=time.monotonic)
    units_done: int = 0
    segments_done: int = 0
    bytes_done: int = 0
    records: int = 0
    files: int = 0

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        pct = 100.0 * self.bytes_done / self.bytes if self.bytes else 100.0
        return (f"{self.units_done}/{self.units} units, {self.segments_done}/{self.segments} "
                f"segments, {self.bytes_done / 1e6:.1f}/{self.bytes / 1e6:.1f} MB ({pct:.0f}%), "
                f"{self.records} records, {self.bytes_done / 1e6 / elapsed:.1f} MB/s")


def run(spark: Any, cfg: JobConfig, stream: TextIO | None = None) -> dict[str, Any]:
    """Convert what is new, commit unit by unit, report progress; return the summary."""
    stream = stream if stream is not None else sys.stderr

    def log(msg: str) -> None:
        print(f"[bmq-parquet-export] {msg}", file=stream, flush=True)

    started = time.monotonic()
    cfg = replace(cfg, storage=partitions_root_url(cfg.storage, cfg.storage_options or None))
    out = Output(cfg.output)
    mode = "compact-keys" if cfg.compact_keys else "append"
    manifest = recover(out, log) or Manifest(mode=mode)
    if manifest.mode != mode and manifest.referenced():
        raise ValueError(f"{cfg.output} holds {manifest.mode} output; it cannot be continued "
                         f"in {mode} mode")
    manifest.mode = mode
    units = plan_units(cfg, manifest, log)
    seg_units: dict[tuple[str, int, int], int] = {}
    for unit in units:
        for seg in unit.segments:
            seg_units[seg] = seg_units.get(seg, 0) + 1
    progress = Progress(len(units), len(seg_units), sum(u.size for u in units))
    log(f"{mode}: {progress.units} unit(s) over {progress.segments} segment(s), "
        f"{progress.bytes / 1e6:.1f} MB of segment data to convert to {cfg.output}")
    task_cfg = TaskConfig(cfg.storage, cfg.storage_options, cfg.output, cfg.compression,
                          cfg.verify_crc)
    sc = spark.sparkContext
    workers = max(1, int(sc.defaultParallelism))

    def submit(unit: Unit) -> dict[str, Any]:
        sc.setJobDescription(f"bmq-parquet-export {unit.topic}-{unit.partition} "
                             f"[{unit.start}, {unit.end})")
        result: dict[str, Any] = sc.parallelize([unit], 1).map(
            lambda u: convert_unit(u, task_cfg)).collect()[0]
        return result

    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bmq-parquet-export") as pool:
        pending: dict[Future[dict[str, Any]], Unit] = {}
        queue = list(units)
        try:
            while queue or pending:
                while queue and len(pending) < workers:
                    unit = queue.pop(0)
                    pending[pool.submit(submit, unit)] = unit
                done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for fut in done:
                    unit = pending.pop(fut)
                    result = fut.result()
                    with lock:
                        _commit(out, manifest, unit, result)
                    progress.units_done += 1
                    progress.bytes_done += unit.size
                    progress.records += int(result["records"])
                    progress.files += len(result["files"])
                    for seg in unit.segments:
                        seg_units[seg] -= 1
                        if seg_units[seg] == 0:
                            progress.segments_done += 1
                    log(f"committed {unit.topic}-{unit.partition} offsets [{unit.start}, "
                        f"{unit.end}): {len(result['files'])} file(s); {progress.line()}")
                    if cfg.pause_after_commit:
                        time.sleep(cfg.pause_after_commit)
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise
    recover(out, log)   # temporary files of retried or speculative task attempts
    elapsed = time.monotonic() - started
    summary = {
        "mode": mode, "units": progress.units, "segments": progress.segments,
        "segment_bytes": progress.bytes, "records": progress.records, "files": progress.files,
        "seconds": round(elapsed, 3),
        "mb_per_s": round(progress.bytes / 1e6 / elapsed, 2) if elapsed > 0 else 0.0,
        "output": cfg.output,
        "committed_files": len(manifest.referenced()),
    }
    log(f"done: {progress.units} unit(s), {progress.segments} segment(s), "
        f"{progress.bytes / 1e6:.1f} MB, {progress.records} records -> {progress.files} "
        f"file(s) in {elapsed:.1f}s ({summary['mb_per_s']} MB/s)")
    return summary


def run_stream(spark: Any, cfg: JobConfig, stop: threading.Event, interval_s: float,
               stream: TextIO | None = None) -> dict[str, Any]:
    """``--stream``: convert what is new, wait ``interval_s`` (or until ``stop``), again, until
    ``stop`` is set. Each round is a rerun of ``run`` (repair, then only offsets the manifest
    does not list), so a stream killed at any point and restarted is exactly as safe as a
    rerun of the batch job. Returns the totals over the rounds."""
    totals: dict[str, Any] = {"mode": "append", "rounds": 0, "units": 0, "segment_bytes": 0,
                              "records": 0, "files": 0}
    started = time.monotonic()
    while True:
        summary = run(spark, cfg, stream)
        totals["rounds"] += 1
        for key in ("units", "segment_bytes", "records", "files"):
            totals[key] += summary[key]
        totals.update(mode=summary["mode"], output=summary["output"],
                      committed_files=summary["committed_files"])
        if stop.wait(interval_s):
            break
    totals["seconds"] = round(time.monotonic() - started, 3)
    return totals


def _commit(out: Output, manifest: Manifest, unit: Unit, result: dict[str, Any]) -> None:
    state = manifest.state(unit.topic, unit.partition)
    files = [FileEntry(**f) for f in result["files"]]
    replaced = state.files if unit.compact else []
    state.files = files if unit.compact else [*state.files, *files]
    for start, end in unit.intervals:
        state.add_range(start, end)
    manifest.commits += 1
    crash_point("before-manifest")
    out.write_atomic(MANIFEST, manifest.to_json())
    crash_point("after-manifest")
    for i, f in enumerate(files):
        out.rename(f.tmp, f.path)
        if i == 0:
            crash_point("mid-rename")
    crash_point("after-rename")
    keep = {f.path for f in files}
    for f in replaced:
        if f.path not in keep:
            out.delete(f.path)
