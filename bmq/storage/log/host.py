"""What the parts of a partition log see of the log that holds them (``PartitionLog``): the
layouts, the loader (``recovery``), ``retention`` and ``cleaning`` are written against this
interface, never against the class, so none of them imports ``partition_log``."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from bmq.storage.base import Storage
from bmq.storage.log.config import LogConfig
from bmq.storage.log.segments import LogSegments
from bmq.storage.log.state import StateFiles
from bmq.storage.producer_state import ProducerStateTable


class LogHost(Protocol):
    """The partition log as its parts use it. ``io_lock`` serialises the methods that do I/O
    among themselves (one flush at a time, state documents consistent with the flushed
    state, segment deletion apart from rolls); ``segments.lock`` guards the in-memory state."""

    storage: Storage
    topic: str
    partition: int
    dir: str
    config: LogConfig
    leader_epoch: int
    producer_expiration_ms: int
    state_files: StateFiles
    segments: LogSegments
    io_lock: threading.Lock
    #: Producer state including the batches queued for the next flush.
    live_producers: ProducerStateTable
    #: Producer state as of the high watermark (what state documents store).
    durable_producers: ProducerStateTable

    @property
    def closed(self) -> bool:
        """Closed, abandoned or deleted: nothing more is written."""

    @property
    def failed(self) -> BaseException | None:
        """What made the log unavailable until it is reopened (a failed write, a fence)."""

    def fence_check(self) -> None:
        """Raise FencedEpochError if an owner with a higher epoch has claimed the partition."""

    def publish_state(self) -> None:
        """Under ``io_lock``: write this owner's state document as of now."""

    def seal_aborted(self) -> None:
        """Under ``io_lock``, before a state document is built: move the aborted-transaction
        index's newest entries to a chunk file once there are enough."""

    def write_state(self, state: dict[str, Any]) -> None:
        """Write ``state`` as this owner's state document (unless it is the last one
        written)."""
