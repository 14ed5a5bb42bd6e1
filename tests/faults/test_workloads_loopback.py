"""The queue and list-append workloads on the loopback cluster (tests/cluster/conftest.py: a
ZooKeeper, `bmq controller`, 3 brokers; tests/proxy/conftest.py: `bmq proxy`), under the faults
it has: kill -9 and start again, SIGSTOP and SIGCONT, a clean restart. Each run's history is
written next to the test's files; its verdict must be valid."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import (
    Cluster,
    ClusterFactory,
    SharedStorage,
    cluster_factory,
    zookeeper,
)
from tests.faults.history import History
from tests.faults.list_append import ListAppendWorkload
from tests.faults.queue import QueueWorkload
from tests.faults.workload import Endpoints, Verdict, Workload
from tests.proxy.conftest import Proxies, proxies
from tests.seaweedfs import SeaweedFS

__all__ = ["cluster_factory", "proxies", "zookeeper"]

TXN_ENV: dict[str, Any] = {
    "BMQ_TRANSACTION_STATE_LOG_NUM_PARTITIONS": 6,
    "BMQ_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS": 200,
}

Faults = Callable[[Cluster, History], None]


def _kill_and_start(broker_id: int, down_s: float = 4.0) -> Faults:
    def faults(cluster: Cluster, history: History) -> None:
        broker = cluster.brokers[broker_id]
        history.event("nemesis", "kill", broker_id)
        broker.kill()
        time.sleep(down_s)
        broker.start()
        history.event("nemesis", "start", broker_id)
    return faults


def _freeze(broker_id: int, frozen_s: float = 10.0) -> Faults:
    def faults(cluster: Cluster, history: History) -> None:
        broker = cluster.brokers[broker_id]
        history.event("nemesis", "pause", broker_id)
        broker.pause()
        try:
            time.sleep(frozen_s)
        finally:
            broker.resume()
            history.event("nemesis", "resume", broker_id)
    return faults


def _restart(broker_id: int) -> Faults:
    def faults(cluster: Cluster, history: History) -> None:
        history.event("nemesis", "restart", broker_id)
        cluster.brokers[broker_id].restart()
        history.event("nemesis", "started", broker_id)
    return faults


def _schedule(*steps: Faults, gap_s: float = 4.0) -> Faults:
    """Each fault in turn, ``gap_s`` of calm before each."""
    def faults(cluster: Cluster, history: History) -> None:
        for step in steps:
            time.sleep(gap_s)
            step(cluster, history)
        time.sleep(gap_s)
    return faults


def run_workloads(workloads: list[Workload], cluster_factory: ClusterFactory,
                  proxies: Proxies | None, faults: Faults, out: Path, seed: int = 1,
                  env: dict[str, Any] | None = None,
                  storage: SharedStorage | None = None) -> list[Verdict]:
    """Run ``workloads`` together, recording into one history, on a fresh cluster (with a
    proxy unless ``proxies`` is None; on a shared directory unless ``storage`` says otherwise)
    while ``faults`` run, then check each; the history and the verdicts go to ``out``."""
    cluster = cluster_factory(brokers=3, env=env, storage=storage)
    proxy = proxies(cluster).bootstrap if proxies is not None else None
    endpoints = Endpoints(bootstrap=cluster.bootstrap, proxy=proxy,
                          admin=proxy or cluster.bootstrap)
    for workload in workloads:
        workload.setup(endpoints)
    history, stop = History(), threading.Event()
    clients = [threading.Thread(target=w.run, args=(endpoints, history, stop, seed))
               for w in workloads]
    for thread in clients:
        thread.start()
    try:
        faults(cluster, history)
    finally:
        stop.set()
        for thread in clients:
            thread.join(180)
    assert not any(t.is_alive() for t in clients), "the workloads' clients did not stop"
    verdicts = [w.check(endpoints, history) for w in workloads]
    out.mkdir(parents=True, exist_ok=True)
    history.write_jsonl(out / "history.jsonl")
    (out / "verdicts.json").write_text(json.dumps([asdict(v) for v in verdicts], indent=1,
                                                  default=str))
    for verdict in verdicts:
        print(f"{verdict.workload}: valid={verdict.valid} stats={verdict.stats} "
              f"(history in {out})")
    return verdicts


def test_queue_workload_through_a_kill_9(cluster_factory: ClusterFactory, proxies: Proxies,
                                         tmp_path: Path) -> None:
    [verdict] = run_workloads([QueueWorkload(rate=50)], cluster_factory, proxies,
                              _schedule(_kill_and_start(2, down_s=2), gap_s=2), tmp_path)
    assert verdict.valid, verdict
    # Who wrote each record, read with BMQ's client: every record, one batch header each.
    assert verdict.stats["records-with-producer-id"] == verdict.stats["final-read-records"] > 0


SCHEDULES = {
    "kill-9": _schedule(_kill_and_start(2), _kill_and_start(3)),
    "sigstop": _schedule(_freeze(2), _freeze(1)),
    "mixed": _schedule(_freeze(3, 6), _kill_and_start(1), _restart(2)),
}


@pytest.mark.slow
@pytest.mark.parametrize("faults", list(SCHEDULES))
def test_queue_workload_under_faults(cluster_factory: ClusterFactory, proxies: Proxies,
                                     tmp_path: Path, faults: str) -> None:
    [verdict] = run_workloads([QueueWorkload()], cluster_factory, proxies, SCHEDULES[faults],
                              tmp_path)
    assert verdict.valid, verdict


@pytest.mark.slow
@pytest.mark.parametrize("faults", ["none", *SCHEDULES])
def test_list_append_workload_under_faults(cluster_factory: ClusterFactory, proxies: Proxies,
                                           tmp_path: Path, faults: str) -> None:
    schedule = SCHEDULES[faults] if faults in SCHEDULES else _schedule(gap_s=20)
    [verdict] = run_workloads([ListAppendWorkload()], cluster_factory, proxies, schedule,
                              tmp_path, env=TXN_ENV)
    assert verdict.valid, verdict


@pytest.mark.slow
def test_both_workloads_recording_into_one_history(cluster_factory: ClusterFactory,
                                                   proxies: Proxies, tmp_path: Path) -> None:
    """As tests/faults/run.py runs them: each checker judges its own operations only."""
    verdicts = run_workloads([QueueWorkload(), ListAppendWorkload()], cluster_factory,
                             proxies, SCHEDULES["mixed"], tmp_path, env=TXN_ENV)
    assert all(v.valid for v in verdicts), verdicts


@pytest.mark.slow
@pytest.mark.parametrize("workload", [QueueWorkload, ListAppendWorkload])
def test_workloads_without_a_proxy(cluster_factory: ClusterFactory, tmp_path: Path,
                                   workload: Callable[[], Workload]) -> None:
    """Clients straight on the brokers (each waits for its own request timeout when the
    broker it talks to is frozen, as with Kafka)."""
    [verdict] = run_workloads([workload()], cluster_factory, None, SCHEDULES["mixed"],
                              tmp_path, env=TXN_ENV)
    assert verdict.valid, verdict


@pytest.mark.slow
@pytest.mark.parametrize("workload", [QueueWorkload, ListAppendWorkload])
def test_workloads_on_s3(cluster_factory: ClusterFactory, proxies: Proxies,
                         seaweedfs: SeaweedFS, tmp_path: Path,
                         workload: Callable[[], Workload]) -> None:
    """The partitions on S3 (the session's SeaweedFS) instead of a shared directory."""
    storage = SharedStorage(seaweedfs.url(f"faults-{time.time_ns()}"),
                            seaweedfs.storage_options())
    [verdict] = run_workloads([workload()], cluster_factory, proxies, SCHEDULES["mixed"],
                              tmp_path, env=TXN_ENV, storage=storage)
    assert verdict.valid, verdict
