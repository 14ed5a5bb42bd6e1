"""The loader: what both layouts do to open a partition as its owner. Claim it before looking at
the data, scan what earlier owners left past their last state document, and return what was
recovered (``Recovered``: the log installs it and publishes its state); once the owner's fence
check has passed, collect the files no state document refers to any more."""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from bmq.storage.log.aborted_index import SUFFIX as CHUNK_SUFFIX
from bmq.storage.log.host import LogHost
from bmq.storage.log.scan import record_producer_batch, valid_batches
from bmq.storage.log.segments import LogSegments
from bmq.storage.log.state import CHECKPOINT_VERSION_EPOCHS
from bmq.storage.producer_state import ProducerStateTable
from bmq.storage.segment import Segment, parse_stem

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Recovered:
    """What a layout's loader found: the log ends where its last segment does."""

    segments: list[Segment]
    log_start_offset: int
    producers: ProducerStateTable   # as of the end of the log
    #: The partition's files as listed before the new owner's fence check (none is a newer
    #: owner's): those no state document of this owner names are garbage.
    listed: list[str]
    #: The state document the loader started from, if it is this owner's epoch's (a restart):
    #: not written again when the log it describes is unchanged.
    stored_state: dict[str, Any] | None = None


def listed_segments(files: list[tuple[int, int, int]], epoch: int) -> list[Segment]:
    """Without a state document, the segment files (``parse_files``) recovery may take, up to
    ``epoch``'s, by base offset; at one base the newest writer's first, so a cleaned segment
    comes before the original it replaced (deleted only ``file.delete.delay.ms`` after the
    swap) and, of two originals, the higher epoch's (what a new owner wrote after the claim)."""
    originals: dict[int, int] = {}
    others: list[tuple[int, int, int]] = []
    for base, e, seq in files:
        if e > epoch:
            continue
        if seq < 0:
            originals[base] = max(originals.get(base, e), e)
        else:
            others.append((base, e, seq))
    found = others + [(base, e, -1) for base, e in originals.items()]
    found.sort(key=lambda f: (f[0], -f[1], -f[2]))
    return [Segment(base, epoch=e, seq=seq) for base, e, seq in found]


def continues(last: Segment, seg: Segment) -> bool:
    """Whether ``seg``, next in ``listed_segments``, continues a log recovered up to ``last``:
    not if it starts within ``last`` (an original that ``last``, a cleaned segment, replaced)
    or at its base (``last`` is empty and ``seg`` an older writer's file)."""
    return seg.base >= last.next_offset and seg.base != last.base


def close_gap(last: Segment, seg: Segment, now: int) -> None:
    """``seg`` continues the log after ``last``: offsets between are a gap the cleaner left
    (it removed the records at the end of ``last``), which reads skip in a cleaned segment;
    ``now`` stands for when it was cleaned (tombstones stay ``delete.retention.ms`` more)."""
    if seg.base > last.next_offset:
        last.next_offset = seg.base
        if last.cleaned_ms < 0:
            last.cleaned_ms = now


def claim(log: LogHost, state: dict[str, Any] | None, data_epoch: int) -> None:
    """Write this epoch's state file before looking at the data: from now on the previous
    owner's flushes fail their fence check, so whatever it acknowledged is already on
    storage when we scan. The claim lists exactly what ``state`` listed."""
    document = dict(state) if state is not None else {
        "version": CHECKPOINT_VERSION_EPOCHS, "topic": log.topic,
        "partition": log.partition, "log_start_offset": 0, "recovery_point": 0,
        "high_watermark": 0, "segments": None, "producers": {}}
    document["version"] = CHECKPOINT_VERSION_EPOCHS
    document["epoch"] = log.leader_epoch
    document["data_epoch"] = data_epoch
    log.state_files.write(log.leader_epoch,
                          json.dumps(document, separators=(",", ":")).encode())


def collect_garbage(log: LogHost, names: list[str]) -> None:
    """Remove what no longer belongs to the log: files of segments not in it (deleted,
    dropped, or written by a fenced owner), chunks of the aborted-transaction index no
    state document names (replaced by the cleaner, or written by a crashed one) and the
    state files of lower epochs. (``names`` were listed before this owner's fence check
    passed: none is a newer owner's file.)"""
    keep: set[str] = set()
    for seg in log.segments.by_offset:
        keep.update(seg.file_names())
    with log.io_lock:   # no chunk sealed or rewritten meanwhile
        named = {name for name, _end in log.durable_producers.sealed}
        for name in names:
            if name.endswith(CHUNK_SUFFIX) and name not in named and not log.closed:
                with contextlib.suppress(FileNotFoundError):
                    log.storage.delete(log.segments.path(name))
    for name in names:
        if log.closed:
            return      # handed over or shutting down: the next owner collects the rest
        if name in keep:
            continue
        for suffix in (".log", ".index", ".timeindex"):
            if name.endswith(suffix):
                parsed = parse_stem(name[: -len(suffix)].split("-i", 1)[0])
                if parsed is not None and parsed[1] <= log.leader_epoch:
                    log.storage.delete(log.segments.path(name))
                break
    if log.leader_epoch > 0:     # (epoch 0, `bmq serve`: no lower epoch to list)
        for e in log.state_files.epochs():
            if e < log.leader_epoch:
                log.state_files.delete(e)


def recover_segment(segments: LogSegments, seg: Segment, start: int, file_size: int,
                    producers: ProducerStateTable, now: int, gaps_cleaned: bool = False) -> int:
    """Scan [start, file_size) of a segment with full checks, extending ``seg`` (sizes,
    indexes, timestamps) and ``producers``; return the end of the valid data. Offsets may
    skip (the cleaner's gaps, a copied log's); with ``gaps_cleaned`` (no state document says
    which segments the cleaner wrote) a segment where they do is taken as cleaned (``now``)."""
    path = segments.path(seg.log_file)
    interval = segments.config.index_interval_bytes
    assert seg.idx_rel is not None and seg.idx_pos is not None
    assert seg.tidx_ts is not None and seg.tidx_rel is not None
    since = start - (seg.idx_pos[-1] if seg.idx_pos else 0)
    end = start
    for pos, h in valid_batches(segments.storage, path, start, file_size, seg.next_offset,
                                seg.base):
        if gaps_cleaned and h.base_offset != seg.next_offset and seg.cleaned_ms < 0:
            seg.cleaned_ms = now
        if seg.created_ms < 0:
            seg.created_ms = h.max_timestamp if h.max_timestamp >= 0 else now
        if h.max_timestamp > seg.max_timestamp:
            seg.max_timestamp = h.max_timestamp
            seg.offset_of_max_timestamp = h.base_offset
        if since >= interval:
            seg.idx_rel.append(h.base_offset - seg.base)
            seg.idx_pos.append(pos)
            if seg.max_timestamp > seg.last_time_entry:
                seg.tidx_ts.append(seg.max_timestamp)
                seg.tidx_rel.append(seg.offset_of_max_timestamp - seg.base)
            since = 0
        since += h.size
        record_producer_batch(segments.storage, path, pos, h, producers, now)
        end = pos + h.size
        seg.size = end
        seg.next_offset = h.next_offset
    return end
