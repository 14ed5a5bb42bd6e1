"""What a read task is given (kept free of numpy/pyarrow: Spark plans in fresh processes)."""

from __future__ import annotations

from dataclasses import dataclass


class DataLossError(RuntimeError):
    """Data a read was planned for is no longer there (deleted by retention, or truncated)."""


@dataclass(slots=True, frozen=True)
class ReadRange:
    """Offsets ``[start_offset, end_offset)`` of one partition, all inside one segment, whose
    batches should lie in bytes ``[start_pos, end_pos)`` of the segment file. Positions come
    from the offset index and are hints: ``start_pos`` must hold a batch starting at
    ``hint_offset`` (else the reader scans the segment from its start), and a reader that
    reaches ``end_pos`` short of ``end_offset`` goes on up to ``limit_pos`` (the segment's
    valid size)."""

    topic: str
    partition: int
    segment: int
    start_offset: int
    end_offset: int
    start_pos: int
    end_pos: int
    hint_offset: int
    limit_pos: int
    # read_committed: (producer id, first offset, ABORT marker offset) of each aborted
    # transaction with data in the range; its batches are skipped.
    aborted: tuple[tuple[int, int, int], ...] = ()

    @property
    def path(self) -> str:
        return f"{self.topic}/{self.partition}/{self.segment:020d}.log"

    @property
    def size(self) -> int:
        return self.end_pos - self.start_pos
