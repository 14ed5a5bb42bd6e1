"""The Spark source plans and reads a log the cleaner compacted (offset gaps, cleaned segment
files beside plain ones): through the log's reader, every record once, in offset order. No
Spark session needed: planning and batch reading are the source's own code."""

from __future__ import annotations

from pathlib import Path

from bmq.cleaner import LogCleaner
from bmq.protocol.record_codec import decode_batch
from bmq.spark.decode import iter_reader_batches
from bmq.spark.planning import split_partition
from bmq.storage import LocalStorage, PartitionLog
from bmq.storage.log.durable import open_durable
from tests.storage.helpers import read_batches
from tests.storage.test_cleaner import CONFIG, NOW, _fill


def test_spark_reads_a_cleaned_log_through_its_reader(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path / "data"))
    log = PartitionLog.open(storage, "t", 0, CONFIG)
    _fill(log, keys=40, rounds=5)
    assert LogCleaner(1 << 20).clean(log, NOW + 1, force=True) is not None
    log.checkpoint()
    expected = [r.offset for h, raw in read_batches(log) for r in decode_batch(raw, h)]
    view = open_durable(storage, "t", 0)
    assert view.via_reader and view.high_watermark == log.high_watermark
    offsets = []
    for rng in split_partition(storage, view, view.log_start_offset, view.high_watermark,
                               max_bytes=500):
        for data, pos, header in iter_reader_batches(storage, rng):
            records = decode_batch(data[pos:pos + header.size], header)
            offsets += [r.offset for r in records if rng.start_offset <= r.offset
                        < rng.end_offset]
    assert offsets == expected
    assert len(expected) < log.high_watermark   # the cleaner did remove records
    log.close()
