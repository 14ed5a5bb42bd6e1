"""Shared helpers for the storage tests."""

from __future__ import annotations

from bmq.protocol.records import BatchHeader
from bmq.storage import PartitionLog

from .batches import request, split


def append(log: PartitionLog, *batches: bytes, now_ms: int = 1_000) -> tuple[int, int]:
    result = log.append(*request(*batches), now_ms=now_ms)
    return result.base_offset, result.last_offset


def read_batches(log: PartitionLog, start: int | None = None,
                 max_bytes: int = 1 << 20) -> list[tuple[BatchHeader, bytes]]:
    """Every batch from ``start`` to the high watermark, following reads like a consumer."""
    offset = log.log_start_offset if start is None else start
    out: list[tuple[BatchHeader, bytes]] = []
    while offset < log.high_watermark:
        data = bytes(log.read(offset, max_bytes))
        assert data, f"empty read at {offset} below the high watermark {log.high_watermark}"
        pos = 0
        for header in split(data):
            out.append((header, data[pos:pos + header.size]))
            pos += header.size
            offset = header.next_offset
    return out


def segment_files(log: PartitionLog) -> list[str]:
    return [n for n in log.storage.list(log.dir) if n.endswith(".log")]
