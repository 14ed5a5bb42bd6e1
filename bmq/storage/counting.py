"""A storage that counts the reads made through it (data reads, whole-file reads, listings and
metadata lookups) and otherwise passes everything to the storage it wraps. The proxy serves
through one, so its metrics show how much its consumers cost the shared storage."""

from __future__ import annotations

from collections.abc import Callable

from bmq.storage.base import AppendFile, BytesLike, ReadFile, Storage


class _CountingReadFile(ReadFile):
    def __init__(self, inner: ReadFile, count: Callable[[], None]) -> None:
        self._inner = inner
        self._count = count

    def pread(self, position: int, size: int) -> bytes:
        self._count()
        return self._inner.pread(position, size)

    def close(self) -> None:
        self._inner.close()


class CountingStorage(Storage):
    def __init__(self, inner: Storage, count: Callable[[], None]) -> None:
        self._inner = inner
        self._count = count
        self.supports_append = inner.supports_append
        self.durable_sync = inner.durable_sync
        self.exact_size = inner.exact_size

    @property
    def url(self) -> str:
        return self._inner.url

    def open_append(self, path: str) -> AppendFile:
        return self._inner.open_append(path)

    def open_read(self, path: str) -> ReadFile:
        return _CountingReadFile(self._inner.open_read(path), self._count)

    def truncate(self, path: str, size: int) -> None:
        self._inner.truncate(path, size)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        self._count()
        return self._inner.read_range(path, start, length)

    def read_all(self, path: str) -> bytes:
        self._count()
        return self._inner.read_all(path)

    def write_atomic(self, path: str, data: BytesLike, durable: bool = True) -> None:
        self._inner.write_atomic(path, data, durable)

    def size(self, path: str) -> int:
        self._count()
        return self._inner.size(path)

    def exists(self, path: str) -> bool:
        self._count()
        return self._inner.exists(path)

    def list(self, path: str) -> list[str]:
        self._count()
        return self._inner.list(path)

    def makedirs(self, path: str) -> None:
        self._inner.makedirs(path)

    def delete(self, path: str) -> None:
        self._inner.delete(path)

    def delete_tree(self, path: str) -> None:
        self._inner.delete_tree(path)

    def claim(self, path: str) -> None:
        self._inner.claim(path)

    def close(self) -> None:
        self._inner.close()
