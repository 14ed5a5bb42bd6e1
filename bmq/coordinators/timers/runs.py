"""The timer's index on storage: sorted runs of (due time, timer log offset) entries.

Every few seconds the entries the timer accepted since the last run are written, sorted, as one
immutable object (a file, or an S3 object): a run. A run is read forward as time passes, one
window at a time, so memory holds only each run's read position and a sparse index (the due
time of every ``BLOCK``-th entry), never its entries: pending records cost storage, not memory.
So that the number of runs stays bounded too (a timer that takes records for weeks writes a
run every few seconds), the smallest runs are merged into one (``merge_runs``).

File layout (big-endian): magic, entry count, the last entry (due, offset), the smallest
timer log offset, the sparse index (one int64 per block), then the entries, 16 bytes each
(due, offset), sorted.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import pairwise

from bmq.coordinators.timers._timerrec import merge_entries, sort_entries
from bmq.storage import Storage

BLOCK = 4096
MAGIC = b"BMQTRUN1"
_HEAD = struct.Struct(">8sqqqq")
_ENTRY = struct.Struct(">qq")
_DUE = struct.Struct(">q")
Entry = tuple[int, int]          # (due ms, timer log offset)


@dataclass(slots=True)
class Run:
    path: str
    count: int
    last: Entry
    min_offset: int
    block_dues: array[int]       # an array, not an int object each: runs live for weeks
    # The next entry to load into the timer's window (those before it are loaded or delivered),
    # and a lower bound of its due time (how the window skips runs with nothing to give).
    position: int = 0
    next_due: int = field(default=0)

    @property
    def exhausted(self) -> bool:
        return self.position >= self.count

    def _entries_at(self) -> int:
        return _HEAD.size + 8 * len(self.block_dues)

    def seek(self, due: int) -> None:
        """Start loading at the block holding the first entry due at ``due`` or later."""
        block = max(0, bisect_left(self.block_dues, due) - 1)
        self.position = block * BLOCK
        self.next_due = self.block_dues[block] if self.block_dues else 0


def write_run(storage: Storage, path: str, keys: array[int], after: Entry,
              load_from: int) -> Run | None:
    """Write the entries of ``keys`` (flat (due, offset) pairs) past ``after`` (what is not
    delivered yet), sorted, as a run whose loading starts at the first entry due at
    ``load_from`` or later; None if there is nothing to write. Worker thread; the sort is C,
    without the GIL."""
    entries, min_offset = sort_entries(keys, *after)
    if not entries:
        return None
    return _write(storage, path, entries, min_offset, load_from)


def merge_runs(storage: Storage, path: str, runs: list[Run], after: Entry,
               load_from: int) -> Run | None:
    """Merge ``runs`` into one run (their entries past ``after``), written at ``path``, whose
    loading starts at the first entry due at ``load_from`` or later (the entries due before
    it were loaded from the merged runs already); None if none is left. The caller names the
    new run in the state document before deleting the old ones: a crash in between leaves
    either set whole. Worker thread; the merge itself is C, without the GIL."""
    merged, min_offset = merge_entries(
        [storage.read_range(run.path, run._entries_at(), run.count * _ENTRY.size)
         for run in runs], *after)
    if not merged:
        return None
    return _write(storage, path, merged, min_offset, load_from)


def smallest_runs(runs: list[Run], most: int, entries: int) -> list[Run]:
    """The smallest runs, at most ``most`` of them and ``entries`` entries together: the next
    merge (fewer than two: none)."""
    chosen: list[Run] = []
    for run in sorted(runs, key=lambda run: run.count):
        if len(chosen) == most or sum(r.count for r in chosen) + run.count > entries:
            break
        chosen.append(run)
    return chosen


def _write(storage: Storage, path: str, entries: bytes, min_offset: int,
           load_from: int) -> Run:
    count = len(entries) // _ENTRY.size
    blocks = array("q", (_DUE.unpack_from(entries, i * _ENTRY.size)[0]
                         for i in range(0, count, BLOCK)))
    last = _ENTRY.unpack_from(entries, (count - 1) * _ENTRY.size)
    body = bytearray(_HEAD.pack(MAGIC, count, *last, min_offset))
    body += struct.pack(f">{len(blocks)}q", *blocks)
    body += entries
    storage.makedirs(path.rsplit("/", 1)[0])
    storage.write_atomic(path, body)
    # The first entry due at load_from or later: from its block on, one entry at a time.
    position = max(0, bisect_left(blocks, load_from) - 1) * BLOCK
    while position < count and _DUE.unpack_from(entries, position * _ENTRY.size)[0] < load_from:
        position += 1
    next_due = _DUE.unpack_from(entries, position * _ENTRY.size)[0] if position < count else 0
    return Run(path, count, last, min_offset, blocks, position, next_due)


def open_run(storage: Storage, path: str) -> Run:
    magic, count, last_due, last_offset, min_offset = _HEAD.unpack(
        storage.read_range(path, 0, _HEAD.size))
    if magic != MAGIC:
        raise ValueError(f"{path} is not a timer run")
    blocks = (count + BLOCK - 1) // BLOCK
    raw = storage.read_range(path, _HEAD.size, 8 * blocks)
    dues = array("q", struct.unpack(f">{blocks}q", raw))
    return Run(path, count, (last_due, last_offset), min_offset, dues, 0,
               dues[0] if dues else 0)


def count_due(storage: Storage, run: Run, position: int, bounds: list[int]) -> list[int]:
    """How many of the run's entries from ``position`` on are due before ``bounds[0]``,
    between each bound and the next, and at the last or later (``len(bounds) + 1`` counts):
    at most one block read per bound. Worker thread."""
    edges = [max(position, _first_due_at(storage, run, bound)) for bound in bounds]
    edges = [position, *edges, max(position, run.count)]
    return [high - low for low, high in pairwise(edges)]


def _first_due_at(storage: Storage, run: Run, due: int) -> int:
    """The index of the run's first entry due at ``due`` or later (its count: none is)."""
    block = bisect_left(run.block_dues, due)     # the first block starting at ``due`` or later
    if block == 0:
        return 0
    start, stop = (block - 1) * BLOCK, min(run.count, block * BLOCK)
    raw = storage.read_range(run.path, run._entries_at() + start * _ENTRY.size,
                             (stop - start) * _ENTRY.size)
    for index, (entry_due, _) in enumerate(_ENTRY.iter_unpack(raw)):
        if entry_due >= due:
            return start + index
    return stop


def load_window(storage: Storage, run: Run, end: int) -> list[Entry]:
    """The run's next entries due before ``end``; moves its position past them."""
    if run.exhausted or run.next_due >= end:
        return []
    # Blocks before ``last_block`` start before ``end``: read through the last of them.
    last_block = bisect_left(run.block_dues, end)
    stop = min(run.count, max(last_block, run.position // BLOCK + 1) * BLOCK)
    raw = storage.read_range(run.path, run._entries_at() + run.position * _ENTRY.size,
                             (stop - run.position) * _ENTRY.size)
    out: list[Entry] = []
    for due, offset in _ENTRY.iter_unpack(raw):
        if due >= end:
            run.next_due = due
            return out
        out.append((due, offset))
        run.position += 1
    if not run.exhausted:     # read through a whole block: the next one starts here
        run.next_due = run.block_dues[run.position // BLOCK]
    return out
