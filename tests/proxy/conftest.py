"""Proxies on real clusters: `bmq proxy` processes next to the brokers of ``cluster_factory``
(tests/cluster/conftest.py), on the same ZooKeeper and shared storage."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import (
    Cluster,
    ClusterFactory,
    cluster_factory,
    shared_storage,
    zookeeper,
)
from tests.conftest import BrokerProcess, bmq_command, free_port
from tests.metrics import scrape

__all__ = ["cluster_factory", "shared_storage", "zookeeper"]


class ProxyProcess(BrokerProcess):
    """`bmq proxy` on a cluster's ZooKeeper and storage, with a metrics port."""

    def __init__(self, workdir: Path, cluster: Cluster, extra: list[str] | None = None) -> None:
        super().__init__(workdir, env={**cluster.env, "BMQ_ZOOKEEPER_ROOT": cluster.root})
        self.cluster = cluster
        self.metrics_port = free_port()
        self.extra_args = list(extra or [])

    def command(self) -> list[str]:
        cmd = [*bmq_command(), "proxy", "--zookeeper", self.cluster.zk_server.hosts,
               "--storage", self.cluster.storage, "--listen", self.bootstrap,
               "--metrics-port", str(self.metrics_port)]
        for key, value in self.cluster.storage_options.items():
            cmd += ["--storage-option", f"{key}={value}"]
        return cmd + self.extra_args

    def metric(self, name: str, **labels: str) -> float:
        """The current value of one sample of this proxy's /metrics (0 if absent)."""
        return scrape.value(scrape.scrape(self.metrics_port), name, **labels)


class Proxies:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.started: list[ProxyProcess] = []

    def __call__(self, cluster: Cluster, extra: list[str] | None = None) -> ProxyProcess:
        proxy = ProxyProcess(self.base / f"proxy{len(self.started)}", cluster, extra)
        self.started.append(proxy)
        proxy.start()
        return proxy


@pytest.fixture
def proxies(tmp_path_factory: pytest.TempPathFactory,
            cluster_factory: ClusterFactory) -> Iterator[Proxies]:
    factory = Proxies(tmp_path_factory.mktemp("proxies"))
    try:
        yield factory
    finally:
        for proxy in factory.started:
            proxy.cleanup()


def producer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 60000, **extra}
