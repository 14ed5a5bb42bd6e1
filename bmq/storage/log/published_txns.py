"""What a partition's owner publishes of its transactions, and how a reader elsewhere follows it.

A read_committed fetch served by a process that does not write the partition (a proxy, a
broker answering for a partition led elsewhere, Spark) needs the last stable offset and the
aborted transactions, without scanning data. The owner publishes them in two places:

* its state document (checkpoint or manifest): the producer state as of its high watermark,
  with each open transaction's first offset and the aborted-transaction index;
* every tail it sends with a notice of new data (``PartitionLog.tail``), when the partition
  has transactional state: the LSO now, and the aborted transactions whose ABORT marker is at
  or past the high watermark of its last published state document (``since``), which a reader
  holding that document (or a newer one) lacks. A reader holding an older one re-reads it.

The log cleaner removes ABORT markers with their index entries (``bmq.cleaner``), counting the
removals in the state document (``REMOVALS_KEY``): a reader whose count differs rebuilds its
index from the document (chunks it holds are not read again) instead of merging it, so it
never returns an entry whose marker is gone. (The Spark source and Index Query, which skip
aborted batches themselves, would not mind one: an entry only spans its own transaction's
batches, none of which is left; but a Fetch's read_committed client skips every batch of the
producer after the entry's first offset until it meets the marker.)
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from heapq import merge
from typing import Any

from bmq.storage.producer_state import (
    ABORTED_KEY,
    CHUNKS_KEY,
    INDEX_KEYS,
    REMOVALS_KEY,
    AbortedTxn,
    ProducerStateTable,
    aborted_after,
    aborted_between,
    aborted_from,
    marker_order,
)

# The tail's key for the transactional state (absent: no open or aborted transaction).
TAIL_KEY = "txn"


def tail_txn_state(producers: ProducerStateTable, high_watermark: int,
                   published_hw: int) -> dict[str, Any] | None:
    """The tail's transactional part, from the owner's durable producer state."""
    if not producers.aborted and not producers.open_txns:
        return None
    first = producers.first_unstable_offset()
    return {"lso": high_watermark if first is None else min(first, high_watermark),
            "since": published_hw,
            "aborted": [list(a) for a in producers.aborted[
                aborted_after(producers.aborted, published_hw):]]}


class PublishedTxns:
    """A reader's view of the owner's transactions: LSO and aborted-transaction index."""

    def __init__(self) -> None:
        self.aborted: list[AbortedTxn] = []     # by marker offset
        self._first_open: int | None = None     # from the state document
        self._tail_lso: int | None = None       # from the newest tail, if newer than the state
        self.state_hw = 0                       # high watermark of the state document applied
        # The chunk files of the index the state document names, with their entries.
        self._chunks: dict[str, list[AbortedTxn]] = {}
        self._removals = 0                      # REMOVALS_KEY of the state document applied

    def apply_state(self, state: dict[str, Any],
                    read_chunk: Callable[[str], list[AbortedTxn]]) -> None:
        """A state document (checkpoint or manifest) was applied; ``read_chunk`` reads a chunk
        file of the aborted-transaction index it names (each is read once: chunks never
        change)."""
        producers = state.get("producers") or {}
        known = self._chunks
        names = [str(name) for name, _end in producers.get(CHUNKS_KEY, ())]
        self._chunks = {name: known[name] if name in known else read_chunk(name)
                        for name in names}
        firsts = [int(p["txn_first"]) for key, p in producers.items()
                  if key not in INDEX_KEYS and "txn_first" in p]
        self._first_open = min(firsts) if firsts else None
        self.state_hw = int(state.get("high_watermark", state.get("recovery_point", 0)))
        self._tail_lso = None
        unsealed = [AbortedTxn(*(int(x) for x in a)) for a in producers.get(ABORTED_KEY, ())]
        removals = int(producers.get(REMOVALS_KEY, 0))
        if removals != self._removals:
            # Entries were removed: this document's index, and the tails' past it.
            newer = self.aborted[aborted_after(self.aborted, self.state_hw):]
            self.aborted = [a for name in names for a in self._chunks[name]]
            self._removals = removals
            self._merge(unsealed)
            self._merge(newer)
            return
        for name in names:
            if name not in known:
                self._merge(self._chunks[name])
        self._merge(unsealed)

    def needs_state(self, tail: dict[str, Any]) -> bool:
        """True if the tail's aborted list starts after what this reader's state document
        covers: the reader must re-read the state document first."""
        txn = tail.get(TAIL_KEY)
        return txn is not None and int(txn["since"]) > self.state_hw

    def apply_tail(self, tail: dict[str, Any]) -> None:
        txn = tail.get(TAIL_KEY)
        if txn is None:
            # Nothing open, nothing aborted on the owner (an index emptied by retention
            # leaves ours with entries below the log start only: harmless).
            self._first_open = None
            self._tail_lso = int(tail["high_watermark"])
            return
        self._tail_lso = int(txn["lso"])
        # (Entries before the state document's high watermark are the document's: a tail
        # older than it may still list one the cleaner removed since.)
        self._merge(entry for entry in (AbortedTxn(*(int(x) for x in a)) for a in txn["aborted"])
                    if entry.last_offset >= self.state_hw)

    def _merge(self, found: Iterable[AbortedTxn]) -> None:
        """Add the entries not known yet, keeping ``aborted`` by marker offset. Most follow
        every known entry (a tail's new aborts, the chunks of a first state document, oldest
        first) and are appended; a tail also sends again the entries since the last state
        document, and those, and a chunk read after newer entries, are found by bisection
        and merged into the part of the list they overlap, never the whole."""
        new = sorted(found, key=marker_order)
        if not new:
            return
        aborted = self.aborted
        split = 0 if not aborted else bisect_right(new, marker_order(aborted[-1]),
                                                    key=marker_order)
        if split:
            start = bisect_left(aborted, marker_order(new[0]), key=marker_order)
            overlap = aborted[start:]
            known = set(overlap)
            missing = [a for a in new[:split] if a not in known]
            if missing:
                aborted[start:] = _unique(merge(overlap, missing, key=marker_order))
        aborted.extend(_unique(new[split:]))

    def last_stable_offset(self, high_watermark: int) -> int:
        if self._tail_lso is not None:
            return min(self._tail_lso, high_watermark)
        return high_watermark if self._first_open is None \
            else min(self._first_open, high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        return aborted_between(self.aborted, start, end)

    def drop_before(self, log_start: int) -> None:
        self.aborted = aborted_from(self.aborted, log_start)


def _unique(ordered: Iterable[AbortedTxn]) -> list[AbortedTxn]:
    """``ordered`` (by marker offset) without repeats (a tail may carry an entry twice)."""
    out: list[AbortedTxn] = []
    for entry in ordered:
        if not out or out[-1] != entry:
            out.append(entry)
    return out
