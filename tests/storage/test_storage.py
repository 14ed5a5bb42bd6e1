from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bmq.storage import FsspecStorage, LocalStorage, Storage, open_storage

from .conftest import STORAGE_KINDS, make_storage


def test_files(storage: Storage) -> None:
    storage.makedirs("a/b")
    storage.makedirs("a/b")                       # idempotent
    assert storage.list("a") == ["b"]
    assert storage.list("missing") == []
    assert not storage.exists("a/b/f")
    with storage.open_append("a/b/f") as appender:
        assert appender.position == 0
        assert appender.write([b"hello ", memoryview(bytearray(b"wor")), b"", b"ld"]) == 11
        appender.sync()
        assert appender.position == 11
    with storage.open_append("a/b/f") as appender:
        assert appender.position == 11
        appender.write([b"!"])
        appender.sync()
    assert storage.size("a/b/f") == 12
    assert storage.read_all("a/b/f") == b"hello world!"
    assert storage.read_range("a/b/f", 6, 5) == b"world"
    assert storage.read_range("a/b/f", 10, 100) == b"d!"
    reader = storage.open_read("a/b/f")
    assert reader.pread(0, 5) == b"hello"
    with storage.open_append("a/b/f") as appender:   # readers see later appends
        appender.write([b"?"])
        appender.sync()
    assert reader.pread(11, 10) == b"!?"
    reader.close()
    storage.truncate("a/b/f", 5)
    assert storage.read_all("a/b/f") == b"hello"
    storage.write_atomic("a/b/g", b"one")
    storage.write_atomic("a/b/g", b"two")
    assert storage.read_all("a/b/g") == b"two"
    assert storage.list("a/b") == ["f", "g"]
    storage.delete("a/b/g")
    storage.delete("a/b/g")                       # missing is fine
    assert storage.list("a/b") == ["f"]
    storage.delete_tree("a")
    storage.delete_tree("a")
    assert not storage.exists("a/b/f")
    assert storage.list("a") == []


def test_many_buffers_in_one_write(storage: Storage) -> None:
    storage.makedirs("d")
    buffers = [bytes([i % 251]) * (i % 7 + 1) for i in range(5000)]   # more than IOV_MAX
    with storage.open_append("d/f") as appender:
        appender.write(buffers)
        appender.sync()
    assert storage.read_all("d/f") == b"".join(buffers)


def test_concurrent_reads_and_appends(storage: Storage) -> None:
    storage.makedirs("c")
    appender = storage.open_append("c/f")
    reader = storage.open_read("c/f")
    chunk = bytes(range(256)) * 16
    errors: list[BaseException] = []
    done = threading.Event()

    def read_loop() -> None:
        try:
            while not done.is_set():
                size = storage.size("c/f") // len(chunk) * len(chunk)
                if size:
                    assert reader.pread(size - len(chunk), len(chunk)) == chunk
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    thread = threading.Thread(target=read_loop)
    thread.start()
    for _ in range(300):
        appender.write([chunk])
    appender.sync()
    done.set()
    thread.join()
    appender.close()
    reader.close()
    assert not errors, errors
    assert storage.size("c/f") == 300 * len(chunk)


def test_open_storage_picks_the_implementation(tmp_path: Path) -> None:
    plain = open_storage(str(tmp_path / "plain"))
    assert isinstance(plain, LocalStorage)
    url = open_storage(f"file://{tmp_path}/url")
    assert isinstance(url, LocalStorage)
    assert url.url == f"{tmp_path}/url"
    memory = open_storage("memory://bmq-open-storage-test")
    assert isinstance(memory, FsspecStorage)
    assert memory.supports_append
    memory.write_atomic("x", b"1")
    assert open_storage("memory://bmq-open-storage-test").read_all("x") == b"1"
    memory.delete_tree("")


def test_object_stores_are_flagged() -> None:
    class FakeS3:
        protocol = ("s3", "s3a")

    assert not FsspecStorage(FakeS3(), "bucket/prefix").supports_append


@pytest.mark.parametrize("kind", STORAGE_KINDS)
def test_capabilities(kind: str, tmp_path: Path) -> None:
    storage = make_storage(kind, tmp_path)
    assert storage.supports_append
    assert storage.durable_sync == (kind != "fsspec-memory")
