"""What partitions cost one ``bmq serve``: for each size, a fresh broker is given that many
partitions (topics of ``--per-topic``) and measured: CreateTopics time, RSS and open files,
a full Metadata request, produce throughput spread over every partition, and the time from a
restart to serving again (the process started until a produce to its last partition is
acknowledged; the stop before it apart) and until it has opened every partition (it serves
before: those not asked for open in the background), with RSS and open files after that.

    .venv/bin/python -m bench.scale [--partitions 1000,10000,50000] [--per-topic 100]
        [--messages 2]

Prints a Markdown table, one row per size. Runs under the machine's limits as they are (the
broker raises its soft limit of open files to the hard one at start-up)."""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.server import LocalServer

_TOPICS_PER_REQUEST = 50
_VALUE = b"x" * 100
_ALL_OPEN = "opened the partitions of"      # bmq.broker.partition_loader's log line


@dataclass
class Row:
    partitions: int
    create_s: float
    rss_mib: float
    open_files: int
    metadata_s: float
    produce_msgs_s: float
    stop_s: float
    start_s: float
    all_open_s: float
    rss_after_restart_mib: float
    open_files_after_restart: int

    def cells(self) -> list[str]:
        return [f"{self.partitions:,}", f"{self.create_s:.1f}", f"{self.rss_mib:.0f}",
                f"{self.open_files:,}", f"{self.metadata_s:.2f}", f"{self.produce_msgs_s:,.0f}",
                f"{self.stop_s:.1f}", f"{self.start_s:.1f}", f"{self.all_open_s:.1f}",
                f"{self.rss_after_restart_mib:.0f}",
                f"{self.open_files_after_restart:,}"]


HEADER = ["partitions", "CreateTopics s", "RSS MiB", "open files", "Metadata s",
          "produce msg/s (all partitions)", "stop s", "start to serving s",
          "start to all partitions open s", "RSS after restart MiB",
          "open files after restart"]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def create(admin: AdminClient, topics: list[str], per_topic: int) -> float:
    began = time.monotonic()
    for start in range(0, len(topics), _TOPICS_PER_REQUEST):
        batch = [NewTopic(t, per_topic, 1) for t in topics[start:start + _TOPICS_PER_REQUEST]]
        for future in admin.create_topics(batch, request_timeout=600).values():
            future.result(600)
    return time.monotonic() - began


def full_metadata(admin: AdminClient, expected: int) -> float:
    """The best of three full Metadata requests (every topic)."""
    best = float("inf")
    for _ in range(3):
        began = time.monotonic()
        topics = admin.list_topics(timeout=300).topics
        best = min(best, time.monotonic() - began)
        assert len([t for t in topics if not t.startswith("__")]) == expected
    return best


def produce_everywhere(bootstrap: str, topics: list[str], per_topic: int,
                       messages: int) -> float:
    """``messages`` per partition, round robin over every partition; messages/s."""
    failed: list[str] = []
    # No delivery timeout: at 100,000 partitions each record is a batch of its own, and one
    # flush (fsync) a partition; the run measures how long that takes, however long.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": "all",
                         "queue.buffering.max.messages": 1_000_000, "message.timeout.ms": 0,
                         "log.connection.close": False})
    began = time.monotonic()
    for _ in range(messages):
        for topic in topics:
            for partition in range(per_topic):
                while True:
                    try:
                        producer.produce(topic, _VALUE, partition=partition,
                                         on_delivery=lambda e, _: e and failed.append(str(e)))
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.poll(0)
    if producer.flush(600) or failed:
        raise RuntimeError(f"produce failed: {failed[:3]}")
    return messages * len(topics) * per_topic / (time.monotonic() - began)


def restart_to_serving(server: LocalServer, topic: str, partition: int
                       ) -> tuple[float, float, float]:
    """(seconds to stop, seconds from the new process's start until a produce to
    ``topic``/``partition`` is acknowledged, and until it logged every partition open)."""
    began = time.monotonic()
    server.terminate()
    with open(server.log_path, "ab") as log:
        log.truncate(0)
    stopped = time.monotonic()
    server.relaunch()
    producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
    delivered: list[bool] = []
    producer.produce(topic, _VALUE, partition=partition,
                     on_delivery=lambda e, _: delivered.append(e is None))
    if producer.flush(600) or delivered != [True]:
        raise RuntimeError("the produce after the restart failed")
    serving = time.monotonic() - stopped
    while _ALL_OPEN not in Path(server.log_path).read_text(errors="replace"):
        time.sleep(0.05)
    return stopped - began, serving, time.monotonic() - stopped


def measure(partitions: int, per_topic: int, messages: int) -> Row:
    topics = [f"scale-{n:05d}" for n in range(partitions // per_topic)]
    with LocalServer(startup_timeout=600) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        create_s = create(admin, topics, per_topic)
        rss, files = rss_mib(server.pid), open_files(server.pid)
        metadata_s = full_metadata(admin, len(topics))
        try:
            produce = produce_everywhere(server.bootstrap, topics, per_topic, messages)
        except KafkaException as error:
            raise RuntimeError(f"produce: {error}") from error
        stop_s, start_s, all_open_s = restart_to_serving(server, topics[-1], per_topic - 1)
        return Row(partitions, create_s, rss, files, metadata_s, produce, stop_s, start_s,
                   all_open_s, rss_mib(server.pid), open_files(server.pid))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="1000,10000,50000",
                        help="comma-separated sizes [1000,10000,50000]")
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--messages", type=int, default=2, help="per partition [2]")
    args = parser.parse_args()
    print("| " + " | ".join(HEADER) + " |")
    print("|" + " --- |" * len(HEADER))
    for size in (int(s) for s in args.partitions.split(",")):
        row = measure(size, args.per_topic, args.messages)
        print("| " + " | ".join(row.cells()) + " |", flush=True)


if __name__ == "__main__":
    main()
