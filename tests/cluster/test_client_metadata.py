"""bmq.client.metadata's MetadataCache against a 2-broker cluster: it knows what
confluent-kafka's AdminClient lists, and when a partition moves (its broker stopped), the
produce the old leader cannot take is answered NOT_LEADER_OR_FOLLOWER, the cache looks again on
its own, and the retry lands on the new leader."""

from __future__ import annotations

import asyncio

from bmq.client.metadata import MetadataCache, bootstrap_addresses
from bmq.net.client import LinkPool
from bmq.protocol.errors import ErrorCode
from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_cluster import create_topic, owned_by
from tests.conftest import make_topic_name
from tests.unit.test_client_metadata import assert_matches_admin, produce, read_back

PARTITIONS = 4


def test_a_moved_partition_refreshes_the_cache_and_the_retry_lands(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2)
    topic = make_topic_name("moved")
    create_topic(cluster, topic, PARTITIONS)
    moving = owned_by(cluster, topic, 1)
    assert moving and len(moving) < PARTITIONS
    values = {p: f"before-{p}".encode() for p in range(PARTITIONS)}

    async def run() -> None:
        links = LinkPool("test-metadata")
        cache = MetadataCache(bootstrap_addresses(cluster.bootstrap), links)
        try:
            await cache.refresh()
            assert_matches_admin(cache, cluster.bootstrap, topic)
            assert await produce(cache, links, topic, values) == \
                {p: (ErrorCode.NONE, 0) for p in range(PARTITIONS)}
            cluster.brokers[1].kill()
            cluster.wait_writable(topic, owners={2})
            new_leader = cache.brokers[2]
            answers = await produce(cache, links, topic, {p: b"lost" for p in moving})
            assert answers == {p: (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1) for p in moving}
            deadline = asyncio.get_running_loop().time() + 10
            while any(cache.owner(topic, p) != new_leader for p in moving):
                assert asyncio.get_running_loop().time() < deadline, "the cache never looked"
                await asyncio.sleep(0.05)
            assert await produce(cache, links, topic, {p: f"after-{p}".encode()
                                                       for p in moving}) == \
                {p: (ErrorCode.NONE, 1) for p in moving}
            # Compared after a look of its own: the one it took when refused may have come
            # from broker 2 between its reads of the new assignment and of the brokers (two
            # ZooKeeper watches), listing the killed broker still (seen: 2 of 5 runs).
            await cache.refresh()
            assert_matches_admin(cache, cluster.bootstrap, topic)
        finally:
            cache.close()
            links.close()

    asyncio.run(run())
    expected = {(p, 0): value for p, value in values.items()}
    expected.update({(p, 1): f"after-{p}".encode() for p in moving})
    assert read_back(cluster.bootstrap, topic, PARTITIONS, len(expected)) == expected
