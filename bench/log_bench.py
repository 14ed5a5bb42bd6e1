"""Throughput of the partition log alone (no broker, no network), in both storage layouts.

    python -m bench.log_bench [--total-mib 200] [--runs 3] [--threaded] [--epoch 1]

Appends 1 MiB batches (``--batch-kib``) to a ``PartitionLog`` on a temporary ``LocalStorage``
directory, flushing every ``--group`` batches (or, with ``--threaded``, on a worker thread while
appending, as the broker does), then reads everything back. Run once on the append layout
(files grow in place) and once on the object layout, forced by a copy of the storage that
reports ``supports_append = False`` (every flush is one object, as on S3). Used to check that a
change to bmq/storage keeps the hot path fast: compare runs before and after it.
"""

from __future__ import annotations

import argparse
import copy
import shutil
import tempfile
import threading
import time

from bmq.protocol.records import BatchHeader, validate_batches
from bmq.storage import LocalStorage, LogConfig, PartitionLog, Storage
from tests.storage.batches import make_batch

MIB = 1 << 20


def append_inline(log: PartitionLog, pool: list[bytearray], headers: list[BatchHeader],
                  count: int, group: int) -> None:
    for i in range(count):
        log.append(memoryview(pool[i % len(pool)]), headers, now_ms=0)
        if (i + 1) % group == 0:
            log.flush()
    log.flush()


def append_threaded(log: PartitionLog, template: bytes, headers: list[BatchHeader],
                    count: int, group: int) -> None:
    """Flush on a worker thread whenever something is queued, as the broker's group-commit
    writer does; appends wait while two groups are queued (the broker's back-pressure)."""
    done = threading.Event()

    def flusher() -> None:
        while not done.is_set() or log.pending_bytes():
            if log.pending_bytes():
                log.flush()
            else:
                time.sleep(0.0002)

    thread = threading.Thread(target=flusher)
    thread.start()
    for _ in range(count):
        while log.pending_bytes() >= group * len(template) * 2:
            time.sleep(0.0001)
        # A fresh buffer per batch: the flusher may still be writing earlier ones.
        log.append(memoryview(bytearray(template)), headers, now_ms=0)
    done.set()
    thread.join()


def run_once(storage: Storage, args: argparse.Namespace) -> tuple[float, float]:
    """Append+flush then read back ``--total-mib`` MiB; returns both rates in MiB/s."""
    log = PartitionLog.open(storage, "bench", 0, LogConfig(retention_ms=-1), epoch=args.epoch)
    template = make_batch([bytes(range(256)) * (args.batch_kib * 1024 // 256 - 1)])
    count = args.total_mib * MIB // len(template)
    # Distinct buffers: append rewrites each batch's header in place.
    pool = [bytearray(template) for _ in range(args.group * 2)]
    headers = validate_batches(memoryview(pool[0]), 1 << 30)
    start = time.perf_counter()
    if args.threaded:
        append_threaded(log, template, headers, count, args.group)
    else:
        append_inline(log, pool, headers, count, args.group)
    total = count * len(template)
    write_rate = total / MIB / (time.perf_counter() - start)

    start = time.perf_counter()
    offset = got = 0
    while offset < log.high_watermark:
        data = log.read(offset, MIB)
        got += len(data)
        offset += max(1, len(data) // len(template))   # one-record batches of equal size
    read_rate = got / MIB / (time.perf_counter() - start)
    assert got == total, (got, total)
    log.close()
    return write_rate, read_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total-mib", type=int, default=200)
    parser.add_argument("--batch-kib", type=int, default=1024)
    parser.add_argument("--group", type=int, default=4, help="batches per flush")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threaded", action="store_true",
                        help="flush on a worker thread while appending (like the broker)")
    parser.add_argument("--epoch", type=int, default=0,
                        help="leader epoch (> 0: cluster mode, fence check on every flush)")
    args = parser.parse_args()
    for layout in ("append", "object"):
        writes: list[float] = []
        reads: list[float] = []
        for _ in range(args.runs):
            root = tempfile.mkdtemp(prefix="bmq-log-bench-")
            try:
                storage: Storage = LocalStorage(root)
                if layout == "object":
                    storage = copy.copy(storage)
                    storage.supports_append = False
                write_rate, read_rate = run_once(storage, args)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            writes.append(write_rate)
            reads.append(read_rate)
            print(f"{layout:6} layout: append+flush {write_rate:7.1f} MiB/s, "
                  f"read {read_rate:7.1f} MiB/s")
        print(f"{layout:6} layout: append+flush {min(writes):.0f}-{max(writes):.0f} MiB/s, "
              f"read {min(reads):.0f}-{max(reads):.0f} MiB/s over {args.runs} runs")


if __name__ == "__main__":
    main()
