"""The share group and scheduled delivery workloads on the loopback cluster of the cluster
tests (a ZooKeeper, `bmq controller`, three `bmq broker`s and a `bmq proxy` on 127.0.0.1),
under kill -9 and SIGSTOP of brokers: every checker's verdict must be valid. The network
faults themselves run on the namespaced cluster (tests/faults/cluster.py); these runs show the
workloads need nothing but the endpoints."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import pytest

from tests.cluster.conftest import Cluster, ClusterFactory, cluster_factory, zookeeper
from tests.conftest import BrokerFactory
from tests.faults.clock import Clock
from tests.faults.history import History
from tests.faults.scheduled import ScheduledWorkload
from tests.faults.share_queue import ShareWorkload
from tests.faults.workload import Endpoints, Verdict, Workload
from tests.proxy.conftest import Proxies, proxies
from tests.share.helpers import SHARE_ENV

__all__ = ["cluster_factory", "proxies", "zookeeper"]

pytestmark = pytest.mark.timeout(600)


def summary(verdict: Verdict) -> str:
    """Each anomaly's count and first examples, and the stats."""
    found = {kind: {"count": len(examples), "first": examples[:3]}
             for kind, examples in verdict.anomalies.items()}
    return f"{verdict.workload}: {json.dumps(found, default=str)} {verdict.stats}"


def kill_and_freeze(cluster: Cluster, history: History, stop: threading.Event,
                    seed: int, period_s: float) -> None:
    """Every ``period_s``, a random broker is killed (kill -9, restarted 2 s later) or, the
    next time, frozen (SIGSTOP for 4 s, longer than the cluster's 2 s session timeout); each
    fault is undone before the next, and before this returns."""
    rng = random.Random(seed)
    kill = rng.random() < 0.5
    while not stop.wait(period_s):
        broker = cluster.brokers[rng.choice(sorted(cluster.brokers))]
        kill = not kill
        if kill:
            history.event("nemesis", "kill", broker.broker_id)
            broker.kill()
            time.sleep(2.0)
            broker.start()
            history.event("nemesis", "start", broker.broker_id)
        else:
            history.event("nemesis", "pause", broker.broker_id)
            broker.pause()
            time.sleep(4.0)
            broker.resume()
            history.event("nemesis", "resume", broker.broker_id)


def run_under_faults(cluster_factory: ClusterFactory, proxies: Proxies, tmp_path: Path,
                     workloads: list[Workload], seconds: float, seed: int,
                     period_s: float) -> list[Verdict]:
    cluster = cluster_factory(brokers=3, env=SHARE_ENV)
    proxy = proxies(cluster)
    endpoints = Endpoints(cluster.bootstrap, proxy.bootstrap, cluster.bootstrap)
    for workload in workloads:
        workload.setup(endpoints)
    history = History()
    stop = threading.Event()
    threads = [threading.Thread(target=w.run, args=(endpoints, history, stop, seed))
               for w in workloads]
    threads.append(threading.Thread(target=kill_and_freeze,
                                    args=(cluster, history, stop, seed, period_s)))
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    verdicts = [w.check(endpoints, history) for w in workloads]
    history.write_jsonl(tmp_path / "history.jsonl")
    (tmp_path / "verdicts.json").write_text(json.dumps([v.__dict__ for v in verdicts],
                                                       default=str, indent=1))
    for verdict in verdicts:
        assert verdict.valid, f"{summary(verdict)} (history in {tmp_path})\n{cluster.logs()}"
    return verdicts


def test_share_and_scheduled_under_kill_and_freeze(cluster_factory: ClusterFactory,
                                                   proxies: Proxies, tmp_path: Path) -> None:
    """Both workloads at once for 15 s: a broker killed, another frozen (seeded)."""
    share, scheduled = run_under_faults(
        cluster_factory, proxies, tmp_path,
        [ShareWorkload(rate=50.0), ScheduledWorkload(rate=30.0)], 15.0, seed=3, period_s=3.0)
    assert share.stats["dead-letters"] > 0 and share.stats["redeliveries"] > 0, share.stats
    assert scheduled.stats["sent"] > 100, scheduled.stats


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_share_groups_under_kill_and_freeze(cluster_factory: ClusterFactory,
                                            proxies: Proxies, tmp_path: Path,
                                            seed: int) -> None:
    run_under_faults(cluster_factory, proxies, tmp_path, [ShareWorkload()], 30.0, seed, 5.0)


@pytest.mark.slow
@pytest.mark.parametrize("workload", [ScheduledWorkload, ShareWorkload])
def test_across_clock_jumps(broker_factory: BrokerFactory, tmp_path: Path,
                            workload: type[ScheduledWorkload | ShareWorkload]) -> None:
    """The broker's wall clock jumps 5 minutes forward for 6 s, then back (``Clock``; the
    monotonic clock is left alone). Before the timers took their time from the monotonic
    clock, every scheduled record due within those 5 minutes was delivered at once (1-5 s
    early here), and records sent after the jump back were held for minutes. Share groups
    time their locks by the wall clock: the jump expires every lock, which Kafka's
    at-least-once delivery allows."""
    clock = Clock(tmp_path)
    broker = broker_factory(env={**SHARE_ENV, **clock.env()})
    endpoints = Endpoints(broker.bootstrap, None, broker.bootstrap)
    clients = workload()
    clients.setup(endpoints)
    history, stop = History(), threading.Event()
    running = threading.Thread(target=clients.run, args=(endpoints, history, stop, 1))
    running.start()
    for seconds, step in [(6.0, 300), (6.0, 0), (6.0, None)]:
        time.sleep(seconds)
        if step is not None:
            clock.set(step)
            history.event("nemesis", "clock", f"{step:+d}")
    stop.set()
    running.join()
    verdict = clients.check(endpoints, history)
    history.write_jsonl(tmp_path / "history.jsonl")
    assert verdict.valid, f"{summary(verdict)} (history in {tmp_path})"


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_scheduled_delivery_under_kill_and_freeze(cluster_factory: ClusterFactory,
                                                  proxies: Proxies, tmp_path: Path,
                                                  seed: int) -> None:
    run_under_faults(cluster_factory, proxies, tmp_path, [ScheduledWorkload()], 30.0, seed,
                     5.0)
