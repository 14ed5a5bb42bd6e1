"""Two listeners on every node of a cluster (as docker-compose.yml runs it: one for the container
network, one for the host): a client is told every node's address on the listener it connected
on, whether it asked a broker or a proxy, and FindCoordinator through a proxy names the
coordinator's address on that listener too (the broker that answers names it for the proxy's own
listener)."""

from __future__ import annotations

import asyncio

from confluent_kafka.admin import AdminClient

from bmq.net.client import BrokerLink
from bmq.protocol.messages import FindCoordinatorRequest
from tests.cluster.conftest import ClusterFactory
from tests.conftest import BrokerProcess, free_port
from tests.integration.helpers import round_trip_in_a_group
from tests.proxy.conftest import Proxies, ProxyProcess


def _listen_twice(node: BrokerProcess) -> int:
    """Gives ``node`` an INTERNAL listener on its port (advertised as localhost) and an EXTERNAL
    one (advertised as 127.0.0.1); returns the EXTERNAL port."""
    external = free_port()
    node.env.update(
        BMQ_LISTENERS=f"INTERNAL://127.0.0.1:{node.port},EXTERNAL://127.0.0.1:{external}",
        BMQ_ADVERTISED_LISTENERS=f"INTERNAL://localhost:{node.port},"
                                 f"EXTERNAL://127.0.0.1:{external}")
    return external


def test_clients_are_told_the_addresses_of_their_listener(cluster_factory: ClusterFactory,
                                                          proxies: Proxies) -> None:
    cluster = cluster_factory(brokers=0, env={"BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"})
    external: dict[int, int] = {}
    internal: dict[int, int] = {}
    for broker_id in (1, 2):
        broker = cluster.add_broker(broker_id, start=False)
        external[broker_id], internal[broker_id] = _listen_twice(broker), broker.port
        broker.start()
    proxy = ProxyProcess(proxies.base / "proxy-listeners", cluster)
    proxy_external = _listen_twice(proxy)
    proxies.started.append(proxy)
    proxy.start()

    via_proxy = f"127.0.0.1:{proxy_external}"
    admin = AdminClient({"bootstrap.servers": via_proxy})
    nodes = admin.list_topics(timeout=20).brokers
    assert {(n.host, n.port) for n in nodes.values()} == {
        ("127.0.0.1", port) for port in [*external.values(), proxy_external]}
    inside = AdminClient({"bootstrap.servers": f"127.0.0.1:{proxy.port}"})
    assert {(n.host, n.port) for n in inside.list_topics(timeout=20).brokers.values()} == {
        ("localhost", port) for port in [*internal.values(), proxy.port]}

    group = round_trip_in_a_group(via_proxy, 20)
    # librdkafka names coordinators by node id from Metadata: ask the wire what the proxy says.
    for port, expected in ((proxy_external, {("127.0.0.1", p) for p in external.values()}),
                           (proxy.port, {("localhost", p) for p in internal.values()})):
        for version in (3, 4):
            assert _find_coordinator(port, group, version) in expected


def _find_coordinator(port: int, group: str, version: int) -> tuple[str, int]:
    async def ask() -> tuple[str, int]:
        link = BrokerLink("127.0.0.1", port, "test")
        try:
            request = (FindCoordinatorRequest(key=group, key_type=0) if version < 4 else
                       FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))
            response = await link.request(request, version)
        finally:
            link.close()
        found = response if version < 4 else response.coordinators[0]
        assert found.error_code == 0
        return found.host, found.port
    return asyncio.run(ask())
