"""Partition data on shared storage: Kafka's segmented log over a pluggable ``Storage``."""

from bmq.storage.base import AppendFile, BytesLike, ReadFile, Storage
from bmq.storage.factory import open_storage
from bmq.storage.fsspec_storage import FsspecStorage
from bmq.storage.local import LocalStorage
from bmq.storage.log import AppendResult, LogConfig, LogReader, PartitionLog
from bmq.storage.objects import ObjectPartitionLog

__all__ = [
    "AppendFile",
    "AppendResult",
    "BytesLike",
    "FsspecStorage",
    "LocalStorage",
    "LogConfig",
    "LogReader",
    "ObjectPartitionLog",
    "PartitionLog",
    "ReadFile",
    "Storage",
    "open_storage",
]
