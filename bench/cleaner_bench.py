"""The log cleaner (issue 19): MB/s of log cleaned per core, and the produce rate of a broker
while its cleaner runs against the same broker without it.

    .venv/bin/python -m bench.cleaner_bench [--updates 1000000] [--keys 10000] [--rounds 2]

1. Cleaner throughput: a partition log on a temporary directory gets ``--updates`` records of
   100-byte values over ``--keys`` keys (one key in ten ends deleted), 100 records a batch,
   uncompressed, in 16 MiB segments; then one cleaning pass over all of them but the last,
   active, one (``LogCleaner``, as a broker runs it) is timed on this thread: MB/s = log bytes
   read / CPU seconds of the thread (per core), and / wall seconds.
2. Produce rate: a spawned ``bmq serve`` (cleaner backoff 100 ms); a background producer
   writes updates over ``--keys`` keys to a topic as fast as it can, and the measured producer
   writes ``--messages`` 1 KiB records to another topic. The background topic is compacted in
   both phases (the produce path checks keys); "without": its min.compaction.lag.ms keeps the
   cleaner off it; "with": 0, so the cleaner cleans it over and over meanwhile.
   Alternating rounds; the broker log says how much the cleaner cleaned during each "with".
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import statistics
import tempfile
import time
import uuid
from multiprocessing.synchronize import Event

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.server import LocalServer
from bmq.cleaner import LogCleaner
from bmq.protocol.record_codec import Record, encode_batch
from bmq.storage import LogConfig, PartitionLog, open_storage

VALUE_BYTES = 100
PER_BATCH = 100
MEASURED_BYTES = 1024
_CLEANED = re.compile(r"cleaned .*?: (\d+) -> (\d+) bytes")


def cleaner_throughput(updates: int, keys: int) -> None:
    config = LogConfig(segment_bytes=16 << 20, compact=True, retention_ms=-1)
    with tempfile.TemporaryDirectory(prefix="bmq-cleaner-bench-") as directory:
        log = PartitionLog.open(open_storage(directory), "bench", 0, config)
        now = time.time_ns() // 1_000_000
        value = b"v" * VALUE_BYTES
        for start in range(0, updates, PER_BATCH):
            records = []
            for i in range(start, min(start + PER_BATCH, updates)):
                key = b"key-%06d" % (i % keys)
                deleted = i >= updates - keys and (i % keys) % 10 == 0
                records.append(Record(0, now, key, None if deleted else value, []))
            batch, header = encode_batch(records)
            log.append(memoryview(batch), [header], now)
            if start % (PER_BATCH * 1000) == 0:
                log.flush()
        log.flush()
        size = log.size_bytes
        cpu, wall = time.thread_time(), time.perf_counter()
        result = LogCleaner(128 << 20).clean(log, now, force=True)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        log.close()
    assert result is not None and result.swapped
    mb = result.bytes_read / 1e6
    print(f"cleaner: {updates} updates over {keys} keys, log {size / 1e6:.1f} MB, "
          f"{result.segments_read} segments cleaned ({mb:.1f} MB) -> "
          f"{result.bytes_written / 1e6:.2f} MB, {result.records_removed} records removed: "
          f"{mb / cpu:.0f} MB/s per core ({cpu:.2f} CPU s), {mb / wall:.0f} MB/s wall")


def _background(bootstrap: str, topic: str, keys: int, stop: Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "batch.size": 1_000_000})
    value = b"v" * VALUE_BYTES
    i = 0
    while not stop.is_set():
        try:
            producer.produce(topic, value, key=b"key-%06d" % (i % keys))
            i += 1
        except BufferError:
            producer.poll(0.01)
    producer.flush(60)


def _measured_rate(bootstrap: str, topic: str, messages: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "batch.size": 1_000_000, "acks": "all"})
    value = os.urandom(MEASURED_BYTES)
    start = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(300):
        raise SystemExit("could not produce every record")
    return messages * MEASURED_BYTES / 1e6 / (time.perf_counter() - start)


def produce_rates(messages: int, keys: int, rounds: int) -> None:
    os.environ["BMQ_LOG_CLEANER_BACKOFF_MS"] = "100"
    with LocalServer() as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        rates: dict[str, list[float]] = {"without": [], "with": []}
        for round_index in range(rounds):
            for phase in ("without", "with"):
                # Both compacted (the produce path checks keys), but "without" keeps every
                # segment younger than min.compaction.lag.ms: the cleaner never cleans it.
                lag = "0" if phase == "with" else str(2**63 - 1)
                load, measured = (f"cleaner-bench-load-{uuid.uuid4().hex[:6]}",
                                  f"cleaner-bench-measured-{uuid.uuid4().hex[:6]}")
                futures = admin.create_topics([
                    NewTopic(load, 1, 1, config={"cleanup.policy": "compact",
                                                 "min.compaction.lag.ms": lag,
                                                 "segment.bytes": str(4 << 20),
                                                 "min.cleanable.dirty.ratio": "0.01"}),
                    NewTopic(measured, 1, 1)])
                for future in futures.values():
                    future.result(30)
                log_before = _log_size(server)
                stop = multiprocessing.Event()
                background = multiprocessing.Process(
                    target=_background, args=(server.bootstrap, load, keys, stop))
                background.start()
                time.sleep(2)   # the background load is running (and, with, being cleaned)
                rate = _measured_rate(server.bootstrap, measured, messages)
                stop.set()
                background.join(120)
                rates[phase].append(rate)
                cleaned = _cleaned_since(server, log_before)
                print(f"round {round_index + 1} {phase} cleaner: {rate:.1f} MB/s produced"
                      + (f" (cleaner meanwhile: {cleaned[0]} passes, {cleaned[1] / 1e6:.0f} MB "
                         "cleaned)" if phase == "with" else ""))
        without, with_ = statistics.median(rates["without"]), statistics.median(rates["with"])
        print(f"produce rate, median of {rounds}: {without:.1f} MB/s without the cleaner, "
              f"{with_:.1f} MB/s while it runs ({with_ / without:.0%})")


def _log_size(server: LocalServer) -> int:
    return os.path.getsize(server.log_path)


def _cleaned_since(server: LocalServer, offset: int) -> tuple[int, int]:
    with open(server.log_path, "rb") as log:
        log.seek(offset)
        text = log.read().decode(errors="replace")
    passes = _CLEANED.findall(text)
    return len(passes), sum(int(read) for read, _written in passes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-produce", action="store_true",
                        help="only the cleaner's own throughput")
    args = parser.parse_args()
    cleaner_throughput(args.updates, args.keys)
    if not args.skip_produce:
        produce_rates(args.messages, args.keys, args.rounds)


if __name__ == "__main__":
    main()
