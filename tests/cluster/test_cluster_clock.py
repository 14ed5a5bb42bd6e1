"""A cluster broker times scheduled delivery (and share groups) by ZooKeeper's clock, not by
its host's wall clock as it was when the broker started: seen in the fault runs as a broker
restarted during a two-minute clock step, which went on delivering scheduled records early (up
to 1.6 s in that run, everything due within two minutes at once in principle) long after the
step was undone.

The broker runs under a stepped clock (``tests.faults.clock``) two minutes ahead; ZooKeeper, the
clients and the test keep the real clock."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import ClusterFactory
from tests.conftest import make_topic_name
from tests.faults.clock import Clock
from tests.scheduled.helpers import DELIVER_AT, Watcher, confluent_schedule, now_ms

AHEAD_S = 120
DELAY_MS = 3000


def test_a_broker_started_with_its_clock_ahead_delivers_on_time(
        cluster_factory: ClusterFactory, tmp_path: Path) -> None:
    clock = Clock(tmp_path)
    clock.set(AHEAD_S)
    cluster = cluster_factory(brokers=1, env=clock.env())
    topic = make_topic_name("clock")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"bmq.delay.enable": "true"})]
                        )[topic].result(30)
    cluster.wait_writable(topic)
    watcher = Watcher(cluster.bootstrap, topic, 1)
    try:
        due = now_ms() + DELAY_MS
        confluent_schedule(cluster.bootstrap, topic, [
            {"value": b"due", "headers": [(DELIVER_AT, str(due).encode())]}])
        arrived = watcher.wait_for(1, DELAY_MS / 1000 + 30)
        assert [r.value for r in arrived] == [b"due"]
        assert arrived[0].seen_ms >= due, f"delivered {due - arrived[0].seen_ms} ms early"
        assert arrived[0].seen_ms < due + 10_000
    finally:
        watcher.close()
    # What the operator is told.
    assert "off ZooKeeper's" in cluster.logs(100_000)
