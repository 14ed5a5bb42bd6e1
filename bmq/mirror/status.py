"""`bmq mirror status`: the mirrored topics of a target cluster and how far behind their
sources they are, as the two clusters tell it (so it answers while the mirror is down too,
which is when an operator deciding on a failover asks)."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from bmq.metadata.mirrors import MIRROR_SOURCE
from bmq.mirror.cluster import Cluster
from bmq.mirror.topics import describe_configs
from bmq.net.client import LinkError
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import FetchRequest
from bmq.protocol.messages.fetch_request import FetchPartition, FetchTopic
from bmq.protocol.records import HEADER_SIZE, read_header

FETCH_VERSION = 12
PEEK_BYTES = 64 << 10   # enough for the first batch's header


@dataclass
class PartitionStatus:
    topic: str
    partition: int
    source_name: str
    target_end: int | None = None
    source_end: int | None = None
    lag_seconds: float | None = None   # age of the oldest record the target lacks
    bytes_mirrored: int | None = None  # by the mirror processes asked, since they started
    failing: bool | None = None        # whether the mirror process copying it reports it stuck

    @property
    def lag_records(self) -> int | None:
        if self.target_end is None or self.source_end is None:
            return None
        return max(0, self.source_end - self.target_end)


async def mirror_status(target: Cluster, source: Cluster | None, name: str | None = None,
                        metrics_urls: Sequence[str] = ()) -> list[PartitionStatus]:
    """Every partition of the target's mirrored topics (of source ``name`` if given), with
    the source's end and lag when ``source`` is given, and the bytes the mirror processes
    whose metrics are at ``metrics_urls`` copied of each."""
    await target.metadata.refresh()
    marks = {topic: configs[MIRROR_SOURCE] for topic, configs in (await describe_configs(
        target, sorted(target.metadata.topics))).items() if configs.get(MIRROR_SOURCE)}
    rows = [PartitionStatus(topic, index, mark)
            for topic, mark in sorted(marks.items()) if name is None or mark == name
            for index in sorted(target.metadata.topics[topic].partitions)]
    keys = [(row.topic, row.partition) for row in rows]
    for row, end in _each(rows, await target.end_offsets(keys)):
        row.target_end = end
    if metrics_urls:
        copied, failing = await asyncio.to_thread(mirror_metrics, metrics_urls)
        for row in rows:
            row.bytes_mirrored = copied.get((row.topic, row.partition), 0)
            row.failing = failing.get((row.topic, row.partition))
    if source is None:
        return rows
    await source.metadata.refresh()
    for row, end in _each(rows, await source.end_offsets(keys)):
        row.source_end = end
    behind = [row for row in rows if row.lag_records]
    stamps = await _first_timestamps(source, behind)
    now_ms = time.time() * 1000
    for row in rows:
        if row.lag_records == 0:
            row.lag_seconds = 0.0
        elif (row.topic, row.partition) in stamps:
            row.lag_seconds = max(0.0, (now_ms - stamps[(row.topic, row.partition)]) / 1000)
    return rows


def mirror_metrics(metrics_urls: Sequence[str]
                   ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], bool]]:
    """From the mirror processes' metrics endpoints (``http://HOST:PORT/metrics``): the bytes
    mirrored by partition, added up, and whether the process copying a partition reports it
    failing; OSError if one does not answer."""
    copied: dict[tuple[str, int], int] = defaultdict(int)
    failing: dict[tuple[str, int], bool] = {}
    for url in metrics_urls:
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name not in ("bmq_mirror_bytes_total", "bmq_mirror_partition_failing"):
                    continue
                key = (sample.labels["topic"], int(sample.labels["partition"]))
                if sample.name == "bmq_mirror_bytes_total":
                    copied[key] += int(sample.value)
                else:
                    failing[key] = sample.value > 0
    return copied, failing


def _each(rows: list[PartitionStatus], ends: dict[tuple[str, int], int | ErrorCode]
          ) -> list[tuple[PartitionStatus, int]]:
    """The rows with the end offset found for each (those with an error are left out)."""
    found = []
    for row in rows:
        end = ends.get((row.topic, row.partition))
        if end is not None and not isinstance(end, ErrorCode):
            found.append((row, end))
    return found


async def _first_timestamps(source: Cluster, rows: list[PartitionStatus]
                            ) -> dict[tuple[str, int], int]:
    """The timestamp of the first batch the target lacks, for each row (from its header)."""
    stamps: dict[tuple[str, int], int] = {}
    for row in rows:
        address = source.leader(row.topic, row.partition)
        if address is None or row.target_end is None:
            continue
        try:
            response = await source.ask(address, FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=PEEK_BYTES,
                topics=[FetchTopic(topic=row.topic, partitions=[FetchPartition(
                    partition=row.partition, fetch_offset=row.target_end,
                    partition_max_bytes=PEEK_BYTES)])]), FETCH_VERSION)
        except (LinkError, OSError, TimeoutError):
            continue
        records = response.responses[0].partitions[0].records
        if isinstance(records, (bytes, bytearray, memoryview)) and len(records) >= HEADER_SIZE:
            stamps[(row.topic, row.partition)] = read_header(records).base_timestamp
    return stamps
