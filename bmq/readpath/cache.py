"""The proxy's record cache: recent record batches of every partition it serves, bounded in bytes
and shared by all consumers, so that a partition's new data is read from storage once however
many consumers tail it.

Entries are runs of whole record batches as storage returned them (opaque bytes: only the
61-byte batch headers are looked at, never a record). A run is indexed by the base offset of each
batch, so a fetch at any offset inside it is answered with a zero-copy slice. Runs of one
partition never overlap; least recently used runs are evicted first.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Hashable

from bmq.protocol.records import HEADER_SIZE, LOG_OVERHEAD

_BASE = struct.Struct(">q")           # base offset at 0
_LENGTH = struct.Struct(">i")         # batch length at 8
_LAST_DELTA = struct.Struct(">i")     # last offset delta at 23


class _Run:
    """Whole batches: their bytes, and each batch's base offset and position."""

    __slots__ = ("bases", "data", "next_offset", "positions")

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = data
        self.bases = array("q")
        self.positions = array("q")
        pos, n = 0, len(data)
        next_offset = -1
        while pos + HEADER_SIZE <= n:
            size = _LENGTH.unpack_from(data, pos + 8)[0] + LOG_OVERHEAD
            if size < HEADER_SIZE or pos + size > n:
                break
            base = _BASE.unpack_from(data, pos)[0]
            self.bases.append(base)
            self.positions.append(pos)
            next_offset = base + _LAST_DELTA.unpack_from(data, pos + 23)[0] + 1
            pos += size
        if pos != n:
            self.data = memoryview(data)[:pos]
        self.next_offset = next_offset

    @property
    def base(self) -> int:
        return self.bases[0]

    def __len__(self) -> int:
        return len(self.data)

    def cut(self, start_offset: int, end_offset: int) -> _Run | None:
        """The batches that start within [start_offset, end_offset), as a run of their own."""
        first = bisect_right(self.bases, start_offset - 1)
        last = bisect_right(self.bases, end_offset - 1)
        if first >= last:
            return None
        if first == 0 and last == len(self.bases):
            return self
        end = self.positions[last] if last < len(self.positions) else len(self.data)
        return _Run(memoryview(self.data)[self.positions[first]:end])


class _Runs:
    """One partition's runs, sorted by base offset (with the bases alongside, for bisection)."""

    __slots__ = ("bases", "runs")

    def __init__(self) -> None:
        self.runs: list[_Run] = []
        self.bases: list[int] = []

    def insert(self, run: _Run) -> None:
        i = bisect_right(self.bases, run.base)
        self.runs.insert(i, run)
        self.bases.insert(i, run.base)

    def remove(self, run: _Run) -> None:
        i = bisect_right(self.bases, run.base) - 1
        del self.runs[i], self.bases[i]


class RecordCache:
    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.size_bytes = 0
        self._parts: dict[Hashable, _Runs] = {}
        self._lru: OrderedDict[tuple[Hashable, int], _Run] = OrderedDict()
        self._rewrites: dict[Hashable, int] = {}    # see follow

    def get(self, key: Hashable, offset: int, max_bytes: int) -> bytes | memoryview | None:
        """Whole batches from the one containing ``offset`` (at least one, then as many as fit
        in ``max_bytes``, following adjacent runs), or None if ``offset`` is not cached."""
        part = self._parts.get(key)
        if part is None:
            return None
        runs = part.runs
        i = bisect_right(part.bases, offset) - 1
        if i < 0 or runs[i].next_offset <= offset:
            return None
        pieces: list[memoryview] = []
        total = 0
        want = offset
        while i < len(runs) and runs[i].base <= want < runs[i].next_offset:
            run = runs[i]
            self._lru.move_to_end((key, run.base))
            j = bisect_right(run.bases, want) - 1
            start = run.positions[j]
            end = start
            k = j
            while k < len(run.bases):
                batch_end = run.positions[k + 1] if k + 1 < len(run.bases) else len(run.data)
                if total + batch_end - start > max_bytes and (total or end > start):
                    break
                end = batch_end
                k += 1
            if end > start:
                pieces.append(memoryview(run.data)[start:end])
                total += end - start
            if k < len(run.bases):
                break          # max_bytes reached inside this run
            want = run.next_offset
            i += 1
        if len(pieces) == 1:
            return pieces[0]
        return b"".join(pieces)

    def follow(self, key: Hashable, rewrites: int) -> int:
        """Note how many times the log cleaner has replaced segments of the log ``key``'s
        batches come from (``LogView.rewrites``); forget them when that changed since they
        were cached (they may be batches the cleaner removed). Returns ``rewrites``."""
        if self._rewrites.setdefault(key, rewrites) != rewrites:
            self.drop(key)
            self._rewrites[key] = rewrites
        return rewrites

    def put(self, key: Hashable, data: bytes | memoryview, rewrites: int) -> int | None:
        """Cache whole batches read from storage when the log had been rewritten ``rewrites``
        times; the parts already cached are left out. Returns the offset after the last batch
        (-1 if ``data`` holds no whole batch), or None, caching nothing, if ``follow`` has
        seen a rewrite since (the read may hold removed batches, and the cache was dropped
        for them already: cached now, they would be served until evicted)."""
        if self._rewrites.setdefault(key, rewrites) != rewrites:
            return None
        run: _Run | None = _Run(data)
        assert run is not None
        if not run.bases:
            return -1
        next_offset = run.next_offset
        part = self._parts.setdefault(key, _Runs())
        runs = part.runs
        i = bisect_right(part.bases, run.base)
        start = runs[i - 1].next_offset if i > 0 else run.base
        end = runs[i].base if i < len(runs) else next_offset
        run = run.cut(max(start, run.base), end)
        if run is None or len(run) > self.capacity_bytes:
            return next_offset
        part.insert(run)
        self._lru[(key, run.base)] = run
        self.size_bytes += len(run)
        while self.size_bytes > self.capacity_bytes:
            self._evict()
        return next_offset

    def end(self, key: Hashable) -> int:
        """The offset after the last cached batch of ``key`` (-1 if none is cached)."""
        part = self._parts.get(key)
        return part.runs[-1].next_offset if part is not None and part.runs else -1

    def drop(self, key: Hashable) -> None:
        """Forget a partition (deleted, or its log was replaced by a new owner's)."""
        self._rewrites.pop(key, None)
        part = self._parts.pop(key, None)
        for run in part.runs if part is not None else []:
            if self._lru.pop((key, run.base), None) is not None:
                self.size_bytes -= len(run)

    def drop_before(self, key: Hashable, offset: int) -> None:
        """Forget runs that end at or before ``offset`` (below the log start offset)."""
        part = self._parts.get(key)
        while part is not None and part.runs and part.runs[0].next_offset <= offset:
            run = part.runs[0]
            part.remove(run)
            if self._lru.pop((key, run.base), None) is not None:
                self.size_bytes -= len(run)

    def _evict(self) -> None:
        (key, _), run = self._lru.popitem(last=False)
        self.size_bytes -= len(run)
        part = self._parts[key]
        part.remove(run)
        if not part.runs:
            del self._parts[key]
