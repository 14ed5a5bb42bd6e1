"""Old clients' cost (issue #36): produce and consume MB/s of a message-format-v1 client (librdkafka
told it talks to a 0.10.0 broker: Produce v2 with magic 1 messages, Fetch v3) against today's
v2 client, on one `bmq serve`, one partition per round.

    .venv/bin/python -m bench.legacy [--messages 200000] [--size 1000] [--rounds 3]
        [--compression none] [--clients v2,v1] [--command 'bmq serve']

Rounds alternate the clients so drift on a loaded machine hits both; the medians are printed,
with the server's CPU seconds per GB of values (what the conversion costs it, less sensitive to
other load than MB/s).
``--command`` runs another server build (e.g. an older checkout through PYTHONPATH), for the v2
client's figures before and after a change.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.server import LocalServer, tree_cpu_seconds

CLIENTS: dict[str, dict[str, Any]] = {
    "v2": {},
    "v1": {"api.version.request": False, "broker.version.fallback": "0.10.0"},
    "v0": {"api.version.request": False, "broker.version.fallback": "0.9.0"},
}


def produce(bootstrap: str, topic: str, settings: dict[str, Any], count: int, size: int,
            compression: str) -> float:
    """MB/s of values acknowledged (acks=all) from the first produce to the last ack."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "batch.size": 1 << 20, "compression.type": compression,
                         "queue.buffering.max.messages": 1_000_000, **settings})
    body = os.urandom(size // 2) * 2
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=body, key=i.to_bytes(8, "big"), partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) != 0:
        raise RuntimeError("messages left undelivered")
    return count * size / (time.perf_counter() - start) / 1e6


def consume(bootstrap: str, topic: str, settings: dict[str, Any], count: int, size: int
            ) -> float:
    """MB/s of values read from offset 0 to the last of ``count``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
                         "max.partition.fetch.bytes": 4 << 20, **settings})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    start = time.perf_counter()
    while seen < count:
        for message in consumer.consume(10_000, timeout=1.0):
            if message.error() is None:
                seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return count * size / elapsed / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compression", default="none")
    parser.add_argument("--clients", default="v2,v1")
    parser.add_argument("--command", default=None, help="the server's command (bmq serve)")
    args = parser.parse_args()
    clients = args.clients.split(",")
    results: dict[str, dict[str, list[float]]] = {
        c: {"produce": [], "consume": [], "produce cpu": [], "consume cpu": []} for c in clients}
    gigabytes = args.messages * args.size / 1e9
    with LocalServer(args.command) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})

        def measured(client: str, phase: str, run: Callable[[], float]) -> None:
            cpu = tree_cpu_seconds(server.pid) or 0.0
            results[client][phase].append(run())
            results[client][f"{phase} cpu"].append(
                ((tree_cpu_seconds(server.pid) or 0.0) - cpu) / gigabytes)

        for round_ in range(args.rounds):
            for client in clients:
                topic = f"legacy-{client}-{round_}-{uuid.uuid4().hex[:6]}"
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                time.sleep(0.5)
                settings = CLIENTS[client]
                measured(client, "produce", partial(
                    produce, server.bootstrap, topic, settings, args.messages, args.size,
                    args.compression))
                measured(client, "consume", partial(
                    consume, server.bootstrap, topic, settings, args.messages, args.size))
                print(f"round {round_ + 1} {client}: " + ", ".join(
                    f"{phase} {results[client][phase][-1]:.1f} MB/s "
                    f"({results[client][phase + ' cpu'][-1]:.1f} server CPU s/GB)"
                    for phase in ("produce", "consume")), flush=True)
    print(f"{args.messages} x {args.size} B, compression {args.compression}, "
          f"medians of {args.rounds} rounds (MB/s of values; server CPU s per GB):")
    for client in clients:
        print(f"  {client}: " + ", ".join(
            f"{phase} {statistics.median(results[client][phase]):.1f} MB/s "
            f"({statistics.median(results[client][phase + ' cpu']):.1f} s/GB)"
            for phase in ("produce", "consume")))


if __name__ == "__main__":
    main()
