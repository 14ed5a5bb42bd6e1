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

from bmq.protocol.record_codec import CODEC_IDS, recompress_batch
from bmq.protocol.records import read_header
from bmq.storage import LogConfig
from bmq.writepath.conversion import needs_conversion


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def build_batch(values: list[bytes]) -> bytes:
    """An uncompressed v2 batch (CRC left zero: recompression does not check it)."""
    records = []
    for i, value in enumerate(values):
        body = b"\x00" + _varint(0) + _varint(i) + _varint(-1) + _varint(len(value)) + value \
            + _varint(0)
        records.append(_varint(len(body)) + body)
    payload = b"".join(records)
    header = bytearray(61)
    header[8:12] = (len(payload) + 49).to_bytes(4, "big")
    header[16] = 2
    header[23:27] = (len(values) - 1).to_bytes(4, "big")
    header[43:51] = (-1).to_bytes(8, "big", signed=True)
    header[53:57] = (-1).to_bytes(4, "big", signed=True)
    header[57:61] = len(values).to_bytes(4, "big")
    return bytes(header) + payload


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
    kinds = {"benchmark values": build_batch([i.to_bytes(24, "big") + body
                                              for i in range(count)]),
             "incompressible": build_batch([os.urandom(1024) for _ in range(count)])}
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
