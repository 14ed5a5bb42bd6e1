"""Options of the ``bmq`` data source and the split of partitions into read ranges.

Offsets follow Spark's Kafka source: ``startingOffsets`` (default ``earliest``) and
``endingOffsets`` (default ``latest``) are ``earliest``, ``latest`` or JSON such as
``{"orders": {"0": 23, "1": -2}}`` where -2 means earliest and -1 latest. Partitions a JSON
value leaves out start at the earliest and end at the latest offset. Ranges end at the high
watermark at planning time at the latest: only durable data is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from bmq.readpath.filters import FilterError, compile_filter
from bmq.spark.ranges import ReadRange
from bmq.storage.base import Storage
from bmq.storage.factory import open_storage
from bmq.storage.log.durable import (
    DurableLog,
    DurableSegment,
    index_entries,
    list_partitions,
    open_durable,
    position_for,
)
from bmq.storage.partitions_root import describe_root, partitions_root_url, topic_dirs

EARLIEST = -2
LATEST = -1
DEFAULT_MAX_BYTES_PER_PARTITION = 64 << 20
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")

OffsetSpec = str | dict[str, dict[int, int]]


class OptionError(ValueError):
    """A data source option that cannot be used."""


def _bool(value: str | None, default: bool, name: str) -> bool:
    if value is None:
        return default
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, not {value!r}")


def parse_offsets(value: str | None, default: str, name: str) -> OffsetSpec:
    """``earliest``, ``latest`` or the per-topic JSON map of Spark's Kafka source."""
    if value is None or not str(value).strip():
        return default
    text = str(value).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise OptionError(f"{name}: expected earliest, latest or JSON, got {text!r}") from exc
    if not isinstance(data, dict):
        raise OptionError(f"{name}: JSON must map topics to {{partition: offset}}")
    spec: dict[str, dict[int, int]] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(f"{name}: offsets of topic {topic!r} must be an object")
        spec[topic] = {}
        for part, offset in parts.items():
            try:
                p = int(part)
            except ValueError:
                raise OptionError(f"{name}: bad partition {part!r} of {topic!r}") from None
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < -2:
                raise OptionError(f"{name}: bad offset {offset!r} for {topic}-{part}")
            spec[topic][p] = offset
    return spec


def _count(opts: dict[str, str], name: str) -> int | None:
    value = opts.get(name.lower())
    if value is None or not value.strip():
        return None
    try:
        count = int(value)
    except ValueError:
        raise OptionError(f"{name} must be a number of offsets, not {value!r}") from None
    if count <= 0:
        raise OptionError(f"{name} must be positive, not {count}")
    return count


_DURATION_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                      "d": 86_400_000}


def parse_duration_ms(value: str, name: str) -> int:
    """Spark's time strings (``15m``, ``10s``, ``500ms``; a bare number is milliseconds)."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", value.lower())
    if not match or match.group(2) not in ("", *_DURATION_UNITS_MS):
        raise OptionError(f"{name}: expected a duration such as 15m, 10s or 500ms, not "
                          f"{value!r}")
    return int(match.group(1)) * _DURATION_UNITS_MS.get(match.group(2), 1)


def _parse_partitions(value: str | None) -> list[int] | None:
    if value is None or not str(value).strip():
        return None
    try:
        parts = sorted({int(p) for p in str(value).split(",") if p.strip()})
    except ValueError:
        raise OptionError(f"partitions: expected numbers such as 0,2,5, got {value!r}") from None
    if any(p < 0 for p in parts):
        raise OptionError("partitions: negative partition")
    return parts


@dataclass(slots=True)
class SourceOptions:
    """Parsed options of the ``bmq`` data source (plain data: pickled to Spark's workers)."""

    storage: str
    topics: list[str]
    # subscribePattern: every topic whose whole name matches (instead of ``topics``), looked
    # up again at each micro-batch of a stream.
    topic_pattern: str | None = None
    partitions: list[int] | None = None
    starting: OffsetSpec = "earliest"
    ending: OffsetSpec = "latest"
    fail_on_data_loss: bool = True
    include_headers: bool = True
    verify_crc: bool = True
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES_PER_PARTITION
    storage_options: dict[str, str] = field(default_factory=dict)
    # Kafka's isolation levels (option ``isolationLevel``, or ``kafka.isolation.level`` as
    # Spark's Kafka source spells it): read_committed, BMQ's default (Spark's Kafka source
    # defaults to read_uncommitted), stops at the last stable offset and skips aborted
    # transactions; read_uncommitted reads everything durable.
    read_committed: bool = True
    # A view's filter (option ``filter``: its bmq.view.filter, read with its source as
    # ``topic``): only matching records, with the source's offsets, as a consumer of the view.
    record_filter: str | None = None
    # Streams only (Spark's Kafka source's options): offsets per micro-batch at most /
    # at least (waiting at most max_trigger_delay_ms for that many).
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    # Streams: the brokers' bootstrap servers to wait on for new data (option ``watch``) instead
    # of listing storage at every trigger, waiting at most watch_max_wait_ms per trigger.
    watch: str | None = None
    watch_max_wait_ms: int = 1000

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        opts = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
        storage = opts.get("storage") or opts.get("path")
        if not storage:
            raise OptionError("option storage is required: the URL the brokers were given "
                              "(`bmq serve --data-dir DIR`: DIR or file:///DIR; a cluster's "
                              "--storage URL such as s3://bucket/bmq), or its topics directory")
        topic = opts.get("topic") or opts.get("subscribe")
        pattern = opts.get("subscribepattern")
        if bool(topic) == bool(pattern):
            raise OptionError("give exactly one of the options topic (or subscribe: topics "
                              "separated by commas) and subscribePattern (a regular expression)")
        topics = [t.strip() for t in (topic or "").split(",") if t.strip()]
        if pattern:
            try:
                re.compile(pattern)
            except re.error as error:
                raise OptionError(f"subscribePattern {pattern!r}: {error}") from None
        try:
            max_bytes = int(opts.get("maxbytesperpartition", DEFAULT_MAX_BYTES_PER_PARTITION))
        except ValueError:
            raise OptionError("maxBytesPerPartition must be a number of bytes") from None
        if max_bytes <= 0:
            raise OptionError("maxBytesPerPartition must be positive")
        isolation = opts.get("isolationlevel") or opts.get("kafka.isolation.level") \
            or "read_committed"
        if isolation not in ISOLATION_LEVELS:
            raise OptionError(f"isolationLevel must be one of {', '.join(ISOLATION_LEVELS)}, "
                              f"not {isolation!r}")
        parsed = cls(
            storage=storage,
            topics=topics,
            topic_pattern=pattern,
            partitions=_parse_partitions(opts.get("partitions")),
            starting=parse_offsets(opts.get("startingoffsets"), "earliest", "startingOffsets"),
            ending=parse_offsets(opts.get("endingoffsets"), "latest", "endingOffsets"),
            fail_on_data_loss=_bool(opts.get("failondataloss"), True, "failOnDataLoss"),
            include_headers=_bool(opts.get("includeheaders"), True, "includeHeaders"),
            verify_crc=_bool(opts.get("verifycrc"), True, "verifyCrc"),
            max_bytes_per_partition=max_bytes,
            storage_options={k[len("storage."):]: v for k, v in opts.items()
                             if k.startswith("storage.")},
            read_committed=isolation == "read_committed",
            record_filter=opts.get("filter"),
            max_offsets_per_trigger=_count(opts, "maxOffsetsPerTrigger"),
            min_offsets_per_trigger=_count(opts, "minOffsetsPerTrigger"),
            max_trigger_delay_ms=parse_duration_ms(opts.get("maxtriggerdelay", "15m"),
                                                   "maxTriggerDelay"),
            watch=opts.get("watch") or None,
            watch_max_wait_ms=parse_duration_ms(opts.get("watchmaxwait", "1s"), "watchMaxWait"),
        )
        if parsed.record_filter is not None:
            try:
                compile_filter(parsed.record_filter)
            except FilterError as error:
                raise OptionError(f"filter: {error}") from None
        for spec, name in ((parsed.starting, "startingOffsets"),
                           (parsed.ending, "endingOffsets")):
            if isinstance(spec, dict) and not pattern:
                unknown = set(spec) - set(topics)
                if unknown:
                    raise OptionError(f"{name} names topics not read: {sorted(unknown)}")
        return parsed

    def open_storage(self) -> Storage:
        return open_storage(self.storage, self.storage_options or None)

    def resolved(self) -> SourceOptions:
        """These options with ``storage`` at the partitions' root (the brokers' URL is
        accepted; see ``bmq.storage.partitions_root``), resolved once by the driver so that
        tasks open it directly."""
        return replace(self, storage=partitions_root_url(self.storage,
                                                         self.storage_options or None))

    def select_topics(self, storage: Storage) -> list[str]:
        """The topics read: those named, or those the pattern matches now."""
        if self.topic_pattern is None:
            return list(self.topics)
        pattern = re.compile(self.topic_pattern)
        return [t for t in topic_dirs(storage) if pattern.fullmatch(t)]


def topic_not_found(storage: Storage, topic: str) -> OptionError:
    return OptionError(f"topic {topic!r} not found under {storage.url}: found "
                       f"{describe_root(storage)} there")


def _wanted(spec: OffsetSpec, topic: str, partition: int, default: int) -> int:
    if isinstance(spec, str):
        return EARLIEST if spec == "earliest" else LATEST
    return spec.get(topic, {}).get(partition, default)


@dataclass(slots=True, frozen=True)
class PartitionRange:
    view: DurableLog
    start: int
    end: int


def resolve_ranges(storage: Storage, opts: SourceOptions) -> list[PartitionRange]:
    """Every selected partition with its resolved ``[start, end)``."""
    result: list[PartitionRange] = []
    topics = opts.select_topics(storage)
    if not topics:
        raise OptionError(f"subscribePattern {opts.topic_pattern!r} matches no topic under "
                          f"{storage.url}: found {describe_root(storage)} there")
    for topic in topics:
        existing = list_partitions(storage, topic)
        if not existing:
            raise topic_not_found(storage, topic)
        chosen = existing
        if opts.partitions is not None:
            missing = sorted(set(opts.partitions) - set(existing))
            if missing:
                raise OptionError(f"topic {topic!r} has no partitions {missing}; it has "
                                  f"{existing}")
            chosen = opts.partitions
        for spec in (opts.starting, opts.ending):
            if isinstance(spec, dict):
                missing = sorted(set(spec.get(topic, {})) - set(existing))
                if missing:
                    raise OptionError(f"offsets given for partitions {missing} of {topic!r}, "
                                      f"which does not have them")
        for partition in chosen:
            view = open_durable(storage, topic, partition)
            start = _resolve(view, _wanted(opts.starting, topic, partition, EARLIEST),
                             opts.fail_on_data_loss, "starting", opts.read_committed)
            end = _resolve(view, _wanted(opts.ending, topic, partition, LATEST),
                           opts.fail_on_data_loss, "ending", opts.read_committed)
            if end < start:
                raise OptionError(f"{topic}-{partition}: starting offset {start} is after the "
                                  f"ending offset {end}")
            result.append(PartitionRange(view, start, end))
    return result


def _resolve(view: DurableLog, wanted: int, fail_on_data_loss: bool, kind: str,
             read_committed: bool) -> int:
    end = view.end(read_committed)
    if wanted == EARLIEST:
        return min(view.log_start_offset, end)
    if wanted == LATEST:
        return end
    if wanted < view.log_start_offset:
        if fail_on_data_loss and kind == "starting":
            raise OptionError(
                f"{view.topic}-{view.partition}: {kind} offset {wanted} is before the log start "
                f"offset {view.log_start_offset} (deleted by retention?); set failOnDataLoss to "
                f"false to start at the earliest offset instead")
        return view.log_start_offset
    return min(wanted, end)


def split_segment(storage: Storage, view: DurableLog, seg: DurableSegment, start: int,
                  end: int, max_bytes: int) -> list[ReadRange]:
    """Ranges covering offsets ``[start, end)`` of ``seg``, each at most about ``max_bytes``
    of the segment file, cut at batches the offset index points at."""
    lo = max(start, seg.base)
    hi = min(end, seg.next_offset)
    if lo >= hi:
        return []
    entries: list[tuple[int, int]] = []
    if lo > seg.base or hi < seg.next_offset or seg.size > max_bytes:
        entries = index_entries(storage, view, seg)
    hint_offset, start_pos = position_for(entries, lo)
    if hint_offset < 0:
        hint_offset, start_pos = seg.base, 0
    end_pos = seg.size
    for offset, pos in entries:
        if offset >= hi:
            end_pos = pos
            break
    cuts: list[tuple[int, int]] = []   # (offset, position) where a new range begins
    last = start_pos
    for offset, pos in entries:
        if offset <= lo or pos >= end_pos:
            continue
        if pos - last >= max_bytes:
            cuts.append((offset, pos))
            last = pos
    ranges: list[ReadRange] = []
    bounds = [(lo, start_pos, hint_offset), *[(o, p, o) for o, p in cuts]]
    for i, (offset, pos, hint) in enumerate(bounds):
        if i + 1 < len(bounds):
            stop_offset, stop_pos = bounds[i + 1][0], bounds[i + 1][1]
        else:
            stop_offset, stop_pos = hi, end_pos
        ranges.append(ReadRange(view.topic, view.partition, seg.base, offset, stop_offset,
                                pos, stop_pos, hint, seg.size))
    return ranges


def split_offsets(view: DurableLog, start: int, end: int,
                  max_bytes: int) -> list[ReadRange]:
    """Ranges of about ``max_bytes`` each (by the partition's average bytes per offset), read
    through ``PartitionLog.open_reader`` (``segment`` -1)."""
    span = view.high_watermark - view.log_start_offset
    per_offset = view.size_bytes / span if span > 0 else 1.0
    step = max(1, int(max_bytes / max(per_offset, 1e-9)))
    ranges = []
    for lo in range(start, end, step):
        hi = min(end, lo + step)
        size = max(1, int((hi - lo) * per_offset))
        ranges.append(ReadRange(view.topic, view.partition, -1, lo, hi, 0, size, lo, size))
    return ranges


def split_partition(storage: Storage, view: DurableLog, start: int, end: int,
                    max_bytes: int, read_committed: bool = True) -> list[ReadRange]:
    if view.via_reader:
        ranges = split_offsets(view, start, end, max_bytes)
    else:
        ranges = [r for seg in view.segments_between(start, end)
                  for r in split_segment(storage, view, seg, start, end, max_bytes)]
    if read_committed and view.aborted:
        ranges = [replace(r, aborted=tuple(
            (a.producer_id, a.first_offset, a.last_offset) for a in view.aborted
            if a.last_offset >= r.start_offset and a.first_offset < r.end_offset))
            for r in ranges]
    return ranges


def plan(opts: SourceOptions, storage: Storage | None = None) -> list[ReadRange]:
    """The read ranges of a query, partition by partition in offset order."""
    own = storage is None
    store = opts.open_storage() if storage is None else storage
    try:
        ranges: list[ReadRange] = []
        for pr in resolve_ranges(store, opts):
            ranges.extend(split_partition(store, pr.view, pr.start, pr.end,
                                          opts.max_bytes_per_partition, opts.read_committed))
        return ranges
    finally:
        if own:
            store.close()
