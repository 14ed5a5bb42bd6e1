"""The read path's record cache and the log cleaner: batches cached before a cleaner swap are
forgotten at the next read, and a read that ran across a swap is not cached (it may hold
batches the cleaner removed)."""

from __future__ import annotations

from bmq.readpath.cache import RecordCache
from tests.integration.kwire import Record, build_record_batch

KEY = ("orders", 0)


def _batches(base: int, count: int) -> bytes:
    return b"".join(build_record_batch([Record(b"k", b"v%d" % (base + i), [])],
                                       base_offset=base + i) for i in range(count))


def test_batches_cached_before_a_swap_are_forgotten() -> None:
    cache = RecordCache(1 << 20)
    cache.follow(KEY, 0)
    assert cache.put(KEY, _batches(0, 3), rewrites=0) == 3
    assert cache.get(KEY, 1, 1 << 20) is not None
    assert cache.follow(KEY, 0) == 0 and cache.end(KEY) == 3    # no swap: kept
    cache.follow(KEY, 1)                                        # the cleaner swapped
    assert cache.get(KEY, 1, 1 << 20) is None and cache.size_bytes == 0
    assert cache.put(KEY, _batches(0, 2), rewrites=1) == 2
    assert cache.end(KEY) == 2


def test_a_read_across_a_swap_is_not_cached() -> None:
    cache = RecordCache(1 << 20)
    other = ("orders", 1)
    read_at = cache.follow(KEY, 4)
    cache.follow(other, 0)
    cache.follow(KEY, 5)                           # swapped while the read ran
    assert cache.put(KEY, _batches(0, 3), rewrites=read_at) is None
    assert cache.get(KEY, 0, 1 << 20) is None and cache.size_bytes == 0
    assert cache.put(other, _batches(0, 1), rewrites=0) == 1   # other partitions unaffected


def test_dropping_a_partition_forgets_its_swap_count() -> None:
    # A new owner's log counts its swaps from 0 again: its reads are cached at once.
    cache = RecordCache(1 << 20)
    cache.follow(KEY, 7)
    cache.drop(KEY)
    assert cache.follow(KEY, 0) == 0
    assert cache.put(KEY, _batches(10, 2), rewrites=0) == 12
