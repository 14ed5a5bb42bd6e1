"""The append layout (local directories, HDFS): segment files that grow by appends, each with an
offset index and a time index file, and a checkpoint per owner epoch.

Write path: ``append_writes`` (one gathered write and one sync per segment a flush touches).

Checkpoint format (``{topic}/{partition}/checkpoint.json``, replaced atomically)::

    {"version": 1, "topic": "t", "partition": 0,
     "log_start_offset": 120,            # DeleteRecords / retention low watermark
     "recovery_point": 5000,             # everything below is synced and vouched for
     "high_watermark": 5000,             # same value: durable end at checkpoint time
     "segments": [{"base_offset": 0, "size": 1073741000, "next_offset": 3000,
                   "max_timestamp": 1700000000123, "offset_of_max_timestamp": 2990,
                   "created_ms": 1699990000000,
                   "index_entries": 262000, "time_index_entries": 261000}, ...],
     "producers": {"<producer id>": {"epoch": 3, "last_ms": 1700000000456,
                   "batches": [[first_seq, last_seq, base_offset, last_offset, max_ts],
                               ...]}}}   # the last 5 batches of each producer, oldest first

``index_entries``/``time_index_entries`` count the entries known to be synced in the index
files; sealed segments' indexes are loaded (and checked, and rebuilt if bad) on first use.

Leader epochs: one writer per partition (append layout: local directories, HDFS).
``PartitionLog.open(..., epoch=N)`` means "the controller made me the owner for leader epoch
N". Epoch 0 is the single-node mode and keeps exactly the layout above. Files, under
``{topic}/{partition}/``::

    checkpoint.json                          epoch 0's checkpoint (version 1, as above)
    checkpoint-{epoch:010d}.json             the checkpoint of the owner of ``epoch`` (version 2)
    {base:020d}.log / .index / .timeindex    segments written by epoch 0
    {base:020d}-{epoch:010d}.log / ...       segments started by the owner of ``epoch``
    {stem}-i{epoch:010d}.index / .timeindex  indexes a later owner wrote for a segment it sealed

Version 2 checkpoints add ``"epoch"`` (whose file it is), ``"data_epoch"`` (the epoch whose
writer may have appended past the recorded sizes: the file's own epoch, except in a claim) and,
per segment, ``"epoch"`` (its file name) and ``"index_epoch"`` (if its index files were written
by a later owner). The checkpoint of the highest epoch is the truth; everyone ignores the
others (a stale owner may go on rewriting its own).

Takeover, ``open`` with epoch N: (1) read the newest checkpoint, epoch E; E > N raises
FENCED_LEADER_EPOCH; (2) write ``checkpoint-N.json`` as a *claim* (E's content, data epoch
E's); (3) list the files and recover: segments the checkpoint lists are trusted at their
recorded sizes, the data epoch's active segment and later rolls are scanned (CRC-checked) to
the end of their valid data, and sealed there - never truncated or appended to, the old owner
may still hold them; (4) start a new segment ``{end:020d}-{N:010d}.log``, write the epoch-N
checkpoint, delete files no checkpoint of N refers to and older checkpoints. Before a flush is
acknowledged (and before retention deletes files) an owner with epoch > 0 lists the directory
and fails with FENCED_LEADER_EPOCH if a higher epoch's checkpoint exists. So a flush the old
owner acknowledged was synced before its check, the check before the claim, the claim before
our scan: the scan sees it. Bytes it writes after the claim are past the size we sealed at (or
in files no checkpoint of N lists) and never become visible. A fenced owner that nevertheless
deleted files (retention racing the claim) is the one window left; the owner reopening in the
same epoch (a restart) continues its own active segment as in epoch 0.
"""

from __future__ import annotations

import logging
from typing import Any

from bmq.storage.base import Storage
from bmq.storage.log import append_writes
from bmq.storage.log.aborted_index import load_sealed
from bmq.storage.log.append_writes import append_index, open_appender
from bmq.storage.log.config import Queued, clock_ms, parse_files
from bmq.storage.log.fencing import FencedEpochError
from bmq.storage.log.host import LogHost
from bmq.storage.log.layout import Layout
from bmq.storage.log.offset_index import read_indexes, write_index_files
from bmq.storage.log.recovery import (
    Recovered,
    claim,
    close_gap,
    continues,
    listed_segments,
    recover_segment,
)
from bmq.storage.log.scan import visible_size
from bmq.storage.log.segments import LogSegments
from bmq.storage.log.state import CHECKPOINT_VERSION, CHECKPOINT_VERSION_EPOCHS, CheckpointFiles
from bmq.storage.producer_state import ProducerStateTable
from bmq.storage.segment import (
    Segment,
)

logger = logging.getLogger(__name__)


class AppendLayout(Layout):
    kept_at_end = 1   # the active segment

    @staticmethod
    def state_files(storage: Storage, partition_dir: str) -> CheckpointFiles:
        return CheckpointFiles(storage, partition_dir)

    def load(self, log: LogHost) -> Recovered:
        storage = log.storage
        log_segments = log.segments
        epoch = log.leader_epoch
        names = storage.list(log.dir)       # (checkpoints lie beside the segments)
        if not names:
            storage.makedirs(log.dir)
        top, ckpt = log.state_files.newest(names)
        if top > epoch:
            raise FencedEpochError(f"{log}: epoch {epoch} is older than the current {top}", top)
        files = parse_files(names, ".log")
        if ckpt is not None:
            data_epoch = int(ckpt["data_epoch"])
        else:
            data_epoch = max([e for _b, e, _s in files if e <= epoch], default=epoch)
        if epoch > 0 and epoch > top:
            claim(log, ckpt, data_epoch)
            names = storage.list(log.dir)   # what the old owner wrote before our claim
            files = parse_files(names, ".log")
        takeover = data_epoch < epoch
        for name in names:
            if ".tmp." in name:
                storage.delete(log_segments.path(name))

        ck_metas: list[dict[str, int]] | None = None
        recovery_point = 0
        log_start = 0
        producers = ProducerStateTable()
        if ckpt is not None and ckpt.get("segments") is not None:
            try:
                ck_metas = [{k: int(v) for k, v in m.items()} for m in ckpt["segments"]]
                recovery_point = int(ckpt["recovery_point"])
                log_start = int(ckpt["log_start_offset"])
                producers = ProducerStateTable.from_json(ckpt["producers"])
                load_sealed(producers, storage, log.dir)
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                logger.warning("%s: malformed checkpoint (%s), scanning everything", log, exc)
                ck_metas, recovery_point, log_start = None, 0, 0
                producers = ProducerStateTable()

        # The chain of segments to recover: what the checkpoint lists, then the files its
        # data epoch rolled to afterwards. Without a checkpoint: every file, in offset order
        # (``listed_segments``), skipping what a cleaned segment replaced.
        chain: list[tuple[Segment, dict[str, int] | None]] = []
        if ck_metas is not None:
            for ck_meta in ck_metas:
                chain.append((Segment.from_meta(ck_meta), ck_meta))
            last_base = ck_metas[-1]["base_offset"] if ck_metas else -1
            for base, e, seq in sorted(files):
                # (seq >= 0: a segment of the log cleaner, which only a checkpoint can list)
                if e == data_epoch and base > last_base and seq < 0:
                    chain.append((Segment(base, epoch=e), None))
        else:
            # (A cleaned segment counts once its index files, written last, exist: the
            # cleaner's crash mid-write leaves a file shorter than the originals it replaces.)
            finished = {n.split(".", 1)[0].split("-i", 1)[0] for n in names
                        if n.endswith(".timeindex")}
            chain = [(seg, None) for seg in listed_segments(files, epoch)
                     if seg.seq < 0 or seg.stem in finished]
            if chain:
                log_start = chain[0][0].base
        ck_last = ck_metas[-1] if ck_metas else None

        now = clock_ms()
        segments: list[Segment] = []
        scanned: list[Segment] = []
        sizes: dict[str, int] = {}      # segment file -> its size as found
        scanning = False
        for seg, meta in chain:
            own = seg.epoch == epoch   # our own file (a restart in the same epoch)
            if segments and ck_metas is None:
                if not continues(segments[-1], seg):
                    continue
            elif segments and seg.base < segments[-1].next_offset:
                logger.warning("%s: segment %d does not follow offset %d; dropping it and later "
                               "ones", log, seg.base, segments[-1].next_offset)
                break
            elif segments:
                # (A roll after a copied log's gap: the gap ends the segment before, as the
                # writer had it.)
                segments[-1].next_offset = seg.base
            path = log_segments.path(seg.log_file)
            try:
                # (HDFS: the old writer's lease; its open block is unreadable until then)
                storage.claim(path)
                file_size = sizes[seg.log_file] = visible_size(log.storage, path)
            except FileNotFoundError:
                logger.warning("%s: segment file %s is missing", log, seg.log_file)
                break
            if not scanning and meta is not None and meta is not ck_last \
                    and file_size >= meta["size"]:
                # Sealed before the checkpoint: trusted at its recorded size.
                if file_size > meta["size"] and own:
                    storage.truncate(path, meta["size"])
                segments.append(seg)
                continue
            scanning = True
            start = 0
            vouched = False     # the checkpoint vouches for the segment up to ``start``
            fresh = Segment(seg.base, epoch=seg.epoch, seq=seg.seq)
            if meta is not None and file_size >= meta["size"]:
                seg.idx_rel = seg.idx_pos = seg.tidx_ts = seg.tidx_rel = None
                indexes = read_indexes(log_segments, seg)
                if indexes is not None:
                    seg.set_indexes(*indexes)
                    start, vouched = seg.size, True   # its indexes valid too
                else:
                    seg = fresh
            else:
                seg = fresh
            valid_end = recover_segment(log_segments, seg, start, file_size, producers, now,
                                        gaps_cleaned=ck_metas is None)
            if not vouched or valid_end > start:
                # Bytes the checkpoint did not vouch for (an empty segment it lists, as after
                # a clean stop, needs neither a sync nor new index files).
                scanned.append(seg)
            if segments and ck_metas is None:
                close_gap(segments[-1], seg, now)
            segments.append(seg)
            if valid_end < file_size:
                logger.warning("%s: %s ends at %d of its %d bytes (torn or corrupt tail, or "
                               "written after the takeover)", log, seg.log_file, valid_end,
                               file_size)
                if own:
                    storage.truncate(path, valid_end)
                break

        if takeover:
            # Seal the previous owner's segments where we found them; write a new one.
            if segments and segments[-1].size == 0:
                dropped = segments.pop()
                if dropped in scanned:
                    scanned.remove(dropped)
            start_at = segments[-1].next_offset if segments else max(log_start,
                                                                      recovery_point)
            segments.append(Segment(start_at, epoch=epoch))
        if not segments:
            segments.append(Segment(max(log_start, recovery_point), epoch=epoch))
        # (A new segment is empty: its file is made below; its index files at its first
        # index entry.)
        log_end = segments[-1].next_offset
        if log_end < recovery_point:
            logger.warning("%s: log ends at %d, before its recovery point %d", log, log_end,
                           recovery_point)
            producers.truncate(log_end)
        log_start = min(max(log_start, segments[0].base), log_end)
        while len(segments) > 1 and segments[0].next_offset <= log_start:
            segments.pop(0)

        # Make what the scan accepted durable, with fresh index files. (A segment covered by
        # the checkpoint needs neither: its bytes and index entries were synced already.)
        # Index files of another owner's segment get names of our own epoch.
        for seg in scanned:
            if seg not in segments:
                continue
            if seg.epoch != epoch:
                seg.index_epoch = epoch
            try:
                appender = storage.open_append(log_segments.path(seg.log_file))
                try:
                    appender.sync()
                finally:
                    appender.close()
            except OSError as exc:   # e.g. HDFS while the old owner still holds the lease
                if seg.epoch == epoch:
                    raise
                logger.info("%s: could not sync %s of the previous owner: %s", log,
                            seg.log_file, exc)
            write_index_files(log_segments, seg)

        active = segments[-1]
        active.bytes_since_index = active.size - (active.idx_pos[-1] if active.idx_pos else 0)
        # The active segment's file at its durable size now (a torn tail cut off before any
        # reader sees it); its append handle waits for the first write, so a partition nobody
        # writes keeps no file open (a restart of 50,000 partitions opened as many).
        if sizes.get(active.log_file, -1) != active.size:
            open_appender(log_segments, active).close()
        return Recovered(segments, log_start, producers, names, ckpt if top == epoch else None)

    def write(self, log: LogHost, queue: list[Queued]) -> None:
        append_writes.write(log, queue)

    def make_file(self, segments: LogSegments, seg: Segment) -> None:
        open_appender(segments, seg).close()

    def before_checkpoint(self, log: LogHost) -> None:
        active = log.segments.by_offset[-1]
        if active.idx_pending or active.tidx_pending:
            append_index(log.segments, active, bytes(active.idx_pending),
                               bytes(active.tidx_pending))

    def state(self, log: LogHost) -> dict[str, Any]:
        epoch = log.leader_epoch
        with log.segments.lock:
            segments = [seg.meta() for seg in log.segments.by_offset]
            legacy = epoch == 0 and all(len(m) == 8 for m in segments)
            state: dict[str, Any] = {
                "version": CHECKPOINT_VERSION if legacy else CHECKPOINT_VERSION_EPOCHS,
                "topic": log.topic,
                "partition": log.partition,
                "log_start_offset": log.segments.log_start_offset,
                "recovery_point": log.segments.high_watermark,
                "high_watermark": log.segments.high_watermark,
                "segments": segments,
            }
            if not legacy:
                state["epoch"] = state["data_epoch"] = epoch
            # As of the same high watermark (read_committed readers elsewhere use both).
            state["producers"] = log.durable_producers.to_json()
        return state

    def tail_segments(self, segments: LogSegments) -> list[Segment]:
        """The active segment, and the one before in case it rolled."""
        return segments.by_offset[-2:]



