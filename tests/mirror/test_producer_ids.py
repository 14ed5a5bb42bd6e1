"""A target cluster hands out none of the producer ids of the batches mirrored into it
(``ProducerIdAllocator.avoid``), durably: a producer of the target after a promotion would
otherwise take over a source producer's state in the mirrored partitions."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from bmq.metadata.local import LocalProducerIdAllocator
from bmq.metadata.producer_ids import ProducerIdAllocator
from bmq.metadata.zookeeper.layout import Paths
from bmq.metadata.zookeeper.producer_ids import ZkProducerIdAllocator
from bmq.protocol.messages import InitProducerIdRequest
from bmq.storage.local import LocalStorage
from tests.cluster.conftest import ClusterFactory, cluster_factory, zk, zookeeper
from tests.conftest import BrokerFactory, make_topic_name
from tests.mirror.conftest import MirrorFactory, wait_until
from tests.mirror.helpers import ask, create, mirrored, produce, producer_ids

__all__ = ["cluster_factory", "zk", "zookeeper"]


def check_avoid(new: Callable[[], ProducerIdAllocator], followed: bool) -> None:
    """``new``: another allocator of one cluster (blocks of 1,000 ids); ``followed``: each
    follows the ids the others avoid (ZooKeeper: brokers; `bmq serve` has one allocator)."""
    first, second = new(), new()
    assert first.allocate() == 0            # first has [0, 1000)
    first.avoid(5)                          # within its block: skipped there
    assert first.allocate() == 6
    second.avoid(2_500)                     # past every block: its block starts after it
    assert second.allocate() == 2_501
    if followed:    # first's block was reserved before: it is given up, up to 2,500
        deadline = time.monotonic() + 10
        while first.may_hand_out(2_500):
            assert time.monotonic() < deadline, "first never heard of the avoided ids"
            time.sleep(0.01)
        assert first.allocate() == 3_501
    else:
        assert first.allocate() == 7
    later = new()
    after = 4_501 if followed else 3_501
    assert later.allocate() == after        # no later block holds an avoided id
    later.avoid(10)                         # below what it hands out: nothing changes
    assert later.allocate() == after + 1
    assert not later.may_hand_out(2_500) and later.may_hand_out(5_000)


def test_a_local_allocator_avoids_ids_durably(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    check_avoid(lambda: LocalProducerIdAllocator(storage, 1_000), followed=False)


@pytest.mark.slow
def test_a_zookeeper_allocator_avoids_ids_durably(zk: tuple[KazooClient, Paths]) -> None:
    client, paths = zk
    check_avoid(lambda: ZkProducerIdAllocator(client, paths, 1_000), followed=True)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_broker_that_does_not_own_a_mirrored_partition_avoids_its_ids_too(
        broker_factory: BrokerFactory, cluster_factory: ClusterFactory,
        mirror_factory: MirrorFactory) -> None:
    """A target cluster of two brokers: the one that does not own the mirrored partition
    reserved its block of ids (from 0) before mirroring began; once the owner appended
    batches of the source's producers 0-2, it hands out none of them."""
    source = broker_factory()
    target = cluster_factory(brokers=2, env={"BMQ_AUTO_CREATE_TOPICS_ENABLE": "false"})
    topic = make_topic_name("m-pids")
    create(source.bootstrap, topic, 1)
    for start in range(0, 30, 10):      # three idempotent producers: ids 0, 1, 2
        produce(source.bootstrap, topic, 10, 1, start=start)
    assert sorted(set(producer_ids(source.bootstrap, topic, 0))) == [0, 1, 2]
    # The mirror's topic, made before it runs (no authorizer: any client may), to know
    # which broker owns it before the other reserves its block.
    create(target.bootstrap, topic, 1, **{"bmq.mirror.source": "east",
                                           "message.timestamp.type": "CreateTime"})
    target.wait_writable(topic)
    owner = target.owners(topic)[0]
    other = next(b for b in target.brokers.values() if b.broker_id != owner)

    def init_producer_id() -> int:
        answer = ask(other.bootstrap, InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=-1, producer_id=-1,
            producer_epoch=-1), 4)
        assert answer.error_code == 0
        return int(answer.producer_id)

    assert init_producer_id() == 0          # the other broker's block: [0, 1000)
    mirror = mirror_factory(source, target, "--topic", topic)
    wait_until(lambda: mirrored(source.bootstrap, target.bootstrap, topic, 1), 60,
               "mirrored", mirror.log_text)
    assert sorted(set(producer_ids(target.brokers[owner].bootstrap, topic, 0))) == [0, 1, 2]
    assert init_producer_id() > 2
