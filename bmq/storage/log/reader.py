"""A partition log's read-only reader (``LogReader``), for processes that do not write it:
proxies, brokers answering for partitions led elsewhere. It follows what the writer publishes
(its newest state document, and the tails sent with notices of new data) and never writes."""

from __future__ import annotations

import json
import logging
from typing import Any

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage.log import reading
from bmq.storage.log.aborted_index import read_chunk
from bmq.storage.log.layout import Layout
from bmq.storage.log.published_txns import PublishedTxns
from bmq.storage.log.segments import LogSegments
from bmq.storage.producer_state import AbortedTxn
from bmq.storage.segment import Segment

logger = logging.getLogger(__name__)


class LogReader:
    """A read-only reader of a partition for processes that do not write it (the proxy tier,
    brokers answering for partitions led elsewhere). It sees the durable data as the writer
    last published it (its newest checkpoint or manifest) and never writes to storage.

    ``refresh()`` costs one listing of the partition's state files and one small read (none
    when nothing changed); reads go straight to the segment files or objects. A file deleted
    by retention, the cleaner or a merge of objects meanwhile makes a read refresh once and
    retry.

    It reads through its own ``LogSegments`` (``readonly``: it does not even write the index
    files it rebuilds) and the layout's reads; it has none of the writer's parts."""

    def __init__(self, topic: str, partition: int, segments: LogSegments,
                 layout: Layout) -> None:
        self.topic = topic
        self.partition = partition
        self._segments = segments
        self._layout = layout
        self._state_files = layout.state_files(segments.storage, segments.dir)
        self._state = b""
        self._tail: dict[str, Any] | None = None   # the newest tail applied (see advance)
        self._txns = PublishedTxns()
        self.leader_epoch = -1
        self.refresh()

    @property
    def high_watermark(self) -> int:
        return self._segments.high_watermark

    def last_stable_offset(self) -> int:
        """The owner's LSO as it last published it (never past this reader's high watermark)."""
        return self._txns.last_stable_offset(self._segments.high_watermark)

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [start, end), as the owner published them."""
        return self._txns.aborted_between(start, end)

    @property
    def log_end_offset(self) -> int:
        return self._segments.log_end_offset   # a reader sees durable data only: the high watermark

    @property
    def owner_rewrites(self) -> int:
        """The owner's count of cleaner swaps in the newest tail applied (-1: none applied):
        a watcher sends it so that the owner reports a swap it has not seen."""
        return int(self._tail.get("rewrites", -1)) if self._tail is not None else -1

    @property
    def log_start_offset(self) -> int:
        return self._segments.log_start_offset

    @property
    def size_bytes(self) -> int:
        return self._segments.size_bytes

    @property
    def rewrites(self) -> int:
        """Changes to the reader's segments other than growth (see ``LogSegments.rewrites``)."""
        return self._segments.rewrites

    def refresh(self) -> bool:
        """Re-read the newest published state; True if it changed."""
        segments = self._segments
        epochs = self._state_files.epochs()
        for epoch in reversed(epochs):
            path = self._state_files.path(epoch)
            try:
                raw = segments.storage.read_all(path)
                state = json.loads(raw)
            except FileNotFoundError:
                continue              # replaced or removed meanwhile
            except ValueError:
                logger.warning("%s: unreadable state %s", segments, path)
                continue
            if epoch < self.leader_epoch:
                return False          # never go back to an older owner's state
            if raw == self._state:
                return False
            if state.get("segments") is None:
                return False          # a claim without a known state: keep the current one
            if self._state and int(state.get("data_epoch", epoch)) < epoch:
                # A new owner's claim: a copy of the state it took over as it read it, which
                # may be older than the tails this reader applied since (the old owner's
                # flushes acknowledged between that read and the claim): applied, it would
                # take acknowledged records back from fetches. The owner's own state follows
                # its recovery, before it acknowledges anything.
                return False
            # The index first: a fetch between the two then sees the old segments with the
            # new index, never the cleaner's segments (ABORT markers removed) with the old.
            self._txns.apply_state(state, lambda name: read_chunk(segments.storage, segments.dir,
                                                                  name))
            self._apply(state)
            self._state = raw
            self.leader_epoch = epoch
            tail = self._tail
            if tail is not None and tail["epoch"] == epoch:
                self._extend(tail)    # a checkpoint older than the tail we saw: keep the tail
                if int(tail["high_watermark"]) >= self._txns.state_hw:
                    self._txns.apply_tail(tail)
            self._txns.drop_before(self._segments.log_start_offset)
            return True
        return False

    def advance(self, tail: bytes | None) -> bool:
        """Extend the reader's segments to what the owner's ``PartitionLog.tail`` describes,
        without reading storage; a tail that does not continue them (a new owner, a missed
        roll, a merge of objects) or no tail at all makes it ``refresh`` instead. True if
        anything changed."""
        if tail is None:
            return self.refresh()
        doc = json.loads(tail)
        if doc["epoch"] < self.leader_epoch or self._older(doc):
            return False
        changed = self._extend(doc) if doc["epoch"] == self.leader_epoch else None
        # The owner's cleaner swapped segments since its last tail we saw (the new ones are
        # in its state document; the tail lists only the newest, which it never cleans).
        cleaned = self._tail is not None and self._tail["epoch"] == doc["epoch"] and \
            self._tail.get("rewrites", 0) != doc.get("rewrites", 0)
        if changed is None or cleaned or self._txns.needs_state(doc):
            # A tail that does not continue the segments, that follows a cleaner's swap, or whose
            # aborted transactions start past what our state document covers: read the
            # owner's newest state document.
            changed = self.refresh() or bool(changed)
            if doc["epoch"] == self.leader_epoch:
                changed = bool(self._extend(doc)) or changed
        if self._older(doc):
            return changed            # the refresh found a newer state document
        if doc["epoch"] == self.leader_epoch:
            self._txns.apply_tail(doc)
        self._tail = doc
        return changed

    def _older(self, doc: dict[str, Any]) -> bool:
        """Whether a tail of this reader's epoch is older than what it holds: than the newest
        tail applied, or the state document (a notice answered before a refresh or a
        catch-up's newer tail, applied after). Its LSO would hold read_committed fetches
        back at its high watermark until the next notice, which a partition written no
        more never sends."""
        if doc["epoch"] != self.leader_epoch:
            return False
        known = self._tail
        hw = int(doc["high_watermark"])
        return hw < self._txns.state_hw or (known is not None and known["epoch"] == doc["epoch"]
                                           and hw < int(known["high_watermark"]))

    def _extend(self, doc: dict[str, Any]) -> bool | None:
        """Apply a tail that continues this reader's segments: whether anything changed, or None
        if the tail does not continue them."""
        held = self._segments
        with held.lock:
            segments = held.by_offset
            if not segments:
                return None
            known = {seg.stem: seg for seg in segments}
            for meta in doc["segments"]:
                seg = Segment.from_meta({k: int(v) for k, v in meta.items()})
                last = segments[-1]
                mine = known.get(seg.stem)
                if mine is not None:
                    if mine is last and seg.size > last.size:
                        last.size, last.next_offset = seg.size, seg.next_offset
                        if seg.max_timestamp > last.max_timestamp:
                            last.max_timestamp = seg.max_timestamp
                            last.offset_of_max_timestamp = seg.offset_of_max_timestamp
                elif seg.base == last.next_offset:
                    segments.append(seg)
                    held.bases.append(seg.base)
                else:
                    return None
            held.size_bytes = sum(s.size for s in segments)
            before = (held.high_watermark, held.log_start_offset)
            end = min(int(doc["high_watermark"]), segments[-1].next_offset)
            if end > held.high_watermark:
                held.high_watermark = held.log_end_offset = end
            held.log_start_offset = max(held.log_start_offset,
                                        min(int(doc["log_start_offset"]), held.high_watermark))
            return (held.high_watermark, held.log_start_offset) != before

    def _apply(self, state: dict[str, Any]) -> None:
        held = self._segments
        metas = state["segments"]
        with held.lock:
            old = {(s.stem, s.size): s for s in held.by_offset}
            segments = []
            for meta in metas:
                seg = Segment.from_meta({k: int(v) for k, v in meta.items()})
                kept = old.pop((seg.stem, seg.size), None)
                segments.append(kept if kept is not None else seg)
            retired = list(old.values())
            if retired:
                held.rewrites += 1
            for seg in retired:
                seg.retired = True
            idle = [seg for seg in retired if seg.readers == 0]
            held.install(segments)
            hw = int(state.get("high_watermark", state["recovery_point"]))
            end = segments[-1].next_offset if segments else hw
            held.high_watermark = held.log_end_offset = min(hw, end) if segments else hw
            held.log_start_offset = min(int(state["log_start_offset"]), held.high_watermark)
        for seg in idle:
            seg.close_handles()

    def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        try:
            return self._read(offset, max_bytes)
        except KafkaError as exc:
            if exc.code != ErrorCode.OFFSET_OUT_OF_RANGE or not self.refresh():
                raise
        return self._read(offset, max_bytes)

    def _read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        segments = self._segments
        if not segments.by_offset:
            if offset == self.high_watermark == self.log_start_offset:
                return b""
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"{segments}: nothing published")
        return self._layout.read(segments, offset, max_bytes)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        segments = self._segments
        return reading.offset_for_timestamp(segments, timestamp) if segments.by_offset else None

    def max_timestamp(self) -> tuple[int, int] | None:
        segments = self._segments
        return reading.max_timestamp(segments) if segments.by_offset else None

    def end_offset_for_epoch(self, epoch: int, current_epoch: int = -1) -> tuple[int, int]:
        return reading.end_offset_for_epoch(self._segments, epoch, current_epoch)

    def close(self) -> None:
        with self._segments.lock:
            idle = self._segments.retire_all()
        for seg in idle:
            seg.close_handles()

    def __repr__(self) -> str:
        return f"LogReader({self._segments.storage.url}/{self._segments.dir})"

