"""``records`` fields: their length and a view of them (``writer.write_records`` writes them)."""

from __future__ import annotations

from bmq.protocol.primitives.scalars import Buffer, RecordsInput

# Buffers at least this large are appended to a Writer as their own part instead of copied.
PART_THRESHOLD = 4096


def buffer_len(chunk: Buffer) -> int:
    return chunk.nbytes if isinstance(chunk, memoryview) else len(chunk)


def records_length(value: RecordsInput) -> int:
    """Total byte length of a records value (a buffer or a list of buffers); -1 for None."""
    if value is None:
        return -1
    if isinstance(value, list):
        return sum(buffer_len(c) for c in value)
    return buffer_len(value)


def records_view(value: RecordsInput) -> memoryview | None:
    """Narrow a ``records`` field value to ``memoryview | None``.

    Decoded messages already hold a memoryview (returned as is, no copy); bytes/bytearray are
    wrapped without copying; a list of buffers (only ever built for writing) is joined, which
    copies.
    """
    if value is None or isinstance(value, memoryview):
        return value
    if isinstance(value, list):
        return memoryview(b"".join(value))
    return memoryview(value)
