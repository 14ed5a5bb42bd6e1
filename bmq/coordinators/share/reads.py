"""Reading a share-partition's records from its partition's view (the broker's read path
and record cache): where an acquisition of whole batches ends, the batches holding acquired
records, and the records themselves (for dead letters)."""

from __future__ import annotations

from bmq.coordinators.share.partition import Acquired
from bmq.protocol.primitives import Buffer
from bmq.protocol.record_codec import Record, decode_batch
from bmq.protocol.records import iter_batches
from bmq.readpath.partition_view import PartitionView, batches_before, next_offset_of

READ_BYTES = 1 << 20


async def aligned_end(view: PartitionView, start: int, want: int) -> int:
    """Where ``want`` new records from ``start`` end, moved to the end of their last batch,
    within the high watermark (whole batches: fewer, larger acquisitions)."""
    high_watermark = view.high_watermark
    target = start + want - 1
    if target >= high_watermark - 1:
        return high_watermark
    for _, header in iter_batches(await view.read(target, 1)):     # (one whole batch)
        if header.next_offset > target:
            return min(header.next_offset, high_watermark)
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
