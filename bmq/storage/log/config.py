"""A partition log's settings, what an append answers, and the small helpers every part of the
log shares."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import BatchHeader
from bmq.storage.segment import MAX_RELATIVE_OFFSET, parse_stem

DEFAULT_PRODUCER_EXPIRATION_MS = 24 * 3600 * 1000   # Kafka's producer.id.expiration.ms
SCAN_CHUNK = 8 << 20
# A read returns at most this much (or one batch, if larger) whatever max_bytes asks for.
MAX_READ_BYTES = 64 << 20
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]+$")

# Per batch in the queue: size, base offset, last offset, max timestamp,
# producer id, producer epoch, first sequence, last sequence, transaction kind (TXN_*).
BatchMeta = tuple[int, int, int, int, int, int, int, int, int]
# What ``append`` queues for the next flush: the batches, when they came, their metadata.
Queued = tuple[memoryview, int, list[BatchMeta]]


@dataclass(slots=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000      # -1 = unlimited
    retention_bytes: int = -1                     # -1 = unlimited
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"    # or "LogAppendTime"
    # What the produce path does to a topic's batches before they reach the log: "producer"
    # keeps them as sent; a codec name (or "uncompressed") recompresses them at this level
    # (None: the codec's default). A compacted topic refuses records without a key.
    compression_type: str = "producer"
    compression_level: int | None = None
    compact: bool = False
    # The log cleaner (bmq.cleaner), for compacted topics: Kafka's topic configs of the same
    # names, and how long the files of segments it replaced stay for readers elsewhere.
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    file_delete_delay_ms: int = 60_000
    # Scheduled delivery (bmq.delay.enable): produced records with a schedule header are held
    # in the partition's timer log (bmq.coordinators.timers) instead of this log.
    delay_enable: bool = False
    # Cluster mode (epoch > 0): how often flushes also publish the checkpoint, which is what
    # readers in other processes (``PartitionLog.open_reader``) see. Object stores publish on
    # every flush (the manifest is part of the flush).
    publish_interval_ms: int = 1000


@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


def clock_ms() -> int:
    """Wall-clock milliseconds (record and segment timestamps)."""
    return time.time_ns() // 1_000_000


def check_name(topic: str, partition: int) -> None:
    if not _TOPIC_RE.match(topic) or topic in (".", "..") or partition < 0:
        raise ValueError(f"invalid topic partition {topic!r}-{partition}")


def check_copied(headers: list[BatchHeader], log_end: int, high_watermark: int) -> None:
    """Copied batches must continue the log (gaps allowed) and stay within what one segment
    indexes from the high watermark (the object layout's next object starts there)."""
    if headers[0].base_offset < log_end:
        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                         f"batches start at {headers[0].base_offset}, the log ends at {log_end}")
    end = log_end
    for h in headers:
        if h.base_offset < end:
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             f"batch at {h.base_offset} does not follow offset {end - 1}")
        end = h.next_offset
    if end - 1 - high_watermark > MAX_RELATIVE_OFFSET:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"batches up to offset {end - 1} leave a "
                         f"gap after {high_watermark} that a segment cannot index")


def parse_files(names: list[str], suffix: str) -> list[tuple[int, int, int]]:
    """(base, epoch, seq) of every segment file among ``names``."""
    out = []
    for name in names:
        if name.endswith(suffix):
            parsed = parse_stem(name[: -len(suffix)])
            if parsed is not None:
                out.append(parsed)
    return out
