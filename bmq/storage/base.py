"""The one storage interface every byte of BMQ goes through.

A ``Storage`` is rooted at a directory (a local path, ``hdfs://nn/bmq``, ``memory://x`` ...) and
every method takes a path *relative to that root*, with ``/`` as the separator. The
implementations: ``LocalStorage`` (plain paths and ``file://``: raw ``os`` calls, pwritev,
fdatasync, pread), ``HdfsStorage`` (``hdfs://``: hdfs-native, hsync) and ``FsspecStorage`` (any
fsspec filesystem: others that append, S3 and other object stores that do not).
``open_storage`` (in ``bmq.storage.factory``) picks one from a URL.

Capabilities are flags so callers can choose a layout:

* ``supports_append``: files can be reopened and appended to; the partition log's segment
  files grow in place there. Object stores (S3, GCS, Azure Blob) cannot append;
  ``PartitionLog.open`` uses the object layout on them (``bmq.storage.log.object_layout``:
  every flush writes one immutable object and a small manifest lists the objects), relying
  only on ``write_atomic`` (one PUT), ``read_range``/``open_read`` (ranged GETs), ``list`` and
  ``delete``.
* ``exact_size``: ``size`` is the readable length even of a file another client is still
  appending to (not so on HDFS).
* ``durable_sync``: ``AppendFile.sync`` really forces the bytes to stable media (fsync) rather
  than only handing them to the filesystem (fsspec's generic ``flush``).
* ``fences_writers``: opening a file for appending takes the write right from any writer that
  still has it open, even in this process (HDFS's lease recovery): a write that hangs can be
  left behind, its file reopened, and nothing it does later reaches the file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from types import TracebackType
from typing import TypeAlias

BytesLike: TypeAlias = bytes | bytearray | memoryview


def nbytes(buf: BytesLike) -> int:
    """Length in bytes of a buffer (a memoryview's ``len`` counts items, not bytes)."""
    return buf.nbytes if isinstance(buf, memoryview) else len(buf)


class AppendFile(ABC):
    """A file opened for appending; ``position`` is the size it will have after the writes."""

    position: int

    @abstractmethod
    def write(self, buffers: Sequence[BytesLike]) -> int:
        """Append all ``buffers`` (gathered into as few syscalls as possible); return bytes."""

    @abstractmethod
    def sync(self) -> None:
        """Make everything written so far durable (fsync where the filesystem allows)."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> AppendFile:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class ReadFile(ABC):
    """A file opened for positional reads; safe to share between threads."""

    @abstractmethod
    def pread(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position`` (fewer only at the end of the file)."""

    @abstractmethod
    def close(self) -> None: ...


class Storage(ABC):
    """Files under one root. All paths are relative to the root and use ``/``."""

    supports_append: bool = True
    durable_sync: bool = True
    # ``size`` includes everything another client's flushed appends made readable. HDFS's
    # file status lags for a file still open for writing (the last block's length counts
    # only once the block completes), so recovery reads past it there.
    exact_size: bool = True
    fences_writers: bool = False

    @property
    @abstractmethod
    def url(self) -> str:
        """Where this storage is rooted (for logs and error messages)."""

    # -- files written in place ----------------------------------------------------------------
    @abstractmethod
    def open_append(self, path: str) -> AppendFile:
        """Open ``path`` for appending, creating it (durably, directory entry included) if new."""

    @abstractmethod
    def open_read(self, path: str) -> ReadFile:
        """Open ``path`` for positional reads (callers cache the handle)."""

    @abstractmethod
    def truncate(self, path: str, size: int) -> None:
        """Cut ``path`` to ``size`` bytes, durably. Not for files with open append handles."""

    # -- whole files ---------------------------------------------------------------------------
    @abstractmethod
    def read_range(self, path: str, start: int, length: int) -> bytes:
        """Up to ``length`` bytes of ``path`` from ``start`` (fewer at the end of the file)."""

    @abstractmethod
    def read_all(self, path: str) -> bytes: ...

    @abstractmethod
    def write_atomic(self, path: str, data: BytesLike, durable: bool = True) -> None:
        """Replace ``path`` with ``data`` all at once (temp file + rename), durably unless
        ``durable`` is False: then a crash of the storage host may leave the file as it was,
        or empty (for files rebuilt when missing or short, such as segment indexes)."""

    # -- namespace -----------------------------------------------------------------------------
    @abstractmethod
    def size(self, path: str) -> int: ...

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def list(self, path: str) -> list[str]:
        """Names (not paths) of the entries of directory ``path``, sorted; [] if it is missing."""

    @abstractmethod
    def makedirs(self, path: str) -> None:
        """Create directory ``path`` and its parents; fine if it exists."""

    @abstractmethod
    def delete(self, path: str) -> None:
        """Remove file ``path``; fine if it does not exist."""

    @abstractmethod
    def delete_tree(self, path: str) -> None:
        """Remove directory ``path`` and everything under it; fine if it does not exist."""

    def claim(self, path: str) -> None:  # noqa: B027 - optional hook
        """Take the exclusive right to write ``path`` from any other writer, before reading
        it to its end and appending (HDFS: lease recovery, which also makes the bytes of its
        last, open block readable; nothing to do elsewhere)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections (nothing to do for most filesystems)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"
