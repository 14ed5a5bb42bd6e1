"""How long a KIP-848 rebalance takes (issue 17's bar: an 8-partition, 3-member group under
1 s): two confluent-kafka consumers (group.protocol=consumer) share a topic, a third
subscribes, and the clock runs from its subscribe() until every member holds its final share
(3, 3 and 2 partitions, none held twice), as each consumer's rebalance callbacks report it.

    .venv/bin/python -m bench.kip848_bench [--runs 5] [--heartbeat-ms 500] [--bootstrap H:P]

Without ``--bootstrap`` it spawns a throw-away ``bmq serve`` with
``group.consumer.heartbeat.interval.ms`` set to ``--heartbeat-ms``. The members that already
run learn of the new member at their next heartbeat, so a rebalance takes up to one interval
plus the revoke/assign round trips (which BMQ speeds up by asking reconciling members to
heartbeat every 100 ms).
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.server import LocalServer

PARTITIONS = 8


class Member:
    """A consumer polling on its own thread (rebalance callbacks run inside poll)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest"})
        # Kept by the rebalance callbacks (incremental under KIP-848): assignment() from another
        # thread would wait for the polling one.
        self.owned: set[int] = set()
        self.lock = threading.Lock()
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.stopping.is_set():
            self.consumer.poll(0.01)

    def _assigned(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self.owned |= {tp.partition for tp in partitions}

    def _revoked(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self.owned -= {tp.partition for tp in partitions}

    def partitions(self) -> set[int]:
        with self.lock:
            return set(self.owned)

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(5)
        self.consumer.close()


def settled(members: list[Member]) -> bool:
    shares = [m.partitions() for m in members]
    owned = [p for share in shares for p in share]
    expected = [PARTITIONS // len(members) + (1 if i < PARTITIONS % len(members) else 0)
                for i in range(len(members))]
    return sorted(len(s) for s in shares) == sorted(expected) and \
        sorted(owned) == list(range(PARTITIONS))


def wait(members: list[Member], timeout: float) -> float:
    start = time.monotonic()
    while not settled(members):
        if time.monotonic() - start > timeout:
            raise SystemExit(f"no final assignment within {timeout} s: "
                             f"{[sorted(m.partitions()) for m in members]}")
        time.sleep(0.002)
    return time.monotonic() - start


def one_run(bootstrap: str, topic: str) -> float:
    group = f"kip848-bench-{uuid.uuid4().hex[:8]}"
    members = [Member(bootstrap, group, topic) for _ in range(2)]
    try:
        wait(members, 30)
        time.sleep(1)          # a steady group, mid heartbeat interval
        start = time.monotonic()
        members.append(Member(bootstrap, group, topic))
        wait(members, 30)
        return time.monotonic() - start
    finally:
        for member in members:
            member.close()


def run(bootstrap: str, runs: int) -> list[float]:
    topic = f"kip848-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    return [one_run(bootstrap, topic) for _ in range(runs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args()
    if args.bootstrap:
        times = run(args.bootstrap, args.runs)
        where = args.bootstrap
    else:
        os.environ["BMQ_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS"] = str(args.heartbeat_ms)
        with LocalServer() as server:
            times = run(server.bootstrap, args.runs)
        where = f"bmq serve, heartbeat interval {args.heartbeat_ms} ms"
    ms = [t * 1000 for t in times]
    print(f"{where}: third member joins an {PARTITIONS}-partition group of 2; final "
          f"assignment after {', '.join(f'{t:.0f}' for t in ms)} ms "
          f"(median {statistics.median(ms):.0f} ms, max {max(ms):.0f} ms)")


if __name__ == "__main__":
    main()
