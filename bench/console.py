"""Issue #37's speed bar for `bmq console`: the Topics page of a cluster with 1,000 topics and
10,000 partitions renders in under 1 s, and the console adds no measurable load on brokers when
idle (the Kafka requests per second it makes).

    .venv/bin/python -m bench.console [--topics 1000] [--partitions 10] [--runs 5] [--idle 30]

One throw-away `bmq serve` (with its metrics port) and one `bmq console` in front of it. The
pages are fetched over HTTP as a browser's first request would be (the whole HTML, timed to the
last byte). The requests the broker answered (its bmq_requests_total, every API) are counted
over ``--idle`` seconds twice: with no page open, and with one Cluster page open (its htmx poll,
GET /cluster/live every 2 s, and GET /metrics/sample every 5 s, which scrapes the broker's
/metrics once: made here by threads). The console is given the broker's metrics port
(``--metrics``), so the pages that read it (charts, rates, Index Query) are on.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.server import LocalServer, default_command, free_port

CREATE_BATCH = 100


def _create_topics(bootstrap: str, topics: int, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"bench-{n:04d}" for n in range(topics)]
    for start in range(0, topics, CREATE_BATCH):
        batch = [NewTopic(name, partitions, 1) for name in names[start:start + CREATE_BATCH]]
        for future in admin.create_topics(batch, request_timeout=120).values():
            future.result(120)
    # a record in the first partition of every topic, so offsets are not all 0
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for name in names:
        producer.produce(name, value=b'{"bench": true}', partition=0)
    producer.flush(60)


def _requests_total(metrics_port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as page:
        return sum(float(line.split()[-1]) for line in page.read().decode().splitlines()
                   if line.startswith("bmq_requests_total{"))


def _get(url: str) -> tuple[float, int]:
    """Seconds to the last byte of ``url``'s body, and its size."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as answer:
        body = answer.read()
        assert answer.status == 200, answer.status
    return time.perf_counter() - started, len(body)


def _wait_ready(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _get(url)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _idle_rate(metrics_port: int, seconds: float, polls: dict[str, float]) -> float:
    """The broker's requests per second over ``seconds``, with a page polling each URL of
    ``polls`` every so many seconds."""
    stop = threading.Event()

    def poll(url: str, every: float) -> None:
        while not stop.wait(every):
            _get(url)

    pollers = [threading.Thread(target=poll, args=item, daemon=True) for item in polls.items()]
    before = _requests_total(metrics_port)
    for poller in pollers:
        poller.start()
    time.sleep(seconds)
    stop.set()
    for poller in pollers:
        poller.join()
    # the metrics scrapes themselves are HTTP, not Kafka requests: not counted (their rate is
    # the /metrics/sample poll's, one scrape of each broker a poll)
    return (_requests_total(metrics_port) - before) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10, help="per topic")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of each idle count")
    args = parser.parse_args()

    metrics_port = free_port()
    command = " ".join([*default_command(), "--metrics-port", str(metrics_port)])
    with LocalServer(command) as server:
        started = time.monotonic()
        _create_topics(server.bootstrap, args.topics, args.partitions)
        print(f"created {args.topics} topics x {args.partitions} partitions in "
              f"{time.monotonic() - started:.1f} s")
        port = free_port()
        log_path = Path(tempfile.mkdtemp(prefix="bmq-console-bench-")) / "console.log"
        with log_path.open("wb") as log:
            console = subprocess.Popen(
                [*default_command()[:-1], "console", "-b", server.bootstrap,
                 "--listen", f"127.0.0.1:{port}", "--log-level", "warning",
                 "--metrics", f"http://127.0.0.1:{metrics_port}"],
                stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_ready(f"{base}/static/htmx.min.js")
            for path in ("/topics", "/cluster", "/cluster/live", "/topics/bench-0000",
                         "/cluster/storage", "/metrics/sample?topics=1",
                         "/topics/bench-0000/configs?part=1"):
                times = []
                for _ in range(args.runs + 1):
                    seconds, size = _get(base + path)
                    times.append(seconds)
                warm = times[1:]     # the first warms librdkafka's connections
                print(f"GET {path:<34} first {times[0]:.3f} s, then median "
                      f"{statistics.median(warm):.3f} s, max {max(warm):.3f} s "
                      f"({size / 1024:.0f} KiB)")
            for label, polls in (("no page open", {}), ("a Cluster page open", {
                    f"{base}/cluster/live": 2.0, f"{base}/metrics/sample": 5.0})):
                rate = _idle_rate(metrics_port, args.idle, polls)
                print(f"broker requests/s over {args.idle:g} s, {label}: {rate:.2f}")
        finally:
            console.terminate()
            console.wait(10)


if __name__ == "__main__":
    main()
