"""Kafka Connect on BMQ, the slow set: two distributed workers sharing their group, one of them
killed (kill -9); a worker across a kill -9 and restart of `bmq serve`; a worker on a cluster of
brokers, directly or through a proxy, and across a kill -9 of a broker."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.cluster.conftest import ClusterFactory, cluster_factory, zookeeper
from tests.conftest import BrokerProcess
from tests.kafka_connect.connectors import (
    FileCopy,
    append_lines,
    numbered_lines,
    status,
    topic_lines,
    wait_for_line,
    wait_running,
)
from tests.kafka_connect.scenarios import copy_a_file_across_a_worker_restart
from tests.kafka_connect.worker import (
    STOPPED_BY_SIGTERM,
    TAKEOVER_SETTINGS,
    TAKEOVER_TIMEOUT_S,
    ConnectWorkers,
    WorkerSettings,
)
from tests.proxy.conftest import Proxies, proxies

__all__ = ["cluster_factory", "proxies", "zookeeper"]


@pytest.mark.slow
def test_the_other_worker_takes_the_tasks_of_a_killed_one_over(
        connect_broker: BrokerProcess, connect_workers: ConnectWorkers, tmp_path: Path) -> None:
    bootstrap = connect_broker.bootstrap
    settings = WorkerSettings.fresh("connect", TAKEOVER_SETTINGS)
    first = connect_workers.start(bootstrap, settings)
    second = connect_workers.start(bootstrap, settings)
    by_id = {worker.worker_id: worker for worker in (first, second)}

    copy = FileCopy.in_directory(bootstrap, tmp_path)
    before = numbered_lines(1, 30)
    copy.start(first.rest, before, sink_rest=second.rest)    # one of them forwards to the leader
    running = {name: wait_running(first.rest, name) for name in ("file-source", "file-sink")}
    # Both workers report the same: the status topic they share.
    assert {name: status(second.rest, name) for name in running} == running

    # Kill the worker with the sink's task (the one that writes the file), and with the
    # source's too if it has both: nothing is committed or left behind.
    tasks = Counter(found["tasks"][0]["worker_id"] for found in running.values())
    sink_worker = running["file-sink"]["tasks"][0]["worker_id"]
    victim = by_id[max(tasks, key=lambda worker_id: (tasks[worker_id],
                                                     worker_id == sink_worker))]
    survivor = second if victim is first else first
    victim.kill()
    after = numbered_lines(31, 60)
    append_lines(copy.source_file, after)

    # The survivor runs every connector and task, and the sink gets every line: none lost.
    # Connect's sink is at-least-once: the lines whose offsets the killed worker had not
    # committed yet (offset.flush.interval.ms) may come again, before the new ones.
    copied = wait_for_line(copy.sink_file, after[-1], timeout=TAKEOVER_TIMEOUT_S)
    for name in ("file-source", "file-sink"):
        wait_running(survivor.rest, name, on=survivor.worker_id)
    check_every_line_at_least_once(copied, before, after, "sink file")
    check_every_line_at_least_once(topic_lines(bootstrap, copy.topic), before, after, "topic")
    print(f"again after the kill: {len(copied) - len(before + after)} lines in the sink file, "
          f"{len(topic_lines(bootstrap, copy.topic)) - len(before + after)} records in the topic")
    assert survivor.stop() == STOPPED_BY_SIGTERM, survivor.log_tail()


def check_every_line_at_least_once(lines: list[str], before: list[str], after: list[str],
                                   where: str) -> None:
    """Every line of ``before`` (written before the kill) at least once, every line of
    ``after`` exactly once and in order at the end, nothing else."""
    counts = Counter(lines)
    lost = [line for line in before + after if counts[line] == 0]
    assert not lost, f"{where}: lost {lost}"
    assert set(counts) == set(before + after), f"{where}: {set(counts) - set(before + after)}"
    assert all(counts[line] == 1 for line in after), f"{where}: {counts}"
    assert lines[-len(after):] == after, where


@pytest.mark.slow
@pytest.mark.parametrize("through", ["brokers", "proxy"])
def test_a_worker_on_a_cluster(
        through: str, kafka_jars: None, cluster_factory: ClusterFactory, proxies: Proxies,
        connect_workers: ConnectWorkers, tmp_path: Path) -> None:
    """Bootstrapped from the brokers (each client then talks to the owner of each partition
    and group) or from a proxy (every request through it)."""
    cluster = cluster_factory(brokers=3)
    bootstrap = cluster.bootstrap if through == "brokers" else proxies(cluster).bootstrap
    copy_a_file_across_a_worker_restart(bootstrap, connect_workers, tmp_path)


@pytest.mark.slow
def test_a_worker_through_a_proxy_across_a_kill_of_the_broker_owning_its_topic(
        kafka_jars: None, cluster_factory: ClusterFactory, proxies: Proxies,
        connect_workers: ConnectWorkers, tmp_path: Path) -> None:
    cluster = cluster_factory(brokers=3)
    proxy = proxies(cluster)
    worker = connect_workers.start(proxy.bootstrap, WorkerSettings.fresh("connect"))
    copy = FileCopy.in_directory(proxy.bootstrap, tmp_path)
    before = numbered_lines(1, 30)
    copy.start(worker.rest, before)

    # The broker the source's producer writes to and the sink's consumer reads from: another
    # takes the partition over; the producer retries, the consumer goes on where it was.
    (owner,) = cluster.owners(copy.topic).values()
    cluster.brokers[owner].kill()
    after = numbered_lines(31, 60)
    append_lines(copy.source_file, after)
    copied = wait_for_line(copy.sink_file, after[-1], timeout=TAKEOVER_TIMEOUT_S)
    assert copied == before + after
    assert topic_lines(proxy.bootstrap, copy.topic) == before + after
    assert owner not in cluster.owners(copy.topic).values()
    for name in ("file-source", "file-sink"):
        wait_running(worker.rest, name)


@pytest.mark.slow
def test_a_worker_across_a_kill_and_restart_of_bmq_serve(
        connect_broker: BrokerProcess, connect_workers: ConnectWorkers, tmp_path: Path) -> None:
    """The broker back well within the worker's session timeout: the worker keeps its
    membership and its tasks, its clients reconnect, its producer's retries are not written
    twice. (Kafka 4.4, slower back, had the worker's tasks restarted: the source's lines since
    its last offset flush came twice, as at-least-once allows.)"""
    bootstrap = connect_broker.bootstrap
    worker = connect_workers.start(bootstrap, WorkerSettings.fresh("connect"))
    copy = FileCopy.in_directory(bootstrap, tmp_path)
    before = numbered_lines(1, 30)
    copy.start(worker.rest, before)

    connect_broker.kill()
    connect_broker.start()
    after = numbered_lines(31, 60)
    append_lines(copy.source_file, after)
    assert wait_for_line(copy.sink_file, after[-1]) == before + after
    assert topic_lines(bootstrap, copy.topic) == before + after
    for name in ("file-source", "file-sink"):
        wait_running(worker.rest, name, on=worker.worker_id)
    assert worker.stop() == STOPPED_BY_SIGTERM, worker.log_tail()
