"""Quick throughput measurement of PartitionLog (not a test): python -m tests.storage.bench_log

Appends 1 MiB batches and flushes (group commits of --group batches), then reads everything
back sequentially with --read-max bytes per read. Prints MB/s (MiB/s really).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time

from bmq.protocol.records import validate_batches
from bmq.storage import LocalStorage, LogConfig, PartitionLog, open_storage

from .batches import make_batch

MIB = 1 << 20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", default=None, help="storage root (default: a temp dir)")
    parser.add_argument("--total-mib", type=int, default=2048)
    parser.add_argument("--batch-kib", type=int, default=1024)
    parser.add_argument("--group", type=int, default=4, help="batches per flush")
    parser.add_argument("--read-max", type=int, default=MIB)
    parser.add_argument("--epoch", type=int, default=0,
                        help="leader epoch (> 0: cluster mode, fence check on every flush)")
    parser.add_argument("--threaded", action="store_true",
                        help="flush on a worker thread while appending (like the broker)")
    args = parser.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="bmq-bench-")
    storage = open_storage(root) if args.dir else LocalStorage(root)
    log = PartitionLog.open(storage, "bench", 0, LogConfig(retention_ms=-1), epoch=args.epoch)
    value = bytes(range(256)) * (args.batch_kib * 1024 // 256 - 1)
    template = make_batch([value])
    count = args.total_mib * MIB // len(template)
    pool = [bytearray(template) for _ in range(args.group * 2)]
    headers = validate_batches(memoryview(pool[0]), 1 << 30)

    start = time.perf_counter()
    if args.threaded:
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
            while log.pending_bytes() >= args.group * len(template) * 2:
                time.sleep(0.0001)   # the broker would apply back-pressure here
            log.append(memoryview(bytearray(template)), headers, now_ms=0)
        done.set()
        thread.join()
    else:
        for i in range(count):
            log.append(memoryview(pool[i % len(pool)]), headers, now_ms=0)
            if (i + 1) % args.group == 0:
                log.flush()
        log.flush()
    elapsed = time.perf_counter() - start
    total = count * len(template)
    print(f"append+flush: {total / MIB / elapsed:8.1f} MiB/s  ({count} batches of "
          f"{len(template)} B, {args.group} per flush{', threaded' if args.threaded else ''})")

    for label in ("read (page cache)", "read again"):
        start = time.perf_counter()
        offset = 0
        got = 0
        while offset < log.high_watermark:
            data = log.read(offset, args.read_max)
            n = len(data)
            got += n
            offset += max(1, n // len(template))   # one-record batches of equal size
        elapsed = time.perf_counter() - start
        assert got == total, (got, total)
        print(f"{label}: {got / MIB / elapsed:8.1f} MiB/s  (max_bytes {args.read_max})")
    log.close()
    if not args.dir:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
