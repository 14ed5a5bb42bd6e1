"""Share group consumption against classic consumption, in the same run (issue 17's bar: share
at least 50% of classic MB/s).

    .venv/bin/python -m bench.share_bench [--messages 200000] [--partitions 4] [--consumers 1]

A spawned ``bmq serve`` (or ``--bootstrap``) gets one topic of ``--messages`` records of
``--message-size`` bytes; then ``--consumers`` processes read all of it twice: first as a
classic consumer group (subscribe, auto commit), then as a share group whose consumers
acknowledge every record explicitly (ACCEPT; the acknowledgements go with the next ShareFetch,
each answered once durable). Each phase is timed from its first record to its last; MB/s counts
record values. The phases alternate for ``--rounds`` rounds (each a new group reading the whole
topic) and the median of each kind is reported, with the spawned server's CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
import uuid
from typing import Any

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from bench.consume import next_batch
from bench.server import LocalServer

IDLE_S = 10.0      # a phase ends when every record was read, or nothing came for this long


def _produce(bootstrap: str, topic: str, messages: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1_048_576})
    value = b"x" * size
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, value=value, key=str(i).encode())
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0


def _consume(kind: str, bootstrap: str, topic: str, group: str, total: int,
             done: Any, out: Any) -> None:
    """One consumer process: read until ``done`` counts ``total`` records (all processes)."""
    conf = {"bootstrap.servers": bootstrap, "group.id": group}
    consumer: Any
    if kind == "share":
        consumer = ShareConsumer({**conf, "share.acknowledgement.mode": "explicit"})
    else:
        consumer = Consumer({**conf, "auto.offset.reset": "earliest",
                             "enable.auto.commit": True})
    consumer.subscribe([topic])
    count = size = 0
    first = last = 0.0
    idle_since = time.monotonic()
    while done.value < total and time.monotonic() - idle_since < IDLE_S:
        messages = list(consumer.poll(0.5)) if kind == "share" \
            else next_batch(consumer, 0.5)
        got = [m for m in messages if m.error() is None]
        if not got:
            continue
        now = time.monotonic()
        idle_since = now
        first = first or now
        last = now
        for m in got:
            size += len(m.value())
            if kind == "share":
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        count += len(got)
        with done.get_lock():
            done.value += len(got)
    consumer.close()
    out.put((count, size, first, last))


def run_phase(kind: str, bootstrap: str, topic: str, consumers: int,
              total: int) -> dict[str, float]:
    group = f"bench-{kind}-{uuid.uuid4().hex[:8]}"
    if kind == "share":
        admin = AdminClient({"bootstrap.servers": bootstrap})
        resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)
    done = multiprocessing.Value("q", 0)
    out: Any = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=_consume,
                                     args=(kind, bootstrap, topic, group, total, done, out))
             for _ in range(consumers)]
    for proc in procs:
        proc.start()
    results = [out.get() for _ in procs]
    for proc in procs:
        proc.join()
    count = sum(r[0] for r in results)
    size = sum(r[1] for r in results)
    firsts = [r[2] for r in results if r[0]]
    lasts = [r[3] for r in results if r[0]]
    seconds = max(lasts) - min(firsts) if firsts else 0.0
    return {"records": count, "mb": size / 1e6, "seconds": round(seconds, 3),
            "mb_per_s": round(size / 1e6 / seconds, 1) if seconds else 0.0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", help="an existing server [spawn a bmq serve]")
    p.add_argument("--server-command", help="command for the spawned server [bmq serve]")
    p.add_argument("--messages", type=int, default=200_000)
    p.add_argument("--message-size", type=int, default=1024)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--consumers", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = p.parse_args(argv)
    server = None if args.bootstrap else LocalServer(args.server_command)
    bootstrap = args.bootstrap or server.start()  # type: ignore[union-attr]
    try:
        topic = f"share-bench-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
        _produce(bootstrap, topic, args.messages, args.message_size)
        rounds: dict[str, list[dict[str, float]]] = {"classic": [], "share": []}
        for _ in range(args.rounds):
            for kind, runs in rounds.items():
                cpu = server.cpu_seconds() if server is not None else None
                figures = run_phase(kind, bootstrap, topic, args.consumers, args.messages)
                after = server.cpu_seconds() if server is not None else None
                if cpu is not None and after is not None:
                    figures["server_cpu_s"] = round(after - cpu, 2)
                runs.append(figures)
                print(f"{kind:8} {figures['records']:>9} records {figures['mb']:8.1f} MB "
                      f"{figures['seconds']:7.2f} s {figures['mb_per_s']:8.1f} MB/s "
                      f"(server CPU {figures.get('server_cpu_s', '?')} s)")
    finally:
        if server is not None:
            server.stop()
    medians = {kind: statistics.median(r["mb_per_s"] for r in runs)
               for kind, runs in rounds.items()}
    ratio = round(medians["share"] / medians["classic"], 3) if medians["classic"] else 0.0
    print(f"median MB/s: classic {medians['classic']:.1f}, share {medians['share']:.1f}; "
          f"share / classic: {ratio:.0%}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "rounds": rounds, "median_mb_per_s": medians,
                       "share_of_classic": ratio}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
