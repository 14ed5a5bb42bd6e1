"""Issue #35's bar for `bmq databus`: with many small producers (100 clients each producing
100 messages/s of 200 bytes), the databus cuts the Produce requests the cluster serves by at
least 20x against the same clients producing directly, and the cluster's CPU by at least half,
at equal delivered throughput; the latency the agent adds (p50/p99) is reported.

    .venv/bin/python -m bench.databus [--clients 100] [--rate 100] [--size 200] [--duration 20]
        [--client python|java] [--processes 4]

One throw-away `bmq serve` (with its metrics port) and, for the databus run, one `bmq databus
run` in front of it. Each client is a producer of its own (its own connections, batching and
threads), spread over ``--processes`` processes; each paces ``--rate`` messages/s with random
keys for ``--duration`` s. ``--client python``: confluent-kafka Producers with librdkafka's
defaults and acks=all (not idempotent: any number of requests in flight, so a request a
message at this rate); ``--client java``: Kafka's Java producers (bmq.clients.ManyProducers in
tests/java, built by scripts/java_clients.sh) with the Java client's defaults (acks=all,
idempotent, five requests in flight: a client whose requests wait puts more messages in each).
Measured for each run: the Produce requests the cluster served (its bmq_requests_total), the
cluster's, the agent's and the clients' CPU seconds, the messages delivered (the topic's end
offsets), and the latency of each message from produce() to its acknowledgement (acks=all:
through the agent, until the cluster took it); its maximum says whether the run kept up.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import resource
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.server import LocalServer, default_command, free_port, tree_cpu_seconds

JAVA_CLIENTS = Path(__file__).resolve().parents[1] / "scripts" / "java_clients.sh"

TOPIC = "databus-bench"
PARTITIONS = 8


def _client_worker(bootstrap: str, clients: int, rate: float, size: int, duration: float,
                   start_at: float, results: Any) -> None:
    """``clients`` producers in this process, each paced at ``rate`` messages/s."""
    producers = [Producer({"bootstrap.servers": bootstrap, "acks": "all"})
                 for _ in range(clients)]
    latencies: list[float] = []
    errors = [0]
    value = os.urandom(size // 2).hex().encode()[:size]

    def delivered(sent_at: float) -> Any:
        def report(error: Any, _: Any) -> None:
            if error is not None:
                errors[0] += 1
            else:
                latencies.append(time.monotonic() - sent_at)
        return report

    interval = 1.0 / rate
    # Each client starts at a random point of its interval, as independent applications do.
    next_at = [start_at + random.random() * interval for _ in producers]
    end_at = start_at + duration
    time.sleep(max(0.0, start_at - time.time()))
    sent = 0
    while True:
        now = time.time()
        if now >= end_at:
            break
        soonest = min(next_at)
        if soonest > now:
            for producer in producers:
                producer.poll(0)
            time.sleep(min(soonest - now, 0.002))
            continue
        for index, producer in enumerate(producers):
            while next_at[index] <= now:
                producer.produce(TOPIC, key=str(random.randrange(1 << 30)).encode(),
                                 value=value, on_delivery=delivered(time.monotonic()))
                next_at[index] += interval
                sent += 1
    for producer in producers:
        producer.flush(60)
    results.put((sent, errors[0], latencies))


def _produce_requests(metrics_port: int) -> float:
    """The Produce requests the cluster has answered (its metrics)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as page:
        for line in page.read().decode().splitlines():
            if line.startswith('bmq_requests_total{api="Produce"}'):
                return float(line.split()[-1])
    return 0.0


def _end_offsets(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "databus-bench"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(TOPIC, p), 10)[1]
                   for p in range(PARTITIONS))
    finally:
        consumer.close()


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] if ordered else 0.0


def _children_cpu_seconds() -> float:
    """CPU seconds of this process's children that have ended (the clients, once joined)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


Outcome = tuple[int, int, list[float]]     # sent, errors, latencies (s)


def _python_clients(bootstrap: str, shares: list[int], start_at: float,
                    args: argparse.Namespace) -> list[Outcome]:
    """confluent-kafka producers, ``shares[i]`` of them in worker process i."""
    results: Any = multiprocessing.get_context("spawn").Queue()
    workers = [multiprocessing.get_context("spawn").Process(
        target=_client_worker, args=(bootstrap, n, args.rate, args.size, args.duration,
                                     start_at, results))
        for n in shares]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=args.duration + 120) for _ in workers]
    for worker in workers:
        worker.join(30)
    return outcomes


def _java_clients(bootstrap: str, shares: list[int], start_at: float,
                  args: argparse.Namespace) -> list[Outcome]:
    """Kafka's Java producers (bmq.clients.ManyProducers), ``shares[i]`` of them in JVM i."""
    classpath = subprocess.run([str(JAVA_CLIENTS), "classpath"], check=True,
                               capture_output=True, text=True).stdout.strip()
    jvms = [subprocess.Popen(
        ["java", "-cp", classpath, "bmq.clients.ManyProducers", bootstrap, TOPIC, str(n),
         str(args.rate), str(args.size), str(args.duration), str(int(start_at * 1000))],
        stdout=subprocess.PIPE, text=True) for n in shares]
    outcomes = []
    for jvm in jvms:
        out, _ = jvm.communicate(timeout=args.duration + 180)
        report = json.loads(out.strip().splitlines()[-1])
        outcomes.append((report["sent"], report["errors"],
                         [us / 1e6 for us in report["latencies_us"]]))
    return outcomes


def run(mode: str, args: argparse.Namespace) -> dict[str, float]:
    metrics_port = free_port()
    command = " ".join([*default_command(), "--metrics-port", str(metrics_port)])
    with LocalServer(command) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        agent = None
        bootstrap = server.bootstrap
        spool = tempfile.mkdtemp(prefix="bmq-databus-bench-")
        if mode == "databus":
            port = free_port()
            bmq = Path(default_command()[0])
            log = open(Path(spool) / "databus.log", "ab")   # noqa: SIM115 (the agent's life)
            # BENCH_DATABUS_AGENT: another agent's command (another build of it, to compare)
            agent_command = os.environ.get("BENCH_DATABUS_AGENT", str(bmq)).split()
            workers = ["--workers", str(args.workers)] if args.workers != 1 else []
            agent = subprocess.Popen(
                [*agent_command, "databus", "run", "--cluster", server.bootstrap, "--spool-dir",
                 str(Path(spool) / "spool"), "--listen", f"127.0.0.1:{port}", *workers,
                 "--log-level", os.environ.get("BENCH_DATABUS_LOG_LEVEL", "INFO")],
                # (cwd: not this tree, which `python -m bmq` would import first, whatever
                # BENCH_DATABUS_AGENT's PYTHONPATH says)
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=spool)
            bootstrap = f"127.0.0.1:{port}"
            time.sleep(2.0)
        try:
            requests_before = _produce_requests(metrics_port)
            cpu_before = tree_cpu_seconds(server.pid) or 0.0
            agent_cpu_before = 0.0 if agent is None else tree_cpu_seconds(agent.pid) or 0.0
            start_at = time.time() + 3.0
            share = [args.clients // args.processes + (i < args.clients % args.processes)
                     for i in range(args.processes)]
            children_before = _children_cpu_seconds()
            produce = _java_clients if args.client == "java" else _python_clients
            outcomes = produce(bootstrap, [n for n in share if n], start_at, args)
            clients_cpu = _children_cpu_seconds() - children_before
            requests = _produce_requests(metrics_port) - requests_before
            cpu = (tree_cpu_seconds(server.pid) or 0.0) - cpu_before
            agent_cpu = 0.0 if agent is None else \
                (tree_cpu_seconds(agent.pid) or 0.0) - agent_cpu_before
            delivered = _end_offsets(server.bootstrap)
        finally:
            if agent is not None:
                agent.terminate()
                agent.wait(30)
                if os.environ.get("BENCH_DATABUS_LOG"):
                    shutil.copy(Path(spool) / "databus.log", os.environ["BENCH_DATABUS_LOG"])
            shutil.rmtree(spool, ignore_errors=True)
    latencies = [latency for _, _, each in outcomes for latency in each]
    return {"sent": sum(o[0] for o in outcomes), "errors": sum(o[1] for o in outcomes),
            "delivered": delivered, "produce_requests": requests,
            "requests_per_s": requests / args.duration, "cluster_cpu_s": cpu,
            "agent_cpu_s": agent_cpu, "clients_cpu_s": clients_cpu,
            "p50_ms": _percentile(latencies, 0.5) * 1000,
            "p99_ms": _percentile(latencies, 0.99) * 1000,
            "max_ms": max(latencies, default=0.0) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rate", type=float, default=100.0, help="messages/s per client")
    parser.add_argument("--size", type=int, default=200, help="value bytes")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of producing")
    parser.add_argument("--processes", type=int, default=4, help="worker processes")
    parser.add_argument("--mode", choices=["both", "direct", "databus"], default="both")
    parser.add_argument("--workers", type=int, default=1, help="the agent's processes")
    parser.add_argument("--client", choices=["python", "java"], default="python",
                        help="confluent-kafka producers, or the Java client's (one JVM a "
                             "process)")
    parser.add_argument("--json", type=Path, help="also write the figures here, as JSON")
    args = parser.parse_args()
    modes = ["direct", "databus"] if args.mode == "both" else [args.mode]
    figures = {mode: run(mode, args) for mode in modes}
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1))
    print(f"{args.clients} {args.client} clients x {args.rate:g} messages/s of {args.size} bytes, "
          f"{args.duration:g} s, {args.workers} agent worker(s); load average "
          f"{os.getloadavg()[0]:.1f} at the end")
    print(f"{'':<10}{'sent':>9}{'errors':>8}{'delivered':>11}{'Produce reqs':>14}{'reqs/s':>9}"
          f"{'cluster CPU s':>15}{'agent CPU s':>13}{'clients CPU s':>15}{'p50 ms':>9}"
          f"{'p99 ms':>9}{'max ms':>9}")
    for mode, f in figures.items():
        print(f"{mode:<10}{f['sent']:>9.0f}{f['errors']:>8.0f}{f['delivered']:>11.0f}"
              f"{f['produce_requests']:>14.0f}{f['requests_per_s']:>9.0f}"
              f"{f['cluster_cpu_s']:>15.1f}{f['agent_cpu_s']:>13.1f}{f['clients_cpu_s']:>15.1f}"
              f"{f['p50_ms']:>9.1f}"
              f"{f['p99_ms']:>9.1f}{f['max_ms']:>9.1f}")
    if len(figures) == 2:
        direct, databus = figures["direct"], figures["databus"]
        cut = direct["produce_requests"] / max(1, databus["produce_requests"])
        share = databus["cluster_cpu_s"] / max(0.01, direct["cluster_cpu_s"])
        print(f"Produce requests cut {cut:.0f}x, cluster CPU {share:.0%} of direct")


if __name__ == "__main__":
    main()
