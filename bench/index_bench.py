"""Issue 19's bars for Index Query: a point lookup over many indexed records answers in under
50 ms p99, and building the index does not slow produce by more than 10%.

    .venv/bin/python -m bench.index_bench [--records 2000000] [--lookups 300]
                                          [--produce-records 300000] [--runs 2]

Lookups: one topic of 4 partitions indexing ``order_id`` and ``key`` gets ``--records`` JSON
records of about 120 B (each ``order_id`` unique, 1,000 keys), produced by confluent-kafka; once
the index has caught up (the time that took after the last acknowledgement is reported),
``--lookups`` queries ``GET /topics/T/query?where=order_id=N`` for random N are timed from one
HTTP client (each must answer exactly the one record), and their latency percentiles reported.

Produce: ``--produce-records`` of the same records (100,000 distinct ones, encoded beforehand, so
the client's JSON encoding is not what limits the rate) into a fresh topic without an index and
into one indexing both fields, in ABBA order ``--runs`` times; MB/s of values from the first
produce() to the last acknowledgement, and the broker's CPU seconds per MB (indexing
included). After a run with the index on, the next run waits until
the index has caught up, so it is not charged for the previous run's indexing.

Without ``--bootstrap`` it spawns a throw-away ``bmq serve`` with a metrics port (the HTTP port
of Index Query); with it, ``--http`` must name that broker's HTTP port.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import statistics
import time
import urllib.request
import uuid
from collections.abc import Callable

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.server import LocalServer, default_command, free_port

PARTITIONS = 4
FIELDS = "order_id,key"
KEYS = 1000


def value_of(i: int) -> bytes:
    return json.dumps({"order_id": i, "customer": {"id": i % 977, "tier": "gold"},
                       "amount": round(i * 0.37 % 1000, 2),
                       "items": [f"sku-{i % 31}", f"sku-{i % 17}"]}).encode()


def make_topic(bootstrap: str, indexed: bool) -> str:
    topic = f"index-bench-{uuid.uuid4().hex[:8]}"
    config = {"bmq.index.fields": FIELDS} if indexed else {}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, config=config)])[topic].result(30)
    return topic


def produce(bootstrap: str, topic: str, start: int, count: int, distinct: int = 0
            ) -> tuple[float, int]:
    """(seconds from the first produce() to the last acknowledgement, value bytes). With
    ``distinct`` the values (made beforehand) repeat every ``distinct`` records, so that the
    client's JSON encoding does not limit the rate."""
    made = [value_of(i) for i in range(start, start + distinct)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1 << 20})
    producer.list_topics(topic, timeout=30)
    size = 0
    began = time.perf_counter()
    for i in range(start, start + count):
        value = made[i % distinct] if distinct else value_of(i)
        size += len(value)
        while True:
            try:
                producer.produce(topic, value, key=b"k%d" % (i % KEYS))
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(600):
        raise SystemExit("could not produce every record")
    return time.perf_counter() - began, size


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return json.loads(answer.read())


def wait_indexed(http: str, topic: str) -> float:
    """Seconds until every partition is indexed up to its high watermark."""
    began = time.perf_counter()
    while True:
        doc = get_json(f"{http}/topics/{topic}/index")
        assert isinstance(doc, dict)
        if all(p["indexed_up_to"] == p["high_watermark"] for p in doc["partitions"]):
            return time.perf_counter() - began
        time.sleep(0.2)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def lookups(bootstrap: str, http: str, records: int, count: int) -> None:
    topic = make_topic(bootstrap, indexed=True)
    seconds, size = produce(bootstrap, topic, 0, records)
    print(f"produced {records} records ({size / 1e6:.0f} MB) in {seconds:.1f} s "
          f"({size / 1e6 / seconds:.1f} MB/s) with the index on")
    caught_up = wait_indexed(http, topic)
    print(f"index caught up {caught_up:.1f} s after the last acknowledgement")
    latencies = []
    for n in random.Random(19).sample(range(records), count):
        began = time.perf_counter()
        with urllib.request.urlopen(f"{http}/topics/{topic}/query?where=order_id={n}",
                                    timeout=60) as answer:
            lines = answer.read().splitlines()
        latencies.append((time.perf_counter() - began) * 1000)
        assert len(lines) == 1 and json.loads(json.loads(lines[0])["value"])["order_id"] == n
    print(f"{count} point lookups over {records} indexed records: p50 "
          f"{percentile(latencies, 0.5):.1f} ms, p90 {percentile(latencies, 0.9):.1f} ms, "
          f"p99 {percentile(latencies, 0.99):.1f} ms, max {max(latencies):.1f} ms")


def produce_on_off(bootstrap: str, http: str, records: int, runs: int,
                   cpu: Callable[[], float | None]) -> None:
    """MB/s, and the broker's CPU seconds per produced MB (indexing included, until the index
    caught up): the machine this runs on may be shared, which moves MB/s more than CPU."""
    rates: dict[bool, list[float]] = {False: [], True: []}
    costs: dict[bool, list[float]] = {False: [], True: []}
    for indexed in [False, True, True, False] * runs:
        topic = make_topic(bootstrap, indexed)
        cpu_before = cpu()
        seconds, size = produce(bootstrap, topic, 0, records, distinct=100_000)
        rates[indexed].append(size / 1e6 / seconds)
        line = f"index {'on ' if indexed else 'off'}: {rates[indexed][-1]:.1f} MB/s"
        if indexed:
            line += f", index caught up {wait_indexed(http, topic):.1f} s after the last ack"
        cpu_after = cpu()
        if cpu_before is not None and cpu_after is not None:
            costs[indexed].append((cpu_after - cpu_before) / (size / 1e6))
            line += f", broker {costs[indexed][-1]:.3f} CPU s/MB"
        print(line)
    off, on = statistics.mean(rates[False]), statistics.mean(rates[True])
    print(f"produce of {records} records: index off {off:.1f} MB/s, on {on:.1f} MB/s "
          f"(mean of {2 * runs} each): {100 * (off - on) / off:+.1f}% slower with the index")
    if costs[False] and costs[True]:
        print(f"broker CPU per MB: off {statistics.mean(costs[False]):.3f} s, on "
              f"{statistics.mean(costs[True]):.3f} s (indexing included)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--lookups", type=int, default=300)
    parser.add_argument("--produce-records", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--skip-lookups", action="store_true")
    parser.add_argument("--skip-produce", action="store_true")
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--http", default=None, help="the broker's HTTP (metrics) port's URL")
    args = parser.parse_args()

    def run(bootstrap: str, http: str, cpu: Callable[[], float | None]) -> None:
        if not args.skip_produce:
            produce_on_off(bootstrap, http, args.produce_records, args.runs, cpu)
        if not args.skip_lookups:
            lookups(bootstrap, http, args.records, args.lookups)

    if args.bootstrap:
        if not args.http:
            raise SystemExit("--http is needed with --bootstrap")
        run(args.bootstrap, args.http, lambda: None)
        return
    port = free_port()
    command = shlex.join([*default_command(), "--metrics-port", str(port)])
    with LocalServer(command) as server:
        run(server.bootstrap, f"http://127.0.0.1:{port}", server.cpu_seconds)


if __name__ == "__main__":
    main()
