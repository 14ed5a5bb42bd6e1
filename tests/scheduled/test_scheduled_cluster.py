"""Scheduled delivery in cluster mode on S3 (the session's SeaweedFS) and HDFS: the owner of
partitions with records pending is killed (kill -9); the new owners resume its timer logs with
their leader epoch and deliver every record once, not before its time."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import (
    ClusterFactory,
    SharedStorage,
    cluster_factory,
    shared_storage,
    zookeeper,
)
from tests.scheduled.helpers import (
    DELIVER_AT,
    confluent_schedule,
    delivered_early,
    now_ms,
    settled_arrivals,
)

__all__ = ["cluster_factory", "shared_storage", "zookeeper"]

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 3


@pytest.mark.parametrize("shared_storage", ["s3", "hdfs"], indirect=True)
def test_new_owner_delivers_after_kill_9(cluster_factory: ClusterFactory,
                                         shared_storage: SharedStorage) -> None:
    cluster = cluster_factory(brokers=3, storage=shared_storage)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("later", PARTITIONS, 1, config={
        "bmq.delay.enable": "true"})])["later"].result(30)
    cluster.wait_writable("later")
    base = now_ms()
    records = [{"value": f"r{i}".encode(), "partition": i % PARTITIONS,
                "headers": [(DELIVER_AT, str(base + 4000 + 10 * i).encode())]}
               for i in range(150)]          # due 4 to 5.5 s from now
    confluent_schedule(cluster.bootstrap, "later", records, enable_idempotence=True,
                       retry_backoff_max_ms=200)
    victim = cluster.owners("later")[0]
    moved = {p for p, owner in cluster.owners("later").items() if owner == victim}
    cluster.brokers[victim].kill()
    survivors = {b for b in cluster.brokers if b != victim}
    cluster.wait_writable("later", owners=survivors)
    arrived = settled_arrivals(cluster.bootstrap, "later", PARTITIONS, len(records))
    values = sorted(r.value for r in arrived)
    assert values == sorted(r["value"] for r in records), \
        f"{len(values)} arrived, {len(set(values))} distinct\n{cluster.logs()}"
    assert {r.partition for r in arrived} >= moved
    assert not delivered_early(arrived), delivered_early(arrived)
