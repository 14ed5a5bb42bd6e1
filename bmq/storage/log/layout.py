"""How a partition log is laid out on storage; the log uses one of two layouts:

``append_layout``  segment files that grow by appends, with index files and checkpoints (local
                   directories, HDFS)
``object_layout``  immutable objects, one per flush (merged later), listed by a manifest (S3 and
                   other object stores, which cannot append)

The log does everything the same way for both (appends, reads within a segment, retention,
indexes, fencing) and asks its layout for what differs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from bmq.storage.base import Storage
from bmq.storage.log.config import Queued, clock_ms
from bmq.storage.log.host import LogHost
from bmq.storage.log.reading import read_batches
from bmq.storage.log.recovery import Recovered, collect_garbage
from bmq.storage.log.segments import LogSegments
from bmq.storage.log.state import StateFiles
from bmq.storage.segment import Segment

_SEQ_CLOCK_ORIGIN_MS = 1_577_836_800_000   # 2020-01-01


class Layout(ABC):
    """What a ``PartitionLog`` asks of its layout; the log holds one (``log.layout``), chosen
    by ``PartitionLog.open`` from the storage's ``supports_append``. A layout sees the log
    through ``LogHost`` (the writer's methods) and ``LogSegments`` (its segments)."""

    #: Segments at the end of the log that retention never deletes.
    kept_at_end: int
    _last_cleaned_seq = -1

    @staticmethod
    @abstractmethod
    def state_files(storage: Storage, partition_dir: str) -> StateFiles:
        """Where this layout keeps the partition's state documents."""

    @abstractmethod
    def load(self, log: LogHost) -> Recovered:
        """Open the partition as the owner of ``log.leader_epoch``: claim it and recover what
        earlier owners made durable (the log then installs it and publishes its state)."""

    def collect_garbage(self, log: LogHost, listed: list[str]) -> None:
        """After the log took over what ``load`` recovered: delete what no state document
        names among the files ``load`` listed."""
        collect_garbage(log, listed)

    @abstractmethod
    def write(self, log: LogHost, queue: list[Queued]) -> None:
        """Under ``io_lock``: make the queued batches durable, check the fence, then advance
        the high watermark."""

    @abstractmethod
    def state(self, log: LogHost) -> dict[str, Any]:
        """This owner's state document as of now."""

    def before_checkpoint(self, log: LogHost) -> None:
        """Under ``io_lock``, before the state document is written."""
        return None

    def read(self, segments: LogSegments, offset: int, max_bytes: int) -> bytes | memoryview:
        """Whole batches from the one holding ``offset``."""
        return read_batches(segments, offset, max_bytes)

    def make_file(self, segments: LogSegments, seg: Segment) -> None:
        """Make the (empty) file of a new segment the log starts with (``start_at``), if this
        layout has one before the first write."""
        return None

    @abstractmethod
    def tail_segments(self, segments: LogSegments) -> list[Segment]:
        """The segments a tail (``PartitionLog.tail``) lists."""

    def maintain(self, log: LogHost) -> None:
        """Periodic storage work before a checkpoint (merging objects)."""
        return None

    def sealed(self, segments: LogSegments) -> list[Segment]:
        """Under ``segments.lock``: the segments that are no longer written to (the log
        cleaner's; Kafka never cleans the active segment)."""
        return segments.by_offset[:-1]

    def cleaned_seq(self, segments: LogSegments) -> int:
        """A sequence number for the name of a segment the log cleaner writes, used by no file
        of this epoch before: the append layout's own segments have none, so a clock (ms since
        2020, which fits the name's 12 digits until 2051) never repeats one across restarts."""
        with segments.lock:
            seq = max(self._last_cleaned_seq + 1, clock_ms() - _SEQ_CLOCK_ORIGIN_MS)
            self._last_cleaned_seq = seq
        return seq

    def merge(self, log: LogHost) -> int:
        """Merge small pieces of the log; returns how many were merged away."""
        return 0
