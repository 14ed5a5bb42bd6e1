"""The owner's state documents (the append layout's checkpoints, the object layout's manifests):
when one is due, building it, and writing it in the order documents were built.

Documents are numbered as they are built (under the log's ``io_lock``) and written in that
order under a lock of their own, some outside ``io_lock`` (``publish_if_due``, off the write
path's way): a document older than the last written is dropped, never written over a newer
one. What the last written document names (its high watermark, its newest segment) is what a
tail (``PartitionLog.tail``) and the next publication's due date are measured against.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from bmq.protocol.errors import KafkaError
from bmq.storage.log.aborted_index import CHUNK_ENTRIES, chunk_name, encode
from bmq.storage.log.host import LogHost
from bmq.storage.log.layout import Layout
from bmq.storage.log.state import CHECKPOINT_VERSION

logger = logging.getLogger(__name__)


class Publication:
    """The state documents of one partition log's owner (``log``, laid out by ``layout``)."""

    def __init__(self, log: LogHost, layout: Layout) -> None:
        self.log = log
        self.layout = layout
        self.written = b""          # the state document last written
        self.published_ms = 0.0     # monotonic time of the last state document write
        self.published_hw = 0       # the high watermark the last state document names
        self.published_active = ""  # the stem of the newest segment it names
        self._lock = threading.Lock()
        self._built = 0
        self._written = 0

    def due(self) -> bool:
        """Whether a state document is due: a publish interval passed since the last one, or
        the tail outran it."""
        interval_ms = self.log.config.publish_interval_ms
        return self.log.leader_epoch > 0 and interval_ms >= 0 and (
            (time.monotonic() - self.published_ms) * 1000 >= interval_ms
            or self._tail_outran())

    def _tail_outran(self) -> bool:
        """Whether the segments a tail lists no longer reach back to the last published state
        document: a reader at that document could not follow the tail (``LogReader.advance``)
        and would see nothing new until the next publication, which an idle writer never makes.
        Publishing then costs one state write per roll or two (segments roll rarely)."""
        tail = self.layout.tail_segments(self.log.segments)
        return bool(tail) and all(seg.stem != self.published_active for seg in tail)

    def publish_if_due(self) -> None:
        """The state document, if due, apart from a flush and off the flushes' way: the write
        path publishes once a flush's acknowledgements are answered, and the document is
        written outside ``io_lock`` (built inside it), so the next flush does not wait either.
        On HDFS a state document is a file of its own (20 ms at the median, 100 ms and more
        at times), which acks=all waited for when flushes published."""
        log = self.log
        try:
            with log.io_lock:
                if log.closed or log.failed is not None or not self.due():
                    return
                self.layout.before_checkpoint(log)
                self.seal_aborted()
                state = self.layout.state(log)
                number, active = self._number()
                self.published_ms = time.monotonic()   # not due again meanwhile
            self._store(number, active, state)
        except (OSError, KafkaError) as exc:
            logger.warning("%s: could not publish the checkpoint: %s", log, exc)

    def publish_after_flush(self) -> None:
        """Under ``io_lock``: ``publish``, a failure logged: the data is durable, and the next
        publication retries (a fenced owner's next flush fails)."""
        try:
            self.publish()
        except (OSError, KafkaError) as exc:
            logger.warning("%s: could not publish the checkpoint: %s", self.log, exc)

    def publish(self) -> None:
        """Under ``io_lock``: publish this owner's state document."""
        self.layout.before_checkpoint(self.log)
        self.seal_aborted()
        self.write(self.layout.state(self.log))

    def seal_aborted(self) -> None:
        """Under ``io_lock``, before a state document is built: move the aborted-transaction
        index's newest entries to a chunk file once there are enough (aborted_index.py)."""
        log = self.log
        table = log.durable_producers
        with log.segments.lock:
            fresh = table.unsealed()
            start = table.sealed_count
        if len(fresh) < CHUNK_ENTRIES:
            return
        name = chunk_name(fresh)
        log.storage.write_atomic(log.segments.path(name), encode(fresh))
        with log.segments.lock:
            table.seal(name, start + len(fresh))

    def write(self, state: dict[str, Any]) -> None:
        """Under ``io_lock``: write a state document built now."""
        self._store(*self._number(), state)

    def _number(self) -> tuple[int, str]:
        """Under ``io_lock``: the number of a document built now, and its newest segment."""
        self._built += 1
        by_offset = self.log.segments.by_offset
        return self._built, by_offset[-1].stem if by_offset else ""

    def _store(self, number: int, active: str, state: dict[str, Any]) -> None:
        data = json.dumps(state, separators=(",", ":")).encode()
        with self._lock:
            if number < self._written:     # a newer one is written already
                return
            if data != self.written:   # idle partitions cost no fsync
                self.log.state_files.write(self.log.leader_epoch, data)
                self.written = data
            self._written = number
            self.published_ms = time.monotonic()
            self.published_active = active
            self.published_hw = int(state.get("high_watermark", 0))


def as_written(stored: dict[str, Any] | None) -> bytes:
    """The bytes of the state document ``stored`` (as ``StateFiles.read`` gave it) as they were
    written: a restart after a clean stop, whose log is as the document describes it, then
    writes no new one (one file write and two syncs per partition, most of a restart's time)."""
    if stored is None:
        return b""
    if stored.get("version") == CHECKPOINT_VERSION:     # read() filled these in
        stored = {k: v for k, v in stored.items() if k not in ("epoch", "data_epoch")}
    return json.dumps(stored, separators=(",", ":")).encode()
