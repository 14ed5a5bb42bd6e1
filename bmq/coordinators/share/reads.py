"""Reading a share-partition's records from its partition's view (the broker's read path
and record cache): acquiring whole batches (below the last stable offset, without aborted
transactions and control records, at read_committed), the batches holding acquired records,
and the records themselves (for dead letters)."""

from __future__ import annotations

from bmq.coordinators.clock import steady_now_ms
from bmq.coordinators.share.partition import Acquired, SharePartition, ShareSettings
from bmq.protocol.primitives import Buffer
from bmq.protocol.record_codec import Record, decode_batch
from bmq.protocol.records import iter_batches
from bmq.readpath.partition_view import PartitionView, batches_before, next_offset_of
from bmq.storage.producer_state import AbortedBatches

READ_BYTES = 1 << 20


async def acquire_records(view: PartitionView, state: SharePartition, member_id: str,
                          want: int, settings: ShareSettings) -> list[Acquired]:
    """Acquire up to ``want`` records of ``state`` for ``member_id`` (``view`` its partition);
    read_committed: below the last stable offset, archiving (never delivering) the records of
    aborted transactions and control records, and acquiring on past them while all it
    acquired was such."""
    limit = view.last_stable_offset() if settings.read_committed else view.high_watermark
    while True:
        new_end = await aligned_end(view, state.end_offset, want, limit)
        acquired = state.acquire(member_id, want, new_end, steady_now_ms(), settings)
        if not (settings.read_committed and acquired):
            return acquired
        skipped = await uncommitted(view, acquired)
        if not skipped:
            return acquired
        acquired = state.archive_acquired(acquired, skipped)
        if acquired:
            return acquired


async def aligned_end(view: PartitionView, start: int, want: int, limit: int) -> int:
    """Where ``want`` new records from ``start`` end, moved to the end of their last batch,
    within ``limit`` (the high watermark; read_committed: the last stable offset) (whole
    batches: fewer, larger acquisitions)."""
    target = start + want - 1
    if target >= limit - 1:
        return limit
    for _, header in iter_batches(await view.read(target, 1)):     # (one whole batch)
        if header.next_offset > target:
            return min(header.next_offset, limit)
        break
    return target + 1


async def read_covering(view: PartitionView,
                        acquired: list[Acquired]) -> list[Buffer]:
    """The whole batches holding the acquired records, each batch once, in offset order
    (views of the record cache: the response is written from them without a copy)."""
    parts: list[Buffer] = []
    covered = -1
    for run in acquired:
        offset = max(run.first, covered)
        while offset <= run.last:
            data = batches_before(await view.read(offset, READ_BYTES), run.last + 1)
            end = next_offset_of(data)
            if end <= offset:
                break
            parts.append(data)
            offset = covered = end
    return parts


async def uncommitted(view: PartitionView, acquired: list[Acquired]) -> list[tuple[int, int]]:
    """read_committed: the parts of ``acquired`` (below the last stable offset) that hold
    records of aborted transactions or control records, as (first, last) in offset order:
    the aborted transactions the classic Fetch answers with (the producer state's), applied
    here as a read_committed reader applies them."""
    start, end = acquired[0].first, acquired[-1].last + 1
    aborted = AbortedBatches(lambda: view.aborted_transactions(start, end))
    skipped: list[tuple[int, int]] = []
    for data in await read_covering(view, acquired):
        for _, header in iter_batches(data):
            if not (header.is_control or header in aborted):
                continue
            for got in acquired:
                first, last = max(header.base_offset, got.first), \
                    min(header.next_offset - 1, got.last)
                if first <= last:
                    skipped.append((first, last))
    return skipped


async def read_records(view: PartitionView, first: int, last: int) -> list[Record]:
    """The records of [first, last] (gaps have none)."""
    found: list[Record] = []
    offset = first
    while offset <= last:
        data = await view.read(offset, READ_BYTES)
        moved = False
        for pos, header in iter_batches(data):
            if header.next_offset <= offset:
                continue
            moved = True
            offset = header.next_offset
            if not header.is_control:
                found += [r for r in decode_batch(memoryview(data)[pos:pos + header.size],
                                                  header) if first <= r.offset <= last]
            if offset > last:
                break
        if not moved:
            break
    return found
