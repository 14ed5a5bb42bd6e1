"""``spark.readStream.format("bmq")``: BMQ partitions as a Structured Streaming source.

    query = (spark.readStream.format("bmq")
             .option("storage", "s3://bucket/bmq")          # the brokers' --storage URL
             .option("subscribe", "orders")
             .option("maxOffsetsPerTrigger", 100000)
             .load()
             .writeStream.format("parquet").option("path", "/lake/orders")
             .option("checkpointLocation", "/lake/_chk/orders")
             .trigger(processingTime="1 second").start())

Offsets are those of Spark's Kafka source, ``{"topic": {"partition": next offset}}``, kept in
Spark's checkpoint. Every micro-batch is planned from storage alone (``planning``: the durable
view of each partition, cut into read ranges), never through a broker, and ends at the high
watermark (read_committed: the last stable offset), so only durable, and for read_committed
only decided, data is read. Each ``latestOffset`` lists the topics (``subscribePattern``) and
partitions again, so new ones are picked up; a partition that appears starts at offset 0.

This reader lives in the driver's streaming Python process for the query's life (Spark keeps
that process), so it caches the views of the last listing for ``partitions``; the copy Spark
pickles for its read tasks only uses ``read``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from bmq.metadata.topics import TopicPartition
from bmq.spark.planning import (
    EARLIEST,
    LATEST,
    OptionError,
    SourceOptions,
    split_partition,
    topic_not_found,
)
from bmq.spark.ranges import DataLossError
from bmq.spark.tasks import BMQInputPartition, read_partition
from bmq.spark.watch import WatchUnavailable, partition_owners, wait_for_news
from bmq.storage.base import Storage
from bmq.storage.log.durable import DurableLog, list_partitions, open_durable

log = logging.getLogger("bmq.spark.streaming")

Offsets = dict[TopicPartition, int]
# ReadMaxRows with no real maximum: the default limit when only minOffsetsPerTrigger is set,
# so that Spark passes a limit (not ReadAllAvailable, which means "ignore the options": its
# Trigger.AvailableNow) and the minimum can be applied.
_NO_MAXIMUM = (1 << 63) - 1

# With ``watch``: how often the stream still lists storage in full (new topics and partitions,
# which no notification announces).
_FULL_LISTING_S = 10.0

_LOSS_WHEN_FAILING = (
    "Some data may have been lost because they are not available in BMQ any more; either the "
    "data was aged out by retention or the topic may have been deleted before all the data in "
    "the topic was processed. If you don't want your streaming query to fail on such cases, "
    'set the source option "failOnDataLoss" to "false".')
_LOSS_WHEN_WARNING = (
    "Some data may have been lost because they are not available in BMQ any more; either the "
    "data was aged out by retention or the topic may have been deleted before all the data in "
    "the topic was processed. If you want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "true".')


def offsets_to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """The checkpoint form (Spark's Kafka source's): ``{"topic": {"partition": offset}}``."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = offset
    return result


def offsets_from_json(data: dict[str, Any]) -> Offsets:
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


def rate_limit(start: Offsets, end: Offsets, limit: int) -> Offsets:
    """``end`` cut to at most ``limit`` offsets in all, shared by the partitions in proportion
    to what each has available (as Spark's Kafka source does), the rounding remainder going to
    the largest shares: the total never exceeds ``limit``."""
    lags = {tp: end[tp] - start.get(tp, 0) for tp in end}
    total = sum(max(lag, 0) for lag in lags.values())
    if total <= limit:
        return dict(end)
    shares = {tp: limit * lag // total for tp, lag in lags.items() if lag > 0}
    left = limit - sum(shares.values())
    for tp in sorted(shares, key=lambda tp: limit * lags[tp] % total, reverse=True)[:left]:
        shares[tp] += 1
    return {tp: start.get(tp, 0) + shares.get(tp, 0) if lags[tp] > 0 else end[tp]
            for tp in end}


class BMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._reset()

    def _reset(self) -> None:
        # Driver-side state, left out of the copies Spark pickles for read tasks.
        self._storage: Storage | None = None
        self._views: dict[TopicPartition, DurableLog] = {}
        self._last_batch = time.monotonic()
        self._available_now: Offsets | None = None
        self._listed_at = 0.0
        self._owners: dict[TopicPartition, tuple[str, int]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.options = state["options"]
        self._reset()

    # ------------------------------------------------------------------ storage
    def _store(self) -> Storage:
        if self._storage is None:
            self._storage = self.options.open_storage()
        return self._storage

    def _list(self) -> dict[TopicPartition, DurableLog]:
        """A fresh durable view of every partition read, as storage shows it now."""
        storage = self._store()
        views: dict[TopicPartition, DurableLog] = {}
        for topic in self.options.select_topics(storage):
            partitions = list_partitions(storage, topic)
            if self.options.partitions is not None:
                partitions = [p for p in partitions if p in self.options.partitions]
            for partition in partitions:
                views[(topic, partition)] = open_durable(storage, topic, partition)
        self._views = views
        self._listed_at = time.monotonic()
        self._owners = None   # partitions may have moved: ask the brokers again
        return views

    def _refresh(self, begin: Offsets) -> dict[TopicPartition, DurableLog]:
        """The views ``latestOffset`` works from. Without ``watch``: a full listing. With it:
        a full listing now and then (new topics and partitions), and while there is nothing
        new to read, a wait of up to ``watchMaxWait`` for the brokers to report a partition
        that changed, which alone is looked at again on storage."""
        opts = self.options
        if opts.watch is None or not self._views \
                or time.monotonic() - self._listed_at > _FULL_LISTING_S:
            self._list()
            if opts.watch is None:
                return self._views
        if self._available_now is not None or any(
                end > begin.get(tp, 0) for tp, end in self._ends(self._views).items()):
            return self._views   # something to read already, or no waiting (AvailableNow)
        try:
            if self._owners is None:
                self._owners = partition_owners(opts.watch, sorted({t for t, _p in self._views}))
            changed = wait_for_news(self._owners, {tp: view.high_watermark for tp, view
                                                   in self._views.items()},
                                    opts.watch_max_wait_ms)
        except WatchUnavailable as error:
            log.info("watch: %s; listing storage instead", error)
            return self._list()
        storage = self._store()
        for topic, partition in changed:
            self._views[(topic, partition)] = open_durable(storage, topic, partition)
        return self._views

    def _ends(self, views: dict[TopicPartition, DurableLog]) -> Offsets:
        return {tp: view.end(self.options.read_committed) for tp, view in views.items()}

    def _report_data_loss(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(f"{message}. {_LOSS_WHEN_FAILING}")
        log.warning("%s. %s", message, _LOSS_WHEN_WARNING)

    # ------------------------------------------------------------------ offsets
    def initialOffset(self) -> dict[str, Any]:
        views = self._list()
        if self.options.topic_pattern is None:
            for topic in self.options.topics:
                if not any(t == topic for t, _p in views):
                    raise topic_not_found(self._store(), topic)
        spec = self.options.starting
        offsets: Offsets = {}
        for (topic, partition), view in views.items():
            end = view.end(self.options.read_committed)
            wanted = EARLIEST if spec == "earliest" else LATEST if spec == "latest" else \
                spec.get(topic, {}).get(partition, EARLIEST) if isinstance(spec, dict) \
                else EARLIEST
            if wanted == EARLIEST:
                offsets[(topic, partition)] = min(view.log_start_offset, end)
            elif wanted == LATEST:
                offsets[(topic, partition)] = end
            elif wanted < view.log_start_offset:
                self._report_data_loss(
                    f"starting offset {wanted} of {topic}-{partition} is before its log start "
                    f"offset {view.log_start_offset}")
                offsets[(topic, partition)] = view.log_start_offset
            else:
                offsets[(topic, partition)] = min(wanted, end)
        if isinstance(spec, dict):
            missing = sorted({(t, p) for t, parts in spec.items() for p in parts}
                             - set(offsets))
            if missing:
                raise OptionError(f"startingOffsets names partitions that do not exist: "
                                  f"{', '.join(f'{t}-{p}' for t, p in missing)}")
        return offsets_to_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        opts = self.options
        if opts.max_offsets_per_trigger is None and opts.min_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(opts.max_offsets_per_trigger or _NO_MAXIMUM)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._ends(self._list())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start)
        views = self._refresh(begin)
        latest = self._ends(views)
        if self._available_now is not None:
            latest = {tp: min(end, self._available_now.get(tp, 0))
                      for tp, end in latest.items()}
        gone = sorted(set(begin) - set(latest))
        if gone:
            self._report_data_loss(f"Cannot find partitions {gone}; some data may have been "
                                   f"missed")
        # Never behind where the query already is (an end that went backwards is reported as
        # lost data when the batch is planned, as Spark's Kafka source does).
        target = {tp: max(end, begin.get(tp, 0)) for tp, end in latest.items()}
        if not isinstance(limit, ReadAllAvailable):
            available = sum(end - begin.get(tp, 0) for tp, end in target.items())
            minimum = self.options.min_offsets_per_trigger
            waited_ms = (time.monotonic() - self._last_batch) * 1000
            if minimum is not None and available < minimum \
                    and waited_ms < self.options.max_trigger_delay_ms:
                return start
            if isinstance(limit, ReadMaxRows) and limit.max_rows < available:
                target = rate_limit(begin, target, limit.max_rows)
        if target != begin:
            self._last_batch = time.monotonic()
        return offsets_to_json(target)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return offsets_to_json(self._ends(self._views)) if self._views else None

    # ------------------------------------------------------------------ planning and reading
    def _view(self, tp: TopicPartition, end: int) -> DurableLog | None:
        view = self._views.get(tp)
        if view is None or view.end(self.options.read_committed) < end:
            storage = self._store()
            if tp[1] not in list_partitions(storage, tp[0]):
                return None
            view = open_durable(storage, tp[0], tp[1])
            self._views[tp] = view
        return view

    def partitions(self, start: dict[str, Any], end: dict[str, Any]
                   ) -> Sequence[InputPartition]:
        begin, until = offsets_from_json(start), offsets_from_json(end)
        ranges = []
        for tp, stop in sorted(until.items()):
            first = begin.get(tp)
            if first is None:
                first = 0   # a partition that appeared since the last batch: from its start
            if first == stop:
                continue
            if stop < first:
                self._report_data_loss(f"Partition {tp[0]}-{tp[1]}'s offset was changed from "
                                       f"{first} to {stop}, some data may have been missed")
                continue
            view = self._view(tp, stop)
            if view is None:
                self._report_data_loss(f"Cannot find partition {tp[0]}-{tp[1]}; offsets "
                                       f"{first}-{stop} may have been missed")
                continue
            if first < view.log_start_offset:
                self._report_data_loss(
                    f"Cannot fetch offsets {first}-{view.log_start_offset} of "
                    f"{tp[0]}-{tp[1]}: its log now starts at {view.log_start_offset}")
                first = min(view.log_start_offset, stop)
            ranges.extend(split_partition(self._store(), view, first, stop,
                                          self.options.max_bytes_per_partition,
                                          self.options.read_committed))
        return [BMQInputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.options, partition.value)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: retention, not readers, decides what storage keeps."""

    def stop(self) -> None:
        if self._storage is not None:
            self._storage.close()
            self._storage = None
