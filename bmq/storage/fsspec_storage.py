"""Storage on any fsspec filesystem that can append to files (local, HDFS, memory, ...).

fsspec file objects are not thread-safe and some filesystems hand out *the same* object for
every open of a path (the memory filesystem returns its stored ``BytesIO`` for "rb" and "ab"), so
all operations that touch a file's bytes through a handle hold a per-path lock; append handles
seek to the end before each write so a reader moving a shared position cannot misplace data.

``sync`` flushes the handle and, when the handle is backed by a local descriptor, fsyncs it; on
other filesystems it is whatever ``flush`` means there (for HDFS via pyarrow: ``hflush``, data in
the memory of every datanode of the pipeline), reported by ``durable_sync``.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import threading
from collections.abc import Sequence
from typing import Any

from bmq.storage.base import AppendFile, BytesLike, ReadFile, Storage, nbytes

# Filesystems without appends: object stores. PartitionLog uses its object layout on them.
NO_APPEND_PROTOCOLS = frozenset({
    "s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl", "oss", "r2", "http", "https",
})
_LOCAL_PROTOCOLS = frozenset({"file", "local"})
_LAGGING_SIZE_PROTOCOLS = frozenset({"hdfs", "arrow_hdfs", "webhdfs", "viewfs"})
_tmp_counter = itertools.count()


def _try_fsync(f: Any) -> bool:
    try:
        fd = f.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False
    if not isinstance(fd, int) or fd < 0:
        return False
    os.fsync(fd)
    return True


class FsspecAppendFile(AppendFile):
    def __init__(self, f: Any, lock: threading.Lock, position: int) -> None:
        self._f = f
        self._lock = lock
        self.position = position

    def write(self, buffers: Sequence[BytesLike]) -> int:
        total = 0
        with self._lock:
            # (a pure append stream cannot seek: its writes land at the end anyway)
            with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
                self._f.seek(0, 2)
            for buf in buffers:
                self._f.write(buf)
                total += nbytes(buf)
            self._f.flush()
        self.position += total
        return total

    def sync(self) -> None:
        with self._lock:
            self._f.flush()
        _try_fsync(self._f)

    def close(self) -> None:
        with self._lock:
            self._f.close()


class FsspecReadFile(ReadFile):
    def __init__(self, fs: Any, path: str, lock: threading.Lock) -> None:
        self._fs = fs
        self._path = path
        self._lock = lock
        self._f: Any = fs.open(path, "rb")

    def pread(self, position: int, size: int) -> bytes:
        with self._lock:
            self._f.seek(position)
            data: bytes = self._f.read(size)
            if len(data) < size:
                # Some fsspec files fix their size when opened; the file may have grown since.
                fresh = self._fs.open(self._path, "rb")
                if fresh is not self._f:
                    self._f.close()
                    self._f = fresh
                self._f.seek(position)
                data = self._f.read(size)
            return bytes(data)

    def close(self) -> None:
        with self._lock:
            self._f.close()


class ObjectReadFile(ReadFile):
    """Positional reads of an immutable object: one ranged GET each (no read-ahead cache: a
    file object's default block would fetch megabytes for a 100-byte header read)."""

    def __init__(self, fs: Any, path: str) -> None:
        self._fs = fs
        self._path = path

    def pread(self, position: int, size: int) -> bytes:
        if size <= 0:
            return b""
        return bytes(self._fs.cat_file(self._path, start=position, end=position + size))

    def close(self) -> None:
        pass


class FsspecStorage(Storage):
    def __init__(self, fs: Any, root: str = "") -> None:
        self.fs = fs
        self.root = root.rstrip("/") if root not in ("", "/") else root
        protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
        self.protocol = str(protocols[0])
        self.object_store = any(p in NO_APPEND_PROTOCOLS for p in protocols)
        self.supports_append = not self.object_store
        self.durable_sync = any(p in _LOCAL_PROTOCOLS for p in protocols)
        self.exact_size = not any(p in _LAGGING_SIZE_PROTOCOLS for p in protocols)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    @property
    def url(self) -> str:
        return f"{self.protocol}://{self.root}"

    def _abs(self, path: str) -> str:
        if not path:
            return self.root
        if not self.root:
            return path
        return f"{self.root.rstrip('/')}/{path}"

    def _lock(self, full: str) -> threading.Lock:
        with self._locks_guard:
            lock = self._locks.get(full)
            if lock is None:
                lock = self._locks[full] = threading.Lock()
            return lock

    def open_append(self, path: str) -> AppendFile:
        full = self._abs(path)
        lock = self._lock(full)
        with lock:
            f = self.fs.open(full, "ab")
            try:
                position = int(f.seek(0, 2))
            except (OSError, ValueError, io.UnsupportedOperation):
                position = int(self.fs.size(full))
        return FsspecAppendFile(f, lock, position)

    def open_read(self, path: str) -> ReadFile:
        full = self._abs(path)
        if self.object_store:
            return ObjectReadFile(self.fs, full)   # a missing object fails its first read
        lock = self._lock(full)
        with lock:
            return FsspecReadFile(self.fs, full, lock)

    def truncate(self, path: str, size: int) -> None:
        full = self._abs(path)
        with self._lock(full):
            try:
                f = self.fs.open(full, "r+b")
            except (OSError, ValueError, NotImplementedError, io.UnsupportedOperation):
                f = None
            if f is not None:
                try:
                    f.truncate(size)
                    f.flush()
                    _try_fsync(f)
                    return
                except (OSError, ValueError, NotImplementedError, io.UnsupportedOperation):
                    pass
                finally:
                    f.close()
            data = self.fs.cat_file(full, start=0, end=size)
        self.write_atomic(path, data)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        full = self._abs(path)
        with self._lock(full):
            return bytes(self.fs.cat_file(full, start=start, end=start + length))

    def read_all(self, path: str) -> bytes:
        full = self._abs(path)
        with self._lock(full):
            return bytes(self.fs.cat_file(full))

    def write_atomic(self, path: str, data: BytesLike, durable: bool = True) -> None:
        full = self._abs(path)
        if self.object_store:
            # Object stores: a PUT replaces the object all at once (and a rename is a copy).
            self.fs.pipe_file(full, bytes(data))
            return
        tmp = f"{full}.tmp.{os.getpid()}.{threading.get_ident()}.{next(_tmp_counter)}"
        with self.fs.open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                _try_fsync(f)
        with self._lock(full):
            try:
                self.fs.mv(tmp, full)
            except OSError:
                # Filesystems whose rename refuses an existing target (HDFS): not atomic there.
                if not self.fs.exists(full):
                    raise
                self.fs.rm_file(full)
                self.fs.mv(tmp, full)

    def _forget(self, full: str) -> None:
        """Drop cached listings: other processes change the namespace behind our back."""
        with contextlib.suppress(AttributeError, NotImplementedError):
            self.fs.invalidate_cache(full)

    def size(self, path: str) -> int:
        full = self._abs(path)
        self._forget(full)
        with self._lock(full):
            return int(self.fs.size(full))

    def exists(self, path: str) -> bool:
        full = self._abs(path)
        self._forget(full)
        return bool(self.fs.exists(full))

    def list(self, path: str) -> list[str]:
        full = self._abs(path)
        self._forget(full)
        try:
            entries = self.fs.ls(full, detail=False)
        except FileNotFoundError:
            return []
        own = full.rstrip("/")
        # (Object stores may list a "directory" marker as an entry of itself.)
        return sorted(str(e).rstrip("/").rsplit("/", 1)[-1] for e in entries
                      if str(e).rstrip("/") != own)

    def makedirs(self, path: str) -> None:
        if self.object_store:
            return   # object stores have no directories: keys imply them
        self.fs.makedirs(self._abs(path), exist_ok=True)

    def delete(self, path: str) -> None:
        full = self._abs(path)
        try:
            with self._lock(full):
                self.fs.rm_file(full)
        except FileNotFoundError:
            pass
        with self._locks_guard:
            self._locks.pop(full, None)

    def delete_tree(self, path: str) -> None:
        full = self._abs(path)
        self._forget(full)
        if self.fs.exists(full):
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm(full, recursive=True)
        prefix = full.rstrip("/") + "/"
        with self._locks_guard:
            for key in [k for k in self._locks if k.startswith(prefix)]:
                del self._locks[key]
