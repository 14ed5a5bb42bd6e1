"""A broker cut off from every other host (a network partition), killed -9 or frozen (SIGSTOP)
on the fault tests' cluster of real hosts (network namespaces, S3 on SeaweedFS), under
idempotent producers behind the proxy: do the healthy brokers' partitions keep their latency,
how soon are the victim's partitions writable again, does any producer die? (``proxy_freeze``
measures kill -9 and SIGSTOP on loopback with ``file://``; only hosts of their own let a broker
be cut off the network.) Needs root, for the namespaces.

    .venv/bin/python -m bench.proxy_faults_hosts [--fault none|partition|kill|pause ...]
        [--fault-s 8] [--rounds 1] [--rate 500] [--partitions 12] [--storage s3|file]

``--storage file`` puts the segments in a directory all hosts share (the issue's own set-up:
a broker cut off the network still reaches its storage) instead of S3 on a host of its own.

Reports per round and producer (one bootstrapped on the proxy, one on the brokers, whose
Metadata names the proxy as every partition's leader) what ``proxy_freeze`` reports, and at the
end that every acknowledged record was read back once, at its offset. The fault ``none`` is the
baseline: the same windows with nothing done, what "keep their latency" compares with.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from bench.proxy_freeze import FaultWindow, WatchedProducer, fault_window, read_back
from tests.faults.cluster import HOSTS, SESSION_TIMEOUT_MS, FaultCluster
from tests.faults.nemesis import CLIENTS, Fault, Nemesis

VICTIM = "broker2"


def _fault(nemesis: Nemesis, kind: str) -> Fault | contextlib.nullcontext[None]:
    if kind == "none":      # the baseline: the same window without a fault
        return contextlib.nullcontext()
    if kind == "partition":
        return nemesis.partition(VICTIM, [*(h for h in HOSTS if h != VICTIM), CLIENTS])
    return nemesis.kill(VICTIM) if kind == "kill" else nemesis.pause(VICTIM)


def fault_round(cluster: FaultCluster, producers: list[WatchedProducer], kind: str,
                fault_s: float) -> list[FaultWindow]:
    """The fault on ``VICTIM`` for ``fault_s``, undone; what each producer saw from the fault to
    2 s after."""
    victim = cluster.broker_id(VICTIM)
    cluster.wait_for(lambda: all(victim in cluster.owners(p.topic).values() for p in producers),
                     f"{VICTIM} owning partitions")
    time.sleep(3)
    owned = {p.topic: {i for i, o in cluster.owners(p.topic).items() if o == victim}
             for p in producers}
    start = time.monotonic()
    with _fault(cluster.nemesis(), kind):
        time.sleep(fault_s)
    undone = time.monotonic()
    time.sleep(2)
    end = time.monotonic()
    return [fault_window(p, owned[p.topic], start, undone, end) for p in producers]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", action="append",
                        choices=("none", "partition", "kill", "pause"),
                        help="repeatable [all four; none: the same window without a fault]")
    parser.add_argument("--fault-s", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--rate", type=float, default=500.0, help="messages/s per producer")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--storage", choices=("s3", "file"), default="s3")
    args = parser.parse_args()
    cluster = FaultCluster.start(Path(tempfile.mkdtemp(prefix="bmq-proxy-faults-")),
                                 args.storage)
    producers: list[WatchedProducer] = []
    try:
        endpoints = cluster.endpoints()
        assert endpoints.proxy is not None
        admin = AdminClient({"bootstrap.servers": endpoints.admin})
        for via, bootstrap in (("proxy", endpoints.proxy), ("brokers", endpoints.bootstrap)):
            topic = f"faults-{via}"
            admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
            cluster.wait_writable(topic)
            producers.append(WatchedProducer(bootstrap, topic, args.partitions, args.rate))
            producers[-1].start()
        print(f"2 producers at {args.rate:.0f} msg/s each, {args.partitions} partitions, "
              f"session timeout {SESSION_TIMEOUT_MS} ms, storage {cluster.storage}", flush=True)
        for kind in args.fault or ["none", "partition", "kill", "pause"]:
            for round_no in range(args.rounds):
                windows = fault_round(cluster, producers, kind, args.fault_s)
                for producer, window in zip(producers, windows, strict=True):
                    print(f"{kind} of {VICTIM} for {args.fault_s}s, round {round_no + 1}, "
                          f"{producer.topic}: {window.describe()}", flush=True)
                cluster.heal()
        read_back(producers, endpoints.bootstrap)
    finally:
        for producer in producers:
            producer._stop.set()
        cluster.stop()


if __name__ == "__main__":
    main()
