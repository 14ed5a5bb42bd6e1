"""Partition data on shared storage: Kafka's segmented log over a pluggable ``Storage``."""

from bmq.storage.base import AppendFile, BytesLike, ReadFile, Storage
from bmq.storage.factory import open_storage
from bmq.storage.fsspec_storage import FsspecStorage
from bmq.storage.local import LocalStorage
from bmq.storage.log import AppendResult, FencedEpochError, LogConfig, LogReader, PartitionLog

__all__ = [
    "AppendFile",
    "AppendResult",
    "BytesLike",
    "FencedEpochError",
    "FsspecStorage",
    "LocalStorage",
    "LogConfig",
    "LogReader",
    "PartitionLog",
    "ReadFile",
    "Storage",
    "open_storage",
]
