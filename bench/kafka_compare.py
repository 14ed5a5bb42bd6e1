"""BMQ and Apache Kafka 4.4 side by side on this machine: the same workloads, the same client,
the same data disk, one broker process each (bench.kafka_peer), one after the other.

    .venv/bin/python -m bench.kafka_compare [--peers bmq,kafka,kafka-defaults]
        [--messages 300000] [--message-size 1024] [--partitions 8] [--rate 10]
        [--duration 20] [--data-root DIR] [--json OUT]

For each broker: the time from starting its process to the first acks=all produce it accepts
(a topic auto-created on the way); ``python -m bench --mode produce`` (as fast as one
confluent-kafka producer can, acks=all, 1 KiB values, 8 partitions) and ``--mode consume``
(the whole topic, one consumer): MB/s, and the broker's CPU seconds per GB (its process tree,
from /proc); ``--mode e2e`` at ``--rate`` MB/s: the acks=all latency of a paced producer,
p50/p99/p99.9; the same records produced and consumed with the Java client (Kafka's
kafka-producer-perf-test and kafka-consumer-perf-test, the client's defaults but acks=all):
MB/s; the broker's resident memory after all that (and its peak); then the time from starting
it again to its first accepted produce, after a SIGTERM and after a kill -9.

The peers: ``bmq`` is `bmq serve` with its defaults: acks=all is answered once the write is
fsynced (group commit). ``kafka`` is Kafka with its defaults but for those a single node needs
(replication factor 1 for its internal topics) and ``log.flush.interval.messages=1``: it fsyncs
each append before answering, the durability BMQ's acks=all gives (Kafka's default leaves the
fsync to the OS and counts on replicas instead). ``kafka-defaults`` is Kafka without it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.java_perf import java_consume, java_produce
from bench.kafka_peer import BmqPeer, KafkaPeer, Peer, environment_note
from bench.topic import BenchError

GB, MB, MIB = 1e9, 1e6, 2**20
READY_TOPIC = "bench-ready"
TOPIC = "bmq-bench"     # the bench's default topic
PACED_TOPIC = "bench-paced"
JAVA_TOPIC = "bench-java"
FSYNC_EACH_WRITE = {"log.flush.interval.messages": "1"}

PEERS: dict[str, Callable[[Path], Peer]] = {
    "bmq": BmqPeer,
    "kafka": lambda base: KafkaPeer(base, "Kafka 4.4 (fsync each write)", FSYNC_EACH_WRITE),
    "kafka-defaults": lambda base: KafkaPeer(base, "Kafka 4.4 (defaults)", {}),
}


def first_accepted_produce(peer: Peer, started: float, timeout: float = 180.0) -> float:
    """Seconds from ``started`` to the delivery of one acks=all record. The producer retries
    its connection every 10-50 ms while the broker is not listening yet."""
    delivered: list[float] = []
    failed: list[str] = []

    def report(error: Any, _message: Any) -> None:
        if error is None:
            delivered.append(time.monotonic())
        else:
            failed.append(str(error))

    producer = Producer({"bootstrap.servers": peer.bootstrap, "acks": "all",
                         "message.timeout.ms": int(timeout * 1000),
                         "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 50,
                         "socket.connection.setup.timeout.ms": 1000, "log_level": 0})
    producer.produce(READY_TOPIC, value=b"ready", on_delivery=report)
    deadline = time.monotonic() + timeout
    while not delivered and not failed and time.monotonic() < deadline:
        producer.poll(0.005)
        peer.alive()
    if not delivered:
        raise BenchError(f"{peer.name} accepted no produce within {timeout:.0f} s "
                         f"({failed or 'no answer'}):\n{peer.log_tail()}")
    return delivered[0] - started


def create_ready_topic(peer: Peer, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Created first and waited for until every partition answers ListOffsets: Kafka elects
    a new topic's leaders a moment after CreateTopics answers (the bench expects a ready
    topic)."""
    admin = AdminClient({"bootstrap.servers": peer.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout)
    consumer = Consumer({"bootstrap.servers": peer.bootstrap, "group.id": "bench-ready"})
    deadline = time.monotonic() + timeout
    try:
        for partition in range(partitions):
            while True:
                try:
                    consumer.get_watermark_offsets(TopicPartition(topic, partition), 5.0)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
    finally:
        consumer.close()


def run_bench(peer: Peer, args: argparse.Namespace, out: Path,
              workload: list[str]) -> tuple[dict[str, Any], float]:
    """``python -m bench`` against the peer: its phases, and the peer's CPU seconds meanwhile."""
    before = peer.cpu_seconds()
    subprocess.run([sys.executable, "-m", "bench", "--bootstrap", peer.bootstrap, "--acks", "all",
                    "--message-size", str(args.message_size), "--partitions",
                    str(args.partitions), "--no-progress", "--json", str(out), *workload],
                   check=True, stdout=sys.stderr, cwd=Path(__file__).resolve().parents[1])
    cpu = peer.cpu_seconds() - before
    doc: dict[str, Any] = json.loads(out.read_text())
    phases = {r["phase"]: r for r in doc["results"]}
    for phase in phases.values():
        if phase["errors"] or not phase["complete"]:
            raise BenchError(f"{peer.name}: {phase['phase']} had {phase['errors']} errors "
                             f"(complete: {phase['complete']}): {phase['notes']}")
    return phases, cpu


def restart_seconds(peer: Peer, sig: int) -> tuple[float, float]:
    """(seconds the process took to exit on ``sig``, seconds from starting it again to its
    first accepted produce)."""
    stopped = peer.stop(sig)
    return stopped, first_accepted_produce(peer, peer.launch())


def bench_peer(peer: Peer, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"peer": peer.name}
    try:
        result["start_s"] = first_accepted_produce(peer, peer.launch())
        for topic in (TOPIC, PACED_TOPIC, JAVA_TOPIC):
            create_ready_topic(peer, topic, args.partitions)
        produce, cpu = run_bench(peer, args, peer.base / "produce.json",
                                 ["--mode", "produce", "--messages", str(args.messages)])
        result["produce"] = produce["produce"]
        result["produce_cpu_s_per_gb"] = cpu / (produce["produce"]["bytes"] / GB)
        consume, cpu = run_bench(peer, args, peer.base / "consume.json", ["--mode", "consume"])
        result["consume"] = consume["consume"]
        result["consume_cpu_s_per_gb"] = cpu / (consume["consume"]["bytes"] / GB)
        paced, _ = run_bench(peer, args, peer.base / "paced.json",
                             ["--mode", "e2e", "--topic", PACED_TOPIC, "--rate", str(args.rate),
                              "--duration", str(args.duration)])
        result["paced_produce"], result["e2e"] = paced["e2e-produce"], paced["e2e"]
        # The Java client: Kafka's own perf tools, the same records (MB/s in 10^6 bytes; the
        # consumer's without its group join, as the Python consumer assigns).
        produced = java_produce(peer.bootstrap, JAVA_TOPIC, args.messages, args.message_size)
        result["java_produce_mb_per_s"] = produced.records_per_s * args.message_size / MB
        consumed = java_consume(peer.bootstrap, JAVA_TOPIC, args.messages)
        result["java_consume_mb_per_s"] = float(consumed["fetch.MB.sec"]) * MIB / MB
        result["rss_mb"], result["peak_rss_mb"] = peer.memory_mb()
        result["data_mb"] = peer.data_bytes() / 2**20
        result["sigterm_exit_s"], result["restart_s"] = restart_seconds(peer, signal.SIGTERM)
        _, result["restart_after_kill_s"] = restart_seconds(peer, signal.SIGKILL)
        return result
    finally:
        peer.stop(signal.SIGKILL)


def _latency(phase: dict[str, Any]) -> str:
    latency = phase["latency_ms"]
    return f"{latency['p50']:.1f} / {latency['p99']:.1f} / {latency['p99.9']:.1f}"


ROWS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("produce MB/s (acks=all, flat out)", lambda r: f"{r['produce']['mb_per_s']:.1f}"),
    ("consume MB/s (whole topic)", lambda r: f"{r['consume']['mb_per_s']:.1f}"),
    ("produce MB/s, Java client (kafka-producer-perf-test, acks=all)",
     lambda r: f"{r['java_produce_mb_per_s']:.1f}"),
    ("consume MB/s, Java client (kafka-consumer-perf-test)",
     lambda r: f"{r['java_consume_mb_per_s']:.1f}"),
    ("acks=all latency at the paced rate, ms p50 / p99 / p99.9", lambda r: _latency(
        r["paced_produce"])),
    ("produce to consumer at the paced rate, ms p50 / p99 / p99.9", lambda r: _latency(
        r["e2e"])),
    ("broker CPU s per GB produced", lambda r: f"{r['produce_cpu_s_per_gb']:.1f}"),
    ("broker CPU s per GB consumed", lambda r: f"{r['consume_cpu_s_per_gb']:.1f}"),
    ("broker RSS after the workloads (peak), MiB",
     lambda r: f"{r['rss_mb']:.0f} ({r['peak_rss_mb']:.0f})"),
    ("start to first accepted produce, s", lambda r: f"{r['start_s']:.2f}"),
    ("exit on SIGTERM, s", lambda r: f"{r['sigterm_exit_s']:.2f}"),
    ("restart (after SIGTERM) to first accepted produce, s", lambda r: f"{r['restart_s']:.2f}"),
    ("restart after kill -9 to first accepted produce, s",
     lambda r: f"{r['restart_after_kill_s']:.2f}"),
]


def markdown_table(results: list[dict[str, Any]]) -> str:
    lines = ["| | " + " | ".join(r["peer"] for r in results) + " |",
             "| --- |" + " --- |" * len(results)]
    lines += [f"| {label} | " + " | ".join(cell(r) for r in results) + " |"
              for label, cell in ROWS]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", default="bmq,kafka,kafka-defaults",
                        help=f"comma-separated, of {', '.join(PEERS)}")
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--message-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rate", type=float, default=10.0, help="MB/s of the paced run [10]")
    parser.add_argument("--duration", type=float, default=20.0, help="s of the paced run [20]")
    parser.add_argument("--data-root", type=Path, default=Path(tempfile.gettempdir()),
                        help="where each broker's data directory goes [the temp directory]")
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    names = args.peers.split(",")
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        parser.error(f"unknown peers: {', '.join(unknown)}")
    results = []
    for name in names:
        base = Path(tempfile.mkdtemp(prefix=f"bench-{name}-", dir=args.data_root))
        try:
            results.append(bench_peer(PEERS[name](base), args))
        finally:
            if not args.keep_data:
                shutil.rmtree(base, ignore_errors=True)
        print(f"{results[-1]['peer']}: done", file=sys.stderr, flush=True)
    print(f"{args.messages} messages of {args.message_size} bytes, {args.partitions} "
          f"partitions; paced at {args.rate:g} MB/s for {args.duration:g} s; data in "
          f"{args.data_root}; {environment_note(args.data_root)}\n")
    print(markdown_table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
