"""The background index builder of a partition's owner (`bmq serve`, `bmq broker`).

A daemon thread walks the partitions this process owns whose topic sets ``bmq.index.fields``.
For each, it reads the log from where its indexes end up to the high watermark (durable data
only, closed and active segments alike, through the log's own reads), turns the batches into one
chunk per field, and writes the chunks beside the segments (``bmq.field_index.store``). Records are
parsed and chunks sorted by the C module ``_fieldindex`` without the GIL, so building never
holds up the event loop for long and never blocks a produce or a fetch; the thread yields
between stretches (``PAUSE_S``).

Crash safety: a chunk is written whole or not at all, and only ever from durable data (below
the high watermark, which no owner ever truncates), so after kill -9 the next owner resumes at
the end of the chunks it finds. Small chunks are merged (``_merge``, up to
``MAX_MERGED_ENTRIES`` entries) so a lookup reads few files; the merged chunk is written before
its parts are deleted, and queries take whichever covers more.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable

from bmq.field_index import chunk
from bmq.field_index.extract import index_batches
from bmq.field_index.fields import Field
from bmq.field_index.store import ChunkFile, IndexStore, chain
from bmq.protocol.errors import KafkaError
from bmq.protocol.records import iter_batches
from bmq.storage.log import PartitionLog

log = logging.getLogger(__name__)

INTERVAL_S = 1.0
READ_BYTES = 1 << 20
CHUNK_BYTES = 16 << 20          # log bytes indexed into one chunk at most
MAX_MERGED_ENTRIES = 4_000_000
MIN_RECORDS = 2000              # a chunk is written for this many new offsets ...
MAX_WAIT_S = 3.0                # ... or for fewer, once they waited this long
PAUSE_S = 0.001                 # between stretches: the event loop gets the GIL back

OwnedLogs = Callable[[], Iterable[tuple[str, int, PartitionLog]]]
FieldsOf = Callable[[str], list[Field]]
EverIndexed = Callable[[str], bool]


class IndexBuilder:
    def __init__(self, store: IndexStore, owned: OwnedLogs, fields_of: FieldsOf,
                 ever_indexed: EverIndexed, interval_s: float = INTERVAL_S) -> None:
        self._store = store
        self._owned = owned
        self._fields_of = fields_of
        self._ever_indexed = ever_indexed
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # (topic, partition) -> the field spec last seen (dropped fields' files are removed)
        self._seen: dict[tuple[str, int], tuple[Field, ...]] = {}
        # (topic, partition) -> when offsets not yet indexed were first seen (see _due)
        self._pending_since: dict[tuple[str, int], float] = {}
        # (topic, partition, field) -> its chain of chunks, as this builder left it
        self._chains: dict[tuple[str, int, Field], list[ChunkFile]] = {}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="bmq-index", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:
                log.exception("index builder pass failed; retrying")
            self._stop.wait(self._interval)

    def run_once(self) -> bool:
        """One pass over the owned partitions; True if anything was indexed."""
        worked = False
        owned = list(self._owned())
        self._forget_gone({(topic, partition) for topic, partition, _ in owned})
        # Once per topic and pass: a broker with tens of thousands of partitions runs a pass
        # a second, mostly over topics without an index.
        fields_of: dict[str, tuple[Field, ...]] = {}
        for topic, partition, partition_log in owned:
            if self._stop.is_set():
                break
            fields = fields_of.get(topic)
            if fields is None:
                fields = fields_of[topic] = tuple(self._fields_of(topic))
            key = (topic, partition)
            try:
                # First sight (an index dropped while no owner ran) or a change of fields:
                # remove the files of fields no longer indexed. Internal topics have none,
                # nor, on first sight, a topic that never had an index (no listing for it).
                seen = self._seen.get(key)
                if seen != fields and not topic.startswith("__") and \
                        (seen is not None or self._ever_indexed(topic)):
                    self._forget_dropped(topic, partition, fields)
                self._seen[key] = fields
                while fields and not self._stop.is_set() and \
                        self._build(topic, partition, partition_log, fields):
                    worked = True
                    time.sleep(PAUSE_S)
            except KafkaError as error:   # retention moved the start, the log closed: retry
                log.info("index of %s-%d: %s", topic, partition, error)
                self._drop_state(topic, partition)
            except OSError as error:
                log.warning("index of %s-%d: storage: %s", topic, partition, error)
                self._drop_state(topic, partition)
        return worked

    def _forget_gone(self, owned: set[tuple[str, int]]) -> None:
        """Drop what this builder remembers of partitions it no longer owns."""
        for key in [k for k in self._seen if k not in owned]:
            del self._seen[key]
            self._pending_since.pop(key, None)
            self._drop_state(*key)

    def _drop_state(self, topic: str, partition: int) -> None:
        for key in [k for k in self._chains if k[:2] == (topic, partition)]:
            del self._chains[key]

    def _forget_dropped(self, topic: str, partition: int, fields: tuple[Field, ...]) -> None:
        keep = {f.dir_name for f in fields}
        for name in self._store.indexed_dirs(topic, partition):
            if name not in keep:
                self._store.delete_dir(topic, partition, name)
        self._drop_state(topic, partition)

    def _chain(self, topic: str, partition: int, field: Field) -> list[ChunkFile]:
        key = (topic, partition, field)
        known = self._chains.get(key)
        if known is None:
            store = self._store
            store.delete(topic, partition, field, store.temporary_files(topic, partition, field))
            files = store.files(topic, partition, field)
            known = self._chains[key] = chain(files)
            unused = set(files) - set(known)
            store.delete(topic, partition, field, [f.name for f in unused])
        return known

    def _build(self, topic: str, partition: int, partition_log: PartitionLog,
               fields: tuple[Field, ...]) -> bool:
        """Index the next stretch of the log (at most ``CHUNK_BYTES``); False if none."""
        log_start, high_watermark = partition_log.log_start_offset, partition_log.high_watermark
        progress: dict[Field, int] = {}
        for field in fields:
            files = self._chain(topic, partition, field)
            expired = [f for f in files if f.end <= log_start]   # retention deleted their data
            if expired:
                self._store.delete(topic, partition, field, [f.name for f in expired])
                files = self._chains[(topic, partition, field)] = files[len(expired):]
            progress[field] = files[-1].end if files else log_start
        start = min(progress.values())
        behind = [f for f in fields if progress[f] == start]
        limit = min([p for p in progress.values() if p > start], default=high_watermark)
        if not self._due(topic, partition, high_watermark - start):
            return False
        pieces, end = self._read(partition_log, start, min(limit, high_watermark))
        if end <= start:
            return False
        built = index_batches(pieces, list(behind), start, end)
        if not any(owned is partition_log for *_, owned in self._owned()):
            return False        # closed meanwhile (moved, deleted): leave it to its owner
        for field, data in zip(behind, built.chunks, strict=True):
            made = self._store.write(topic, partition, field, start, end, data)
            self._chains[(topic, partition, field)].append(made)
            self._merge(topic, partition, field)
        return True

    def _due(self, topic: str, partition: int, pending: int) -> bool:
        """Whether ``pending`` unindexed offsets are worth a chunk now: ``MIN_RECORDS`` of them,
        or any that waited ``MAX_WAIT_S`` (fewer, bigger chunks: fewer writes to an object
        store and fewer merges; queries scan what is not indexed yet meanwhile)."""
        key = (topic, partition)
        if pending <= 0:
            self._pending_since.pop(key, None)
            return False
        since = self._pending_since.setdefault(key, time.monotonic())
        if pending >= MIN_RECORDS or time.monotonic() - since >= MAX_WAIT_S:
            del self._pending_since[key]
            return True
        return False

    def _read(self, partition_log: PartitionLog, start: int, limit: int
              ) -> tuple[list[bytes], int]:
        """Whole batches from ``start`` up to ``limit`` (or ``CHUNK_BYTES``) and where they
        end."""
        pieces: list[bytes] = []
        offset, total = start, 0
        while offset < limit and total < CHUNK_BYTES:
            data = bytes(partition_log.read(offset, READ_BYTES))
            next_offset = offset
            used = 0
            for pos, header in iter_batches(data):
                if header.base_offset >= limit:
                    break
                next_offset, used = header.next_offset, pos + header.size
            if used == 0:
                break
            pieces.append(data[:used])
            offset, total = next_offset, total + used
        return pieces, offset

    def _merge(self, topic: str, partition: int, field: Field) -> None:
        """Keep a field's chunks growing older-to-bigger, each at least twice the next (so a
        lookup reads O(log n) chunks and an entry is rewritten O(log n) times): merge the
        newest two while the older is not twice the newer."""
        files = self._chains[(topic, partition, field)]
        while len(files) >= 2:
            older, newer = (self._store.header_of(topic, partition, field, f).entries
                            for f in files[-2:])
            if older >= 2 * newer or older + newer > MAX_MERGED_ENTRIES:
                return
            pair = files[-2:]
            merged = chunk.merge([self._store.read(topic, partition, field, f) for f in pair])
            made = self._store.write(topic, partition, field, pair[0].start, pair[1].end,
                                     merged)
            files[-2:] = [made]
            with contextlib.suppress(OSError):
                self._store.delete(topic, partition, field, [f.name for f in pair])
