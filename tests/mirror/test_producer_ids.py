"""A target cluster hands out none of the producer ids of the batches mirrored into it
(``ProducerIdAllocator.avoid``), durably: a producer of the target after a promotion would
otherwise take over a source producer's state in the mirrored partitions."""

from __future__ import annotations

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


def check_avoid(new: Callable[[], ProducerIdAllocator]) -> None:
    """``new``: another allocator of one cluster (blocks of 1,000 ids)."""
    first, second = new(), new()
    assert first.allocate() == 0            # first has [0, 1000)
    first.avoid(5)                          # within its block: skipped there
    assert first.allocate() == 6
    second.avoid(2_500)                     # past every block: its block starts after it
    assert second.allocate() == 2_501
    assert first.allocate() == 7            # (a block reserved before is its own)
    later = new()
    assert later.allocate() == 3_501        # no later block holds an avoided id
    later.avoid(10)                         # below what it hands out: nothing changes
    assert later.allocate() == 3_502
    assert not later.may_hand_out(3_000) and later.may_hand_out(4_000)


def test_a_local_allocator_avoids_ids_durably(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    check_avoid(lambda: LocalProducerIdAllocator(storage, 1_000))


@pytest.mark.slow
def test_a_zookeeper_allocator_avoids_ids_durably(zk: tuple[KazooClient, Paths]) -> None:
    client, paths = zk
    check_avoid(lambda: ZkProducerIdAllocator(client, paths, 1_000))
