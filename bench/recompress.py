"""The produce path's cost of compression.type, measured in one process (no network, no disk).

    .venv/bin/python -m bench.recompress [--batch-kib 1024] [--seconds 2]

For each target codec: MB/s of record data the broker recompresses (uncompressed 1 KiB records
in batches as librdkafka sends them with the README's benchmark settings), for the benchmark's
values (one random body repeated, as `python -m bench` sends) and for incompressible values.
Also the per-partition cost a topic without compression.type pays: the one check of its config.
"""

from __future__ import annotations

import argparse
import os
import time
import timeit

from bmq.protocol.record_codec import CODEC_IDS, build_batch, recompress_batch
from bmq.protocol.records import read_header
from bmq.storage import LogConfig
from bmq.writepath.conversion import needs_conversion


def uncompressed_batch(values: list[bytes]) -> bytes:
    """An uncompressed v2 batch of ``values`` (null keys)."""
    return bytes(build_batch([(None, value) for value in values], 0)[0])


def rate(batch: bytes, codec: int, seconds: float) -> float:
    header = read_header(batch)
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        recompress_batch(batch, header, codec)
        done += len(batch)
    return done / (time.perf_counter() - start) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-kib", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    count = args.batch_kib * 1024 // 1040
    body = os.urandom(1000)
    kinds = {"benchmark values": uncompressed_batch([i.to_bytes(24, "big") + body
                                              for i in range(count)]),
             "incompressible": uncompressed_batch([os.urandom(1024) for _ in range(count)])}
    print(f"recompressing {count}-record uncompressed batches, MB/s of batch per core")
    print(f"{'target':14}" + "".join(f"{k:>20}" for k in kinds))
    for name, codec in CODEC_IDS.items():
        if name == "uncompressed":
            continue
        print(f"{name:14}" + "".join(f"{rate(b, codec, args.seconds):20.0f}"
                                     for b in kinds.values()))
    plain = LogConfig()
    per_call = min(timeit.repeat(lambda: needs_conversion(plain), number=100_000, repeat=5))
    print(f"a topic without compression.type: {per_call / 100_000 * 1e9:.0f} ns per partition "
          "per Produce request (the config check)")


if __name__ == "__main__":
    main()
