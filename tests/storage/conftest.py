from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from bmq.storage import FsspecStorage, LocalStorage, LogConfig, PartitionLog, Storage, open_storage
from tests.seaweedfs import SeaweedFS

STORAGE_KINDS = ["local", "fsspec-file", "fsspec-memory"]
# PartitionLog-level tests also run on S3 (SeaweedFS), unless they look at files directly.
LOG_STORAGE_KINDS = [*STORAGE_KINDS, "s3"]
FILE_ONLY_MODULES = {"test_storage", "test_recovery"}
FILE_ONLY_TESTS = {
    "test_segment_roll_by_bytes", "test_segment_roll_by_time",
    "test_oversized_batch_gets_its_own_segment", "test_index_based_reads_across_many_segments",
    "test_delete_records", "test_retention_by_time", "test_retention_by_size",
    "test_invalid_names_and_object_stores", "test_failed_flush_does_not_poison_durable_state",
}


def s3_storage(server: SeaweedFS) -> Storage:
    return open_storage(server.url(f"tests/{uuid.uuid4().hex}"), server.storage_options())


def make_storage(kind: str, tmp_path: Path, request: pytest.FixtureRequest | None = None
                 ) -> Storage:
    if kind == "local":
        return LocalStorage(str(tmp_path / "data"))
    if kind == "fsspec-file":
        return FsspecStorage(fsspec.filesystem("file"), str(tmp_path / "data"))
    if kind == "fsspec-memory":
        fs = MemoryFileSystem(global_store=False, skip_instance_cache=True)
        return FsspecStorage(fs, "/bmq")
    if kind == "s3":
        assert request is not None
        return s3_storage(request.getfixturevalue("seaweedfs"))
    raise AssertionError(kind)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each storage-using test on every kind it applies to (file-level tests skip S3)."""
    if "storage" not in metafunc.fixturenames:
        return
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    file_only = module in FILE_ONLY_MODULES or metafunc.function.__name__ in FILE_ONLY_TESTS
    metafunc.parametrize("storage", STORAGE_KINDS if file_only else LOG_STORAGE_KINDS,
                         indirect=True)


@pytest.fixture
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    return make_storage(request.param, tmp_path, request)


OpenLog = Callable[..., PartitionLog]


@pytest.fixture
def open_log(storage: Storage) -> Iterator[OpenLog]:
    """Open (or reopen) topic "t" partition 0 on the test's storage; closes leftovers."""
    opened: list[PartitionLog] = []

    def _open(config: LogConfig | None = None, topic: str = "t", partition: int = 0,
              **kwargs: int | str) -> PartitionLog:
        cfg = config or LogConfig(**kwargs)  # type: ignore[arg-type]
        log = PartitionLog.open(storage, topic, partition, cfg)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        log._shut()  # release handles without writing (some tests simulate crashes)
