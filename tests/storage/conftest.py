from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from bmq.storage import FsspecStorage, LocalStorage, LogConfig, PartitionLog, Storage

STORAGE_KINDS = ["local", "fsspec-file", "fsspec-memory"]


def make_storage(kind: str, tmp_path: Path) -> Storage:
    if kind == "local":
        return LocalStorage(str(tmp_path / "data"))
    if kind == "fsspec-file":
        return FsspecStorage(fsspec.filesystem("file"), str(tmp_path / "data"))
    if kind == "fsspec-memory":
        fs = MemoryFileSystem(global_store=False, skip_instance_cache=True)
        return FsspecStorage(fs, "/bmq")
    raise AssertionError(kind)


@pytest.fixture(params=STORAGE_KINDS)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    return make_storage(request.param, tmp_path)


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
