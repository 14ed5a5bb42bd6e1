"""Kafka Streams (kafka-streams 4.4) on BMQ: an exactly-once application (exactly_once_v2) with a
repartition topic and a state store changelogged to a compacted topic, run as two instances;
one is killed (-9) mid-stream, the other takes its tasks over; an instance started with an
empty state directory restores the store from the changelog (the app and its checks:
streams.py, src/main/java/bmq/clients/StreamsApp.java)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.cluster.conftest import ClusterFactory, cluster_factory, zookeeper
from tests.conftest import BrokerFactory
from tests.integration.helpers import wait_until
from tests.java.streams import (
    ALL_TASKS,
    IN_MEMORY_STORES,
    PARTITIONS,
    SMALL_SEGMENTS,
    START_TIMEOUT_S,
    STATEFUL_TASKS,
    STREAMS_BROKER_CONFIG,
    STREAMS_BROKER_ENV,
    StreamsInstance,
    StreamsInstances,
    StreamsTopics,
    expected,
)
from tests.proxy.conftest import Proxies, proxies

__all__ = ["cluster_factory", "proxies", "zookeeper"]

# Input written before the instances start, then while one is killed (at 400 a second: the
# kill comes while it is still being written), then after the restart.
BEFORE, DURING, AFTER = 1000, 3000, 300
# A transaction timeout the paused instance's test must not wait for.
LONG_TRANSACTION_TIMEOUT_S = 120


@pytest.fixture
def streams_instances(java_classpath: str, tmp_path: Path,
                      request: pytest.FixtureRequest) -> StreamsInstances:
    """Instances of StreamsApp, killed at the end of the test if still running."""
    instances = StreamsInstances(java_classpath, tmp_path)
    request.addfinalizer(instances.cleanup)
    return instances


def split_between(first: StreamsInstance, second: StreamsInstance) -> None:
    """Until both run and the tasks are split between them, each task once."""
    first.wait_running()
    second.wait_running()
    wait_until(lambda: first.tasks() and second.tasks()
               and sorted(first.tasks() + second.tasks()) == ALL_TASKS, START_TIMEOUT_S,
               message="the tasks split between the two instances")


def two_running(bootstrap: str, instances: StreamsInstances, topics: StreamsTopics,
                settings: Mapping[str, object] | None = None
                ) -> tuple[StreamsInstance, StreamsInstance]:
    """The first input, then two instances splitting the tasks, and their committed output."""
    topics.write(BEFORE)
    first = instances.start(bootstrap, topics, settings)
    second = instances.start(bootstrap, topics, settings)
    split_between(first, second)
    topics.check_output(topics.wait_for_output(60))
    return first, second


def inside_a_transaction(topics: StreamsTopics, first: StreamsInstance,
                         second: StreamsInstance) -> tuple[StreamsInstance, StreamsInstance,
                                                           list[int]]:
    """Once an output partition of an instance with a stateful task has records of its open
    transaction: that instance, the other one, and that instance's output partitions."""
    one = first if set(first.tasks()) & set(STATEFUL_TASKS) else second
    partitions = [int(task[2:]) for task in one.tasks() if task in STATEFUL_TASKS]
    wait_until(lambda: topics.open_transaction_in(partitions), 30, interval=0.05,
               message=f"an open transaction in output partitions {partitions}")
    return one, first if one is second else second, partitions


def kill_and_restore(bootstrap: str, instances: StreamsInstances, topics: StreamsTopics,
                     settings: Mapping[str, object] | None = None,
                     before_restore: Callable[[], object] = lambda: None) -> dict[int, int]:
    """Two instances; one killed -9 inside a transaction while input flows; the other takes
    its tasks over; then a new instance with an empty state directory takes every task from
    it (after ``before_restore``). The committed output and the stores are checked at each
    step; returns what the new instance restored, by changelog partition."""
    first, second = two_running(bootstrap, instances, topics, settings)
    writer = topics.write_in_background(DURING, per_second=400)
    killed, survivor, partitions = inside_a_transaction(topics, first, second)
    before_the_kill = len(survivor.events())
    killed.kill()
    assert writer.is_alive(), "the input was all written before the kill"
    writer.join(60)
    # The survivor takes the killed instance's tasks over (after its session times out),
    # restores their stores from the changelog and goes on from the last committed offsets.
    survivor.wait_running(lambda tasks: tasks == ALL_TASKS)
    topics.check_output(topics.wait_for_output(60))
    assert survivor.query() == expected(topics.written)
    # What the killed instance had committed came back from the changelog (all of it, or
    # what came after the survivor's own checkpoint if it ran those tasks before).
    assert set(partitions) <= set(survivor.restored(before_the_kill)), survivor.events()
    # The killed instance's open transaction had records in its output partitions that
    # read_committed does not show (it was aborted, and redone by the survivor).
    assert len(topics.output_records("read_uncommitted", partitions)) > len(
        topics.output_records(partitions=partitions))

    # A new instance with an empty state directory; once the survivor has left, it runs every
    # task, its stores restored from the changelog: the counts go on from there.
    before_restore()
    restarted = instances.start(bootstrap, topics, settings)
    restarted.wait_running(lambda tasks: True)     # in the group, with tasks or not
    survivor.close()
    restarted.wait_running(lambda tasks: tasks == ALL_TASKS)
    assert restarted.query() == expected(topics.written)
    restored = restarted.restored()
    assert sorted(restored) == list(range(PARTITIONS)) and all(restored.values()), restored
    topics.write(AFTER)
    topics.check_output(topics.wait_for_output(60))
    assert restarted.query() == expected(topics.written)
    topics.check_internal_topics()
    return restored


def test_exactly_once_across_a_kill_9_and_a_restore_from_the_changelog(
        streams_instances: StreamsInstances, broker_factory: BrokerFactory) -> None:
    bootstrap = broker_factory(config=STREAMS_BROKER_CONFIG).bootstrap
    kill_and_restore(bootstrap, streams_instances, StreamsTopics(bootstrap))


@pytest.mark.slow
def test_in_memory_stores_restored_from_a_compacted_changelog(
        streams_instances: StreamsInstances, broker_factory: BrokerFactory) -> None:
    """The same with stores in memory, and internal topics of small segments that BMQ's
    cleaner compacts: the new instance restores fewer records than were written to the
    changelog (the latest of each word's, and the active segments), and the same state."""
    bootstrap = broker_factory(config={**STREAMS_BROKER_CONFIG,
                                       "log.cleaner.backoff.ms": 500}).bootstrap
    topics = StreamsTopics(bootstrap)
    restored = kill_and_restore(bootstrap, streams_instances, topics,
                                {**IN_MEMORY_STORES, **SMALL_SEGMENTS},
                                before_restore=lambda: topics.wait_compacted(60))
    assert sum(restored.values()) < BEFORE + DURING, restored


@pytest.mark.slow
def test_exactly_once_on_a_cluster_through_a_proxy(
        streams_instances: StreamsInstances, cluster_factory: ClusterFactory,
        proxies: Proxies) -> None:
    """The same on three `bmq broker`s, every client (Streams' and the checks') through a
    `bmq proxy`: the internal topics, the groups and the transactions on the cluster."""
    cluster = cluster_factory(brokers=3, env=STREAMS_BROKER_ENV)
    bootstrap = proxies(cluster).bootstrap
    kill_and_restore(bootstrap, streams_instances,
                     StreamsTopics(bootstrap, ready=cluster.wait_writable))


@pytest.mark.slow
def test_exactly_once_across_a_kill_9_of_the_broker(
        streams_instances: StreamsInstances, broker_factory: BrokerFactory) -> None:
    """`bmq serve` killed (-9) while both instances are inside transactions, and restarted:
    its coordinators come back from the log (groups, transactions, producer state); the
    instances carry on, and the committed output is still every update once, in order."""
    broker = broker_factory(config=STREAMS_BROKER_CONFIG)
    topics = StreamsTopics(broker.bootstrap)
    first, second = two_running(broker.bootstrap, streams_instances, topics)
    writer = topics.write_in_background(DURING, per_second=400)
    inside_a_transaction(topics, first, second)
    broker.kill()
    assert writer.is_alive(), "the input was all written before the kill"
    broker.start()
    writer.join(60)
    topics.check_output(topics.wait_for_output(90))
    split_between(first, second)
    assert {**first.query(), **second.query()} == expected(topics.written)


@pytest.mark.slow
def test_a_paused_instance_is_fenced_when_it_wakes(
        streams_instances: StreamsInstances, broker_factory: BrokerFactory) -> None:
    """An instance stopped (SIGSTOP) inside a transaction for longer than its session, then
    woken long before its transaction would time out. It was removed from the group
    meanwhile, and the other instance was given its tasks (their restore waits, as in Kafka,
    for the open transaction to end). Woken, it finds itself fenced (its heartbeat is refused,
    and so would be its offsets, sent with the old generation: KIP-447) and aborts its
    transaction rather than commit it; the other instance goes on: no update twice, and long
    before the transaction timeout."""
    bootstrap = broker_factory(config=STREAMS_BROKER_CONFIG).bootstrap
    topics = StreamsTopics(bootstrap)
    first, second = two_running(bootstrap, streams_instances, topics, {
        "producer.transaction.timeout.ms": LONG_TRANSACTION_TIMEOUT_S * 1000})
    writer = topics.write_in_background(DURING, per_second=400)
    zombie, other, _ = inside_a_transaction(topics, first, second)
    rebalances = other.rebalances()
    zombie.pause()
    paused_at = time.monotonic()
    # The paused instance's session expires: the group rebalances without it.
    wait_until(lambda: other.rebalances() > rebalances, 30, interval=0.2,
               message="the other instance rebalancing without the paused one")
    zombie.resume()
    writer.join(60)
    split_between(first, second)
    topics.check_output(topics.wait_for_output(60))
    assert time.monotonic() - paused_at < LONG_TRANSACTION_TIMEOUT_S / 2
    assert {**first.query(), **second.query()} == expected(topics.written)


def test_the_streams_rebalance_protocol_is_refused_at_once(
        streams_instances: StreamsInstances, broker_factory: BrokerFactory) -> None:
    """``group.protocol=streams`` (KIP-1071) needs StreamsGroupHeartbeat, which BMQ does not
    serve (nor list in ApiVersions): the application fails at once with the client's
    UnsupportedVersionException, as against a Kafka without that protocol, and never hangs."""
    bootstrap = broker_factory(config=STREAMS_BROKER_CONFIG).bootstrap
    topics = StreamsTopics(bootstrap)
    topics.write(10)
    instance = streams_instances.start(bootstrap, topics, {"group.protocol": "streams"})
    error = instance.wait_for_error(30)
    assert "UnsupportedVersionException" in error and "STREAMS group protocol" in error, error


@pytest.mark.slow
def test_exactly_once_across_a_kill_9_of_a_cluster_broker(
        streams_instances: StreamsInstances, cluster_factory: ClusterFactory,
        proxies: Proxies) -> None:
    """Three `bmq broker`s, every client through a proxy: the owner of an output partition
    with an open transaction in it is killed (-9); the others take its partitions (and the
    coordinators on them) over from shared storage; the instances carry on, and the committed
    output is every update once, in order."""
    cluster = cluster_factory(brokers=3, env=STREAMS_BROKER_ENV)
    bootstrap = proxies(cluster).bootstrap
    topics = StreamsTopics(bootstrap, ready=cluster.wait_writable)
    first, second = two_running(bootstrap, streams_instances, topics)
    writer = topics.write_in_background(DURING, per_second=400)
    _, _, partitions = inside_a_transaction(topics, first, second)
    owner = cluster.owners(topics.output)[partitions[0]]
    cluster.brokers[owner].kill()
    assert writer.is_alive(), "the input was all written before the kill"
    writer.join(60)
    topics.check_output(topics.wait_for_output(120))
    split_between(first, second)
    assert {**first.query(), **second.query()} == expected(topics.written)
