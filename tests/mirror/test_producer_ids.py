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
from bmq.storage.local import LocalStorage
from tests.cluster.conftest import zk, zookeeper

__all__ = ["zk", "zookeeper"]


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
