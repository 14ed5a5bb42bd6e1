"""Throughput of PartitionLog's object layout on SeaweedFS S3 (not a test):

    python -m tests.storage.bench_s3 [--total-mib 256] [--flush-kib 1024]

Starts a private ``weed mini`` on 127.0.0.1, appends one batch per flush (``--flush-kib``
each: every flush is one object PUT, one manifest PUT and one fence-check LIST), reads
everything back through the writer and through a read-only ``open_reader`` view, merges the
objects (``merge_objects``) and reads again. Prints MiB/s.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from bmq.protocol.records import validate_batches
from bmq.storage import LogConfig, PartitionLog, open_storage
from tests.seaweedfs import SeaweedFS

from .batches import make_batch

MIB = 1 << 20


def _read_all(log: object, total: int, read_max: int, batch: int) -> float:
    start = time.perf_counter()
    offset = 0
    got = 0
    while offset < log.high_watermark:  # type: ignore[attr-defined]
        data = log.read(offset, read_max)  # type: ignore[attr-defined]
        got += len(data)
        offset += max(1, len(data) // batch)
    elapsed = time.perf_counter() - start
    assert got == total, (got, total)
    return got / MIB / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--total-mib", type=int, default=256)
    parser.add_argument("--flush-kib", type=int, default=1024)
    parser.add_argument("--read-max", type=int, default=8 * MIB)
    parser.add_argument("--epoch", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bmq-bench-s3-") as tmp:
        server = SeaweedFS.start(tmp)
        try:
            storage = open_storage(server.url("bench"), server.storage_options())
            config = LogConfig(retention_ms=-1, segment_bytes=64 * MIB)
            log = PartitionLog.open(storage, "bench", 0, config, epoch=args.epoch)
            value = bytes(range(256)) * (args.flush_kib * 1024 // 256 - 1)
            template = make_batch([value])
            headers = validate_batches(memoryview(bytearray(template)), 1 << 30)
            count = args.total_mib * MIB // len(template)
            start = time.perf_counter()
            latencies = []
            for _ in range(count):
                log.append(memoryview(bytearray(template)), headers, now_ms=0)
                t = time.perf_counter()
                log.flush()
                latencies.append(time.perf_counter() - t)
            elapsed = time.perf_counter() - start
            total = count * len(template)
            latencies.sort()
            print(f"append+flush: {total / MIB / elapsed:8.1f} MiB/s  ({count} flushes of "
                  f"{len(template)} B; flush p50 {latencies[len(latencies) // 2] * 1000:.0f} ms,"
                  f" p99 {latencies[int(len(latencies) * 0.99)] * 1000:.0f} ms)")
            print(f"read (writer, {count} objects): "
                  f"{_read_all(log, total, args.read_max, len(template)):8.1f} MiB/s")
            reader = PartitionLog.open_reader(storage, "bench", 0, config)
            print(f"read (open_reader view):     "
                  f"{_read_all(reader, total, args.read_max, len(template)):8.1f} MiB/s")
            start = time.perf_counter()
            merged = log.merge_objects()
            elapsed = time.perf_counter() - start
            objects = len(log.segments.by_offset) - 1
            print(f"merge: {merged} objects in {elapsed:.1f} s "
                  f"({total / MIB / elapsed:.1f} MiB/s), now {objects} objects")
            print(f"read (writer, merged):       "
                  f"{_read_all(log, total, args.read_max, len(template)):8.1f} MiB/s")
            reader.close()
            log.close()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
