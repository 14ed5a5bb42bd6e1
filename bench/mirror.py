"""Issue #34's bars for `bmq mirror`: one mirror process copies at least 100 MB/s of 1 KiB
records between two local clusters; steady-state mirror lag p99 under 1 s at 10 MB/s.

    .venv/bin/python -m bench.mirror [--mb 500] [--partitions 4]           # catch-up MB/s
    .venv/bin/python -m bench.mirror --rate 10 [--duration 30]            # lag at a rate

Two throw-away `bmq serve`s (source and target) and one `bmq mirror run` between them.
Catch-up: ``--mb`` MB of 1 KiB values are produced to the source first; the clock runs from the
mirror's start until the target's end offsets equal the source's (topic creation included);
MB/s is value bytes per second, and the mirror's CPU seconds are printed beside. Lag: one
producer paces ``--rate`` MB/s into the source for ``--duration`` s while a consumer tails the
target; a record's lag is the time it is read from the target minus its timestamp (stamped at
produce: the produce, the mirror's fetch and append, and the consume together); the first
``--warmup`` seconds are left out.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.server import LocalServer, tree_cpu_seconds

RECORD = 1024
TOPIC = "mirror-bench"


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                     "enable.idempotence": True, "queue.buffering.max.kbytes": 1 << 20})


def _send(producer: Producer, partitions: int, index: int, value: bytes) -> None:
    while True:
        try:
            producer.produce(TOPIC, value, partition=index % partitions)
            return
        except BufferError:
            producer.poll(0.01)


def _ends(bootstrap: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-bench",
                         "allow.auto.create.topics": False})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), 10)[1]
                for p in range(partitions)]
    except Exception:       # the target has no topic yet
        return []
    finally:
        consumer.close()


def _mirror(source: str, target: str, log: Path) -> subprocess.Popen[bytes]:
    bmq = Path(sys.executable).with_name("bmq")
    with open(log, "ab") as out:
        return subprocess.Popen(
            [str(bmq), "mirror", "run", "--name", "bench", "--source", source, "--target",
             target, "--topic", TOPIC], stdout=out, stderr=out, stdin=subprocess.DEVNULL,
            start_new_session=True)


def catch_up(source: str, target: str, megabytes: int, partitions: int, log: Path) -> None:
    count = megabytes * 1_000_000 // RECORD
    producer = _producer(source)
    value = os.urandom(RECORD)
    for i in range(count):
        _send(producer, partitions, i, value)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(300)
    wanted = _ends(source, partitions)
    started = time.monotonic()
    mirror = _mirror(source, target, log)
    try:
        while _ends(target, partitions) != wanted:
            if time.monotonic() - started > 600 or mirror.poll() is not None:
                raise SystemExit(f"not mirrored in time; see {log}")
            time.sleep(0.05)
        elapsed = time.monotonic() - started
        cpu = tree_cpu_seconds(mirror.pid)
    finally:
        mirror.terminate()
        mirror.wait(30)
    print(f"catch-up: {count} records of {RECORD} B ({count * RECORD / 1e6:.0f} MB) over "
          f"{partitions} partitions mirrored in {elapsed:.1f} s: "
          f"{count * RECORD / 1e6 / elapsed:.1f} MB/s; mirror CPU {cpu or 0:.1f} s")


def steady_lag(source: str, target: str, rate_mb: float, duration: float, warmup: float,
               partitions: int, log: Path) -> None:
    mirror = _mirror(source, target, log)
    lags: list[float] = []
    stop = threading.Event()
    try:
        producer = _producer(source)
        value = os.urandom(RECORD)
        _send(producer, partitions, 0, value)    # the topic, mirrored before the clock starts
        producer.flush(30)
        deadline = time.monotonic() + 30
        while len(_ends(target, partitions)) != partitions:
            if time.monotonic() > deadline:
                raise SystemExit(f"the mirror did not create the topic; see {log}")
            time.sleep(0.1)
        consumer = Consumer({"bootstrap.servers": target, "group.id": "mirror-bench-lag",
                             "fetch.wait.max.ms": 10, "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, p, 1 if p == 0 else 0)
                         for p in range(partitions)])
        started = time.time()

        def tail() -> None:
            while not stop.is_set():
                for message in consumer.consume(10_000, 0.05):
                    if message.error() is None:
                        seen = time.time()
                        stamp = message.timestamp()[1] / 1000
                        if stamp - started >= warmup:
                            lags.append(seen - stamp)

        reader = threading.Thread(target=tail, daemon=True)
        reader.start()
        per_second = int(rate_mb * 1_000_000 / RECORD)
        total = int(per_second * duration)
        begin = time.monotonic()
        for i in range(total):
            _send(producer, partitions, i, value)
            if i % 100 == 99:
                producer.poll(0)
                pause = begin + (i + 1) / per_second - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
        producer.flush(60)
        time.sleep(3)
        stop.set()
        reader.join(10)
        consumer.close()
    finally:
        mirror.terminate()
        mirror.wait(30)
    lags.sort()
    if not lags:
        raise SystemExit(f"nothing read from the target; see {log}")
    print(f"lag at {rate_mb:g} MB/s of {RECORD} B records for {duration:g} s ({len(lags)} "
          f"measured after {warmup:g} s): p50 {lags[len(lags) // 2] * 1000:.0f} ms, p99 "
          f"{lags[int(len(lags) * 0.99)] * 1000:.0f} ms, max {lags[-1] * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=500, help="catch-up: MB to mirror")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="lag mode: MB/s produced to the source (0: catch-up mode)")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    with LocalServer() as source, LocalServer() as target:
        admin = AdminClient({"bootstrap.servers": source.bootstrap})
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(30)
        log = Path(target.data_dir) / "mirror.log"
        if args.rate:
            steady_lag(source.bootstrap, target.bootstrap, args.rate, args.duration,
                       args.warmup, args.partitions, log)
        else:
            catch_up(source.bootstrap, target.bootstrap, args.mb, args.partitions, log)


if __name__ == "__main__":
    main()
