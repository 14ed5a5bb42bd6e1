"""Index chunks on the shared storage, beside the partition's segments:
``TOPIC/PARTITION/field-index/f-<field name in hex>/<start>-<end>.fidx`` (offsets zero-padded
to 20 digits), the same on a local directory, HDFS or an object store: every chunk is written
whole by one ``write_atomic`` (a rename, or one PUT) and never changed, so a reader sees a chunk
entirely or not at all, and a builder killed mid-write leaves at most a temporary file.

Which chunks count (``chain``): from the lowest start, each step takes the chunk that covers the
current offset and reaches furthest. Chunks a merge replaced, or that a crashed builder wrote
twice, overlap that chain and are ignored until deleted. How far a field is indexed is the end
of its chain: derived from the files, so any broker or proxy knows it, and a builder restarted
after kill -9 resumes there."""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from bmq.field_index import chunk
from bmq.field_index.fields import Field
from bmq.storage.base import Storage

INDEX_DIR = "field-index"
SUFFIX = ".fidx"
_HEADERS_CACHED = 20_000


@dataclass(frozen=True, slots=True, order=True)
class ChunkFile:
    start: int
    end: int
    name: str

    @classmethod
    def parse(cls, name: str) -> ChunkFile | None:
        if not name.endswith(SUFFIX):
            return None
        start, sep, end = name[:-len(SUFFIX)].partition("-")
        if not sep or not start.isdigit() or not end.isdigit() or int(end) <= int(start):
            return None
        return cls(int(start), int(end), name)

    @classmethod
    def named(cls, start: int, end: int) -> ChunkFile:
        return cls(start, end, f"{start:020d}-{end:020d}{SUFFIX}")


def chain(files: Iterable[ChunkFile]) -> list[ChunkFile]:
    """The chunks that count (see the module notes), in offset order."""
    pending = sorted(files)
    result: list[ChunkFile] = []
    at = pending[0].start if pending else 0
    while True:
        best = max((f for f in pending if f.start <= at < f.end), key=lambda f: f.end,
                   default=None)
        if best is None:
            return result
        result.append(best)
        at = best.end


def field_dir(topic: str, partition: int, field: Field) -> str:
    return f"{topic}/{partition}/{INDEX_DIR}/{field.dir_name}"


class IndexStore:
    """Reads and writes the chunks of every field index on one storage. Chunk headers are
    cached (chunks never change); lookups read two small ranges per chunk."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._headers: OrderedDict[str, chunk.ChunkHeader] = OrderedDict()
        self._lock = threading.Lock()

    def files(self, topic: str, partition: int, field: Field) -> list[ChunkFile]:
        names = self.storage.list(field_dir(topic, partition, field))
        return sorted(f for f in map(ChunkFile.parse, names) if f is not None)

    def temporary_files(self, topic: str, partition: int, field: Field) -> list[str]:
        """Leftovers of writes a crash interrupted (local and HDFS temporary files)."""
        return [n for n in self.storage.list(field_dir(topic, partition, field))
                if ".tmp." in n]

    def indexed_dirs(self, topic: str, partition: int) -> list[str]:
        return self.storage.list(f"{topic}/{partition}/{INDEX_DIR}")

    def write(self, topic: str, partition: int, field: Field, start: int, end: int,
              data: bytes) -> ChunkFile:
        made = ChunkFile.named(start, end)
        directory = field_dir(topic, partition, field)
        self.storage.makedirs(directory)
        self.storage.write_atomic(f"{directory}/{made.name}", data)
        return made

    def read(self, topic: str, partition: int, field: Field, file: ChunkFile) -> bytes:
        return self.storage.read_all(f"{field_dir(topic, partition, field)}/{file.name}")

    def delete(self, topic: str, partition: int, field: Field, names: Iterable[str]) -> None:
        directory = field_dir(topic, partition, field)
        for name in names:
            self.storage.delete(f"{directory}/{name}")
            with self._lock:
                self._headers.pop(f"{directory}/{name}", None)

    def delete_dir(self, topic: str, partition: int, name: str) -> None:
        self.storage.delete_tree(f"{topic}/{partition}/{INDEX_DIR}/{name}")

    def header(self, path: str) -> chunk.ChunkHeader:
        with self._lock:
            cached = self._headers.get(path)
            if cached is not None:
                self._headers.move_to_end(path)
                return cached
        header = chunk.ChunkHeader.decode(self.storage.read_range(path, 0, chunk.HEADER_SIZE))
        with self._lock:
            self._headers[path] = header
            while len(self._headers) > _HEADERS_CACHED:
                self._headers.popitem(last=False)
        return header

    def header_of(self, topic: str, partition: int, field: Field,
                  file: ChunkFile) -> chunk.ChunkHeader:
        return self.header(f"{field_dir(topic, partition, field)}/{file.name}")

    def lookup(self, topic: str, partition: int, field: Field, files: list[ChunkFile],
               text: bytes) -> set[int]:
        """Base offsets of the batches that may hold records whose ``field`` is ``text``,
        according to ``files`` (raises FileNotFoundError when one was merged away)."""
        hashed = chunk.value_hash(text)
        directory = field_dir(topic, partition, field)
        found: set[int] = set()
        for file in files:
            path = f"{directory}/{file.name}"
            header = self.header(path)
            if header.entries == 0:
                continue
            first, last = chunk.bucket_range(
                self.storage.read_range(path, header.bucket_position(hashed), 8))
            if last > first:
                entries = self.storage.read_range(path, header.entry_position(first),
                                                  (last - first) * chunk.ENTRY_SIZE)
                found.update(chunk.offsets_with(entries, hashed))
        return found

    def totals(self, topic: str, partition: int, field: Field, files: list[ChunkFile]
               ) -> tuple[int, int]:
        """(records, malformed values) the chunks ``files`` indexed."""
        directory = field_dir(topic, partition, field)
        records = malformed = 0
        for file in files:
            with contextlib.suppress(FileNotFoundError):
                header = self.header(f"{directory}/{file.name}")
                records += header.records
                malformed += header.malformed
        return records, malformed
