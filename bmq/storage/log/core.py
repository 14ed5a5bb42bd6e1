"""The state of a partition log every part of it shares (``PartitionLog`` is this plus its
parts), and the few operations on it that every part needs: fencing, publishing the state
document, shutting down."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage.base import Storage
from bmq.storage.log.aborted_index import CHUNK_ENTRIES, chunk_name, encode
from bmq.storage.log.config import DEFAULT_PRODUCER_EXPIRATION_MS, LogConfig, Queued
from bmq.storage.log.fencing import FencedEpochError
from bmq.storage.producer_state import ProducerStateTable
from bmq.storage.segment import Segment

if TYPE_CHECKING:
    from bmq.storage.log.layout import Layout


class LogCore:
    """Threads: ``_lock`` guards the in-memory state shared with the event loop (queue, offsets,
    segment list, sizes, indexes) and is held only for in-memory work, never across a syscall;
    ``_io_lock`` serialises the methods that do I/O among themselves."""

    #: True for the log a ``LogReader`` reads through (``view.ReadOnlyLog``): it never writes
    #: to storage, not even an index file it had to rebuild.
    _readonly: ClassVar[bool] = False

    def __init__(self, storage: Storage, topic: str, partition: int, config: LogConfig,
                 epoch: int, layout: Layout) -> None:
        self.storage = storage
        self.topic = topic
        self.partition = partition
        self.config = config
        self.leader_epoch = epoch
        self.layout = layout
        self.dir = f"{topic}/{partition}"
        self.state_files = layout.state_files(storage, self.dir)
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.producer_expiration_ms = DEFAULT_PRODUCER_EXPIRATION_MS
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._size_bytes = 0
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._queue: list[Queued] = []
        self._pending = 0
        self._producers = ProducerStateTable()          # live: includes queued batches
        self._durable_producers = ProducerStateTable()  # as of the high watermark
        self._failed: BaseException | None = None
        self._closed = False
        self._checkpointed = b""   # the state document last written
        self._published_ms = 0.0   # monotonic time of the last state document write
        self._published_hw = 0     # the high watermark the last state document names
        self._published_active = ""  # the stem of the newest segment it names
        # Segments the log cleaner replaced (when, segment): deleted after a delay (cleaning).
        self._replaced: list[tuple[float, Segment]] = []
        # ... and the aborted-transaction index chunks it wrote again (when, file name).
        self._replaced_chunks: list[tuple[float, str]] = []
        # Bumped when segments are replaced by others (the cleaner's, or, in a reader, any
        # segment leaving its view): batches cached from the old ones are stale.
        self.rewrites = 0
        # Called (from the cleaner's thread) once the cleaner's segments are published: the
        # owner tells readers elsewhere, whose views follow its notices of new data.
        self.on_rewrite: Callable[[], None] | None = None

    def _path(self, name: str) -> str:
        return f"{self.dir}/{name}"

    def _install_segments(self, segments: list[Segment]) -> None:
        """Under ``_lock`` (or before the log is shared): make ``segments`` the segment list,
        with the bases reads bisect and the total size."""
        self._segments = segments
        self._bases = [s.base for s in segments]
        self._size_bytes = sum(s.size for s in segments)

    def _fence_check(self) -> None:
        """Raise FencedEpochError if an owner with a higher epoch has claimed the partition
        (one listing; only in cluster mode, i.e. epoch > 0)."""
        if self.leader_epoch <= 0:
            return
        epochs = self.state_files.epochs()
        if epochs and epochs[-1] > self.leader_epoch:
            error = FencedEpochError(f"{self}: epoch {self.leader_epoch} fenced by {epochs[-1]}",
                                     epochs[-1])
            self._failed = error
            raise error

    def _check_writable(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self} is closed")
        if self._failed is not None:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self} failed: {self._failed}")

    def _checkpoint_locked(self) -> None:
        """Under ``_io_lock``: publish this owner's state document."""
        self.layout.before_checkpoint(self)
        self._seal_aborted()
        self._write_state(self.layout.state(self))

    def _seal_aborted(self) -> None:
        """Under ``_io_lock``, before a state document is built: move the aborted-transaction
        index's newest entries to a chunk file once there are enough (aborted_index.py)."""
        table = self._durable_producers
        with self._lock:
            fresh = table.unsealed()
            start = table.sealed_count
        if len(fresh) < CHUNK_ENTRIES:
            return
        name = chunk_name(fresh)
        self.storage.write_atomic(self._path(name), encode(fresh))
        with self._lock:
            table.seal(name, start + len(fresh))

    def _write_state(self, state: dict[str, Any]) -> None:
        data = json.dumps(state, separators=(",", ":")).encode()
        if data != self._checkpointed:   # idle partitions cost no fsync
            self.state_files.write(self.leader_epoch, data)
            self._checkpointed = data
        self._published_ms = time.monotonic()
        self._published_active = self._segments[-1].stem if self._segments else ""
        self._published_hw = int(state.get("high_watermark", 0))

    def _shut(self) -> None:
        with self._lock:
            self._closed = True
            self._queue = []
            self._pending = 0
            segments = list(self._segments)
            for seg in segments:
                seg.retired = True
            idle = [seg for seg in segments if seg.readers == 0]
        for seg in idle:
            seg.close_handles()

    @property
    def size_bytes(self) -> int:
        return self._size_bytes

    def __repr__(self) -> str:
        return f"PartitionLog({self.storage.url}/{self.dir})"

    __str__ = __repr__
