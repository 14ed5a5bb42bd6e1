"""What partitions cost a cluster: for each size, a fresh ZooKeeper, controller and three brokers
on one shared ``file://`` storage are given that many partitions (topics of ``--per-topic``) and
measured: CreateTopics time and the time until every partition is writable, each broker's RSS,
a full Metadata request, produce throughput spread over every partition, and a kill -9 of the
broker owning the most: the time until the controller has given each of its partitions to the
other two, until each is writable there (their reports in ZooKeeper; both read by polling
ZooKeeper, a few tenths of a second a read at these sizes) and until a produce to each of them
is acknowledged.

    .venv/bin/python -m bench.scale_cluster [--partitions 30000,100000] [--per-topic 100]

BMQ's settings are its defaults. Prints a Markdown table, one row per size."""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from bench.scale import create, full_metadata, open_files, produce_everywhere, rss_mib
from bmq.metadata.zookeeper.layout import WRITABLE, Paths, loads, read_children
from bmq.metadata.zookeeper.state import states_of
from tests.cluster.conftest import Cluster, _env
from tests.cluster.zookeeper import ZooKeeper

BROKERS = (1, 2, 3)
_POLL_S = 0.1
_VALUE = b"y" * 100


@dataclass
class Row:
    partitions: int
    create_s: float
    writable_s: float
    rss_mib: list[float]
    open_files: int
    metadata_s: float
    produce_msgs_s: float
    moved: int
    moved_assigned_s: float
    moved_writable_s: float
    moved_acked_s: float

    def cells(self) -> list[str]:
        return [f"{self.partitions:,}", f"{self.create_s:.1f}", f"{self.writable_s:.1f}",
                "/".join(f"{r:.0f}" for r in self.rss_mib), f"{self.open_files:,}",
                f"{self.metadata_s:.2f}", f"{self.produce_msgs_s:,.0f}", f"{self.moved:,}",
                f"{self.moved_assigned_s:.1f}", f"{self.moved_writable_s:.1f}",
                f"{self.moved_acked_s:.1f}"]


HEADER = ["partitions", "CreateTopics s", "all writable s", "RSS MiB (each broker)",
          "open files (all brokers)", "Metadata s", "produce msg/s (all partitions)",
          "killed broker's partitions", "assigned elsewhere s", "writable elsewhere s",
          "acked elsewhere s"]


class States:
    """Every partition's owner and state, read from ZooKeeper with pipelined requests
    (``read_children``: the documents of 1,000 topics in one round trip, not one each)."""

    def __init__(self, zk: KazooClient, paths: Paths, topics: dict[str, int]) -> None:
        self.zk, self.paths, self.topics = zk, paths, topics

    def owners(self) -> dict[tuple[str, int], tuple[int, str]]:
        brokers = read_children(self.zk, self.paths.brokers)
        assignments = read_children(self.zk, self.paths.assignments)
        return {(s.topic, s.partition): (s.owner, s.state)
                for s in states_of(self.topics, {t: loads(d) for t, d in assignments.items()},
                                   {int(b): loads(d) for b, d in brokers.items()})}

    def wait(self, done: Callable[[dict[tuple[str, int], tuple[int, str]]], bool],
             timeout: float) -> float:
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            if done(self.owners()):
                return time.monotonic() - began
            time.sleep(_POLL_S)
        raise TimeoutError(f"not reached in {timeout:.0f} s")


def all_writable(states: dict[tuple[str, int], tuple[int, str]]) -> bool:
    return all(state == WRITABLE for _, state in states.values())


def produce_to(bootstrap: str, partitions: list[tuple[str, int]]) -> None:
    """One message to each of ``partitions``, every one acknowledged (acks=all)."""
    failed: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all",
                         "queue.buffering.max.messages": 1_000_000,
                         "message.timeout.ms": 0, "log.connection.close": False})
    for topic, partition in partitions:
        producer.produce(topic, _VALUE, partition=partition,
                         on_delivery=lambda e, _: e and failed.append(str(e)))
        producer.poll(0)
    if producer.flush(600) or failed:
        raise RuntimeError(f"produce failed: {failed[:3]}")


def measure(base: Path, zk: ZooKeeper, partitions: int, per_topic: int) -> Row:
    (base / "shared").mkdir(parents=True)
    env = {k: v for k, v in _env().items() if k == "BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS"}
    cluster = Cluster(base, zk, f"file://{base / 'shared'}", {}, env)
    try:
        cluster.start_controller()
        for broker_id in BROKERS:
            cluster.add_broker(broker_id)
        names = [f"scale-{n:05d}" for n in range(partitions // per_topic)]
        states = States(cluster.zk, cluster.paths, dict.fromkeys(names, per_topic))
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        create_s = create(admin, names, per_topic)
        writable_s = create_s + states.wait(all_writable, 900)
        pids = [cluster.brokers[b].pid for b in BROKERS]
        rss = [rss_mib(pid) for pid in pids]
        files = sum(open_files(pid) for pid in pids)
        metadata_s = full_metadata(admin, len(names))
        produce = produce_everywhere(cluster.bootstrap, names, per_topic, 1)
        owners = states.owners()
        owned = {b: [tp for tp, (owner, _) in owners.items() if owner == b] for b in BROKERS}
        victim = max(BROKERS, key=lambda b: len(owned[b]))
        moved = owned[victim]
        killed = time.monotonic()
        cluster.brokers[victim].kill()
        others = set(BROKERS) - {victim}
        assigned: list[float] = []   # when the controller had given all of them away

        def moved_and_writable(now: dict[tuple[str, int], tuple[int, str]]) -> bool:
            if not assigned and all(now[tp][0] in others for tp in moved):
                assigned.append(time.monotonic() - killed)
            return all(now[tp][0] in others and now[tp][1] == WRITABLE for tp in moved)

        moved_writable_s = states.wait(moved_and_writable, 300)
        produce_to(",".join(cluster.brokers[b].bootstrap for b in sorted(others)), moved)
        moved_acked_s = time.monotonic() - killed
        return Row(partitions, create_s, writable_s, rss, files, metadata_s, produce,
                   len(moved), assigned[0], moved_writable_s, moved_acked_s)
    finally:
        cluster.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="30000,100000",
                        help="comma-separated sizes, over the three brokers [30000,100000]")
    parser.add_argument("--per-topic", type=int, default=100)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bmq-scale-cluster-"))
    zk = ZooKeeper.start(base / "zk")
    try:
        print("| " + " | ".join(HEADER) + " |")
        print("|" + " --- |" * len(HEADER))
        for n, size in enumerate(int(s) for s in args.partitions.split(",")):
            row = measure(base / f"c{n}", zk, size, args.per_topic)
            print("| " + " | ".join(row.cells()) + " |", flush=True)
    finally:
        zk.stop()


if __name__ == "__main__":
    main()
