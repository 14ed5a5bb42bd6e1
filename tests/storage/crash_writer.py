"""Child process of test_crash: appends and flushes in a loop until it is killed.

Usage: python crash_writer.py ROOT PRODUCER_ID SEED [EPOCH]

ROOT is a directory or a storage URL (``s3://bucket/prefix``: endpoint and credentials from
the standard AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY variables).

Every batch holds one record whose value starts with b"<offset>:", is written by an idempotent
producer whose sequence numbers equal the offsets, and after every flush the high watermark is
printed (so the parent knows what was durable when it pulled the plug).
"""

from __future__ import annotations

import os
import random
import sys

from bmq.storage import LogConfig, PartitionLog, open_storage

if __package__:
    from .batches import request, sized_batch, split
else:  # run as a script: make this directory importable as the package it is
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from storage.batches import request, sized_batch, split

CONFIG = LogConfig(segment_bytes=1 << 20, index_interval_bytes=1024, retention_ms=-1)


def batch_size(offset: int) -> int:
    """The size of the batch at ``offset``: varied, and one that a single record fills (a few
    sizes need a second record, which would take a second offset and sequence number)."""
    size = 100 + (offset * 7919) % 30_000
    while split(sized_batch(size, offset))[0].record_count != 1:
        size += 1
    return size


def main() -> None:
    root, producer_id, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    epoch = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    rng = random.Random(seed)
    log = PartitionLog.open(open_storage(root), "t", 0, CONFIG, epoch=epoch)
    offset = log.log_end_offset
    rounds = 0
    while True:
        for _ in range(rng.randint(1, 40)):
            batch = sized_batch(batch_size(offset), offset, producer_id=producer_id,
                                producer_epoch=0, base_sequence=offset)
            result = log.append(*request(batch), now_ms=offset)
            assert result.base_offset == offset and not result.duplicate
            offset += 1
        print(log.flush(), flush=True)
        rounds += 1
        if rounds % 7 == 0:
            log.checkpoint()     # (object layout: merges flush objects too)


if __name__ == "__main__":
    main()
