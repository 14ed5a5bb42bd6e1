"""Fixtures of the fault tests: ``network_factory`` (hosts in network namespaces, removed when
the test ends) and ``fault_cluster`` (a ``FaultCluster`` on its own hosts, stopped when the
module's tests end). Both need root, as CI and the development machines have."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import pytest

from tests.faults.cluster import FaultCluster
from tests.faults.hosts import Network


class NetworkFactory:
    def __init__(self) -> None:
        self.networks: list[Network] = []

    def __call__(self, names: Iterable[str]) -> Network:
        network = Network(names)
        self.networks.append(network)
        return network

    def close(self) -> None:
        for network in self.networks:
            network.close()


@pytest.fixture
def network_factory() -> Iterator[NetworkFactory]:
    assert os.geteuid() == 0, "the fault tests make network namespaces: they need root"
    factory = NetworkFactory()
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture(scope="module")
def fault_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultCluster]:
    assert os.geteuid() == 0, "the fault tests make network namespaces: they need root"
    cluster = FaultCluster.start(tmp_path_factory.mktemp("faults"))
    try:
        yield cluster
    finally:
        cluster.stop()
