"""One fault run: a ``FaultCluster``, workloads running their clients, a seeded schedule of one
fault class applied meanwhile, then heal, a quiet period for the clients to finish what they
started, the checkers' verdicts, and the report (``tests.faults.report``).

The fault classes are the issue's list: each names its targets by role (resolved when the fault
starts: ZooKeeper's leader and the active controller move), and may combine each fault with a
kill -9 or SIGSTOP of its target inside its window. Rerun one from the command line:

    .venv/bin/python -m tests.faults.run --fault broker-zk-cut --workload queue --seed 7 \\
        --duration 60 --out build/faults

``BMQ_FAULTS_CLIENT_DEBUG=eos,cgrp`` adds librdkafka's debug output of the workloads' clients
to stderr (``eos``: each epoch bump of an idempotent producer and its cause; ``cgrp``: the
consumers' group membership).
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.faults import report
from tests.faults.cluster import BROKERS, CONTROLLERS, HOSTS, PROXY, S3, ZOOKEEPERS, FaultCluster
from tests.faults.history import History
from tests.faults.list_append import ListAppendWorkload
from tests.faults.nemesis import (
    CLIENTS,
    KINDS,
    NEMESIS,
    Fault,
    Nemesis,
    Schedule,
    ScheduleRunner,
    Step,
)
from tests.faults.queue import QueueWorkload
from tests.faults.scheduled import ScheduledWorkload
from tests.faults.share_queue import ShareWorkload
from tests.faults.workload import Workload

ZK_LEADER = "@zk-leader"                # resolved when the fault starts
ACTIVE_CONTROLLER = "@active-controller"
OTHERS = "@others"                      # as peers: every host but the targets, and the clients
QUIET_S = 10.0                          # after heal, before the clients stop

WORKLOADS: dict[str, Callable[[], Workload]] = {
    "queue": QueueWorkload, "list-append": ListAppendWorkload,
    "share": ShareWorkload, "scheduled": ScheduledWorkload,
}

# A fault class: (kind, candidate targets, parameters); one target is drawn per fault.
_Class = tuple[str, Sequence[str], dict[str, Any]]
FAULT_CLASSES: dict[str, _Class] = {
    # Cut off from ZooKeeper and the controllers, still reachable by clients and the proxy: it
    # must stop acknowledging before another broker takes its partitions over.
    "broker-zk-cut": ("partition", BROKERS, {"peers": (*ZOOKEEPERS, *CONTROLLERS)}),
    "broker-storage-cut": ("partition", BROKERS, {"peers": (S3,)}),
    "broker-cut": ("partition", BROKERS, {"peers": (OTHERS,)}),
    "controller-cut": ("partition", (ACTIVE_CONTROLLER,), {"peers": (OTHERS,)}),
    "zk-leader-cut": ("partition", (ZK_LEADER,), {"peers": (OTHERS,)}),
    # Requests arrive, answers are lost.
    "one-way-loss": ("one_way_loss", (*BROKERS, PROXY), {"peers": None}),
    "loss-30": ("loss", (*BROKERS, PROXY, ZK_LEADER), {"percent": 30}),
    "latency-500": ("latency", (*BROKERS, PROXY, S3), {"ms": 500, "jitter_ms": 100}),
    "clock-jump": ("clock_jump", (*BROKERS, *CONTROLLERS, PROXY), {}),
    "kill": ("kill", (*BROKERS, ACTIVE_CONTROLLER, PROXY), {}),
    "pause": ("pause", (*BROKERS, ACTIVE_CONTROLLER, PROXY), {}),
}
CLOCK_JUMPS_S = (-300, -120, 120, 300)
MIXED = "mixed"         # a class drawn at random for each fault


def schedule(fault_class: str, seed: int, duration_s: float, combined: float = 0.3,
             fault_s: tuple[float, float] = (4.0, 10.0),
             gap_s: tuple[float, float] = (2.0, 5.0)) -> Schedule:
    """Faults of one class (``mixed``: each of a class drawn at random), one after another
    over ``duration_s``; with probability ``combined`` a fault also has a kill -9 or SIGSTOP
    of its target inside its window."""
    rng = random.Random(seed)
    steps: list[Step] = []
    at = rng.uniform(*gap_s)
    while at + (length := rng.uniform(*fault_s)) <= duration_s:
        drawn = rng.choice(sorted(FAULT_CLASSES)) if fault_class == MIXED else fault_class
        kind, targets, params = FAULT_CLASSES[drawn]
        target = rng.choice(list(targets))
        given = dict(params)
        if kind == "clock_jump":
            given["seconds"] = rng.choice(CLOCK_JUMPS_S)
        steps.append(Step(round(at, 3), round(length, 3), kind, (target,), given))
        if kind not in ("kill", "pause") and target not in (S3, *ZOOKEEPERS, ZK_LEADER) \
                and rng.random() < combined:
            offset = rng.uniform(0, length / 2)
            steps.append(Step(round(at + offset, 3), round(rng.uniform(1.0, length - offset), 3),
                              rng.choice(("kill", "pause")), (target,), {}))
        at += length + rng.uniform(*gap_s)
    return Schedule(seed, sorted(steps, key=lambda step: step.at_s))


class _Resolving:
    """The nemesis, with a fault's role names (``@zk-leader``, ...) made host names when the
    fault starts, and steps' resolutions recorded for the report."""

    def __init__(self, nemesis: Nemesis, cluster: FaultCluster) -> None:
        self._nemesis = nemesis
        self._cluster = cluster
        self.resolved: list[dict[str, Any]] = []

    def _host(self, name: str) -> str:
        if name == ZK_LEADER:
            return self._cluster.zookeeper_leader() or ZOOKEEPERS[0]
        if name == ACTIVE_CONTROLLER:
            return self._cluster.active_controller() or CONTROLLERS[0]
        return name

    def __getattr__(self, kind: str) -> Any:
        method = getattr(self._nemesis, kind)
        if kind not in KINDS:
            return method       # undo, heal

        def start(hosts: Sequence[str], **params: Any) -> Fault:
            targets = tuple(self._host(h) for h in hosts)
            if params.get("peers") and OTHERS in params["peers"]:
                params["peers"] = (*(h for h in HOSTS if h not in targets), CLIENTS)
            elif params.get("peers"):
                params["peers"] = tuple(self._host(h) for h in params["peers"])
            self.resolved.append({"kind": kind, "hosts": list(targets), **params})
            fault: Fault = method(targets, **params)
            return fault
        return start


def run(cluster: FaultCluster, out: Path, fault_class: str, workloads: Sequence[str],
        seed: int, duration_s: float) -> report.RunRecord:
    """Run ``workloads`` under a schedule of ``fault_class`` on ``cluster``; write the report
    into ``out`` and return it (``.valid`` is the verdict of them all)."""
    endpoints = cluster.endpoints()
    chosen = [WORKLOADS[name]() for name in workloads]
    for workload in chosen:
        workload.setup(endpoints)
    history = History()
    plan = schedule(fault_class, seed, duration_s)
    nemesis = _Resolving(cluster.nemesis(history), cluster)
    stop = threading.Event()
    clients = [threading.Thread(target=w.run, args=(endpoints, history, stop, seed),
                                name=f"workload-{w.name}", daemon=True) for w in chosen]
    for thread in clients:
        thread.start()
    runner = ScheduleRunner(nemesis, plan).start()   # type: ignore[arg-type]
    try:
        runner.join(duration_s + 60)
    finally:
        runner.stop()
        history.event(NEMESIS, "heal")
        cluster.heal()
        time.sleep(QUIET_S)
        stop.set()
        for thread in clients:
            thread.join(300)
    verdicts = [w.check(endpoints, history) for w in chosen]
    planned = plan.to_json()["steps"]
    for step, started in zip(planned, nemesis.resolved, strict=False):
        step["applied_to"] = started["hosts"]
    record = report.RunRecord(seed, [fault_class], [w.name for w in chosen], duration_s,
                              planned, verdicts)
    report.write(out, record, history)
    return record


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", action="append", choices=[*sorted(FAULT_CLASSES), MIXED],
                        help="a fault class (repeat for several runs; default: all)")
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS),
                        help="a workload (repeat; default: all at once)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=Path("build/faults"))
    args = parser.parse_args(argv)
    faults = args.fault or sorted(FAULT_CLASSES)
    workloads = args.workload or sorted(WORKLOADS)
    cluster = FaultCluster.start(args.out / "cluster")
    outs = []
    try:
        for fault in faults:
            out = args.out / f"{fault}-seed{args.seed}"
            record = run(cluster, out, fault, workloads, args.seed, args.duration)
            outs.append(out)
            print(f"{fault}: {'valid' if record.valid else 'INVALID'} ({out / 'summary.md'})")
    finally:
        cluster.stop()
    print(report.matrix(outs, faults, workloads))
    return 0 if all(report.read(o)[0]["valid"] for o in outs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
