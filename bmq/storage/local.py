"""Local filesystem storage: the fast path, straight onto ``os`` calls.

Appends are ``os.pwritev`` at a tracked position (one syscall for a whole group commit, split
only past IOV_MAX buffers), syncs are ``os.fdatasync`` (which, for appended data, forces the new
file size too), reads are ``os.pread`` on a cached descriptor, and every file creation, rename or
removal that matters is followed by an fsync of the parent directory.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import threading
from collections.abc import Sequence

from bmq.storage.base import AppendFile, BytesLike, ReadFile, Storage, nbytes

try:
    _IOV_MAX = max(16, min(int(os.sysconf("SC_IOV_MAX")), 1024))
except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
    _IOV_MAX = 1024

_sync = getattr(os, "fdatasync", os.fsync)
_O_BINARY = getattr(os, "O_BINARY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_tmp_counter = itertools.count()


def fsync_dir(path: str) -> None:
    """Persist a directory's entries (file creations, renames, removals)."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
    except OSError:  # pragma: no cover - e.g. platforms that cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def pwrite_all(fd: int, buffers: Sequence[BytesLike], position: int) -> int:
    """Write every buffer at ``position`` with as few pwritev calls as possible."""
    pending = [b for b in buffers if nbytes(b)]
    total = 0
    while pending:
        chunk = pending[:_IOV_MAX]
        written = os.pwritev(fd, chunk, position)
        if written <= 0:  # pragma: no cover - the kernel reports errors by raising
            raise OSError("pwritev wrote nothing")
        position += written
        total += written
        done = 0
        while done < len(chunk) and written >= nbytes(chunk[done]):
            written -= nbytes(chunk[done])
            done += 1
        del pending[:done]
        if written:  # a partial write inside one buffer: continue after its written part
            pending[0] = memoryview(pending[0]).cast("B")[written:]
    return total


class LocalAppendFile(AppendFile):
    def __init__(self, fd: int, position: int) -> None:
        self._fd = fd
        self.position = position

    def write(self, buffers: Sequence[BytesLike]) -> int:
        written = pwrite_all(self._fd, buffers, self.position)
        self.position += written
        return written

    def sync(self) -> None:
        _sync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


class LocalReadFile(ReadFile):
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def pread(self, position: int, size: int) -> bytes:
        data = os.pread(self._fd, size, position)
        if len(data) == size or not data:
            return data
        # A short read that is not at end of file (rare; e.g. interrupted): read the rest.
        parts = [data]
        got = len(data)
        while got < size:
            more = os.pread(self._fd, size - got, position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


class LocalStorage(Storage):
    supports_append = True
    durable_sync = True

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)

    @property
    def url(self) -> str:
        return self.root

    def _abs(self, path: str) -> str:
        return os.path.join(self.root, path) if path else self.root

    def open_append(self, path: str) -> AppendFile:
        full = self._abs(path)
        flags = os.O_WRONLY | _O_BINARY | _O_CLOEXEC
        try:
            fd = os.open(full, flags | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            fd = os.open(full, flags)
            return LocalAppendFile(fd, os.fstat(fd).st_size)
        fsync_dir(os.path.dirname(full))
        return LocalAppendFile(fd, 0)

    def open_read(self, path: str) -> ReadFile:
        return LocalReadFile(os.open(self._abs(path), os.O_RDONLY | _O_BINARY | _O_CLOEXEC))

    def truncate(self, path: str, size: int) -> None:
        fd = os.open(self._abs(path), os.O_WRONLY | _O_BINARY | _O_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        reader = self.open_read(path)
        try:
            return reader.pread(start, length)
        finally:
            reader.close()

    def read_all(self, path: str) -> bytes:
        with open(self._abs(path), "rb") as f:
            return f.read()

    def write_atomic(self, path: str, data: BytesLike, durable: bool = True) -> None:
        full = self._abs(path)
        tmp = f"{full}.tmp.{os.getpid()}.{threading.get_ident()}.{next(_tmp_counter)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_BINARY | _O_CLOEXEC, 0o644)
        try:
            pwrite_all(fd, [data], 0)
            if durable:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.close(fd)
        os.replace(tmp, full)
        if durable:
            fsync_dir(os.path.dirname(full))

    def size(self, path: str) -> int:
        return os.stat(self._abs(path)).st_size

    def exists(self, path: str) -> bool:
        return os.path.exists(self._abs(path))

    def list(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self._abs(path)))
        except FileNotFoundError:
            return []

    def makedirs(self, path: str) -> None:
        full = self._abs(path)
        if os.path.isdir(full):
            return
        os.makedirs(full, exist_ok=True)
        # Persist the new entries all the way up to the root.
        parent = os.path.dirname(full)
        while True:
            fsync_dir(parent)
            if len(parent) <= len(self.root) or parent == os.path.dirname(parent):
                break
            parent = os.path.dirname(parent)

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._abs(path))

    def delete_tree(self, path: str) -> None:
        full = self._abs(path)
        shutil.rmtree(full, ignore_errors=True)
        fsync_dir(os.path.dirname(full))
