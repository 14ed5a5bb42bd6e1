"""Calls a proxy relays to a broker (``bmq.proxy.handlers.forward``: InitProducerId and the other
APIs it does not answer itself) while the broker they go to first, the lowest live one, is
frozen (SIGSTOP) but still registered: another broker answers them within a few seconds, not
once the frozen broker's ZooKeeper session expires or the client's request times out, and the
client's connection stays open (its other answers come in order behind the relayed one).

The requests are sent with BMQ's own client: which calls librdkafka sends to a proxy rather
than to a broker its Metadata lists is its choice (its admin client goes to the controller)."""

from __future__ import annotations

import asyncio
import time

from confluent_kafka.admin import AdminClient, NewTopic

from bmq.net.client import BrokerLink
from bmq.protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from tests.cluster.conftest import ClusterFactory
from tests.proxy.conftest import Proxies

# Long enough that the frozen broker stays registered, and first in the relay's order,
# through the test.
SESSION_TIMEOUT_MS = 20_000
# A stalled broker is left after 0.5 s (bmq.client.liveness.STALL_S); the rest is CI's load.
ANSWERED_S = 3.0
VERSION = 4


async def _producer_id(link: BrokerLink) -> tuple[InitProducerIdResponse, float]:
    """An idempotent producer's id, asked on ``link``, and the seconds its answer took."""
    started = time.monotonic()
    answer = await asyncio.wait_for(link.request(InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1,
        producer_epoch=-1), VERSION), 60)
    assert answer.error_code == 0 and answer.producer_id >= 0, answer
    return answer, time.monotonic() - started


def test_relayed_calls_move_past_a_frozen_broker(cluster_factory: ClusterFactory,
                                                 proxies: Proxies) -> None:
    cluster = cluster_factory(brokers=2,
                              env={"BMQ_ZOOKEEPER_SESSION_TIMEOUT_MS": SESSION_TIMEOUT_MS})
    proxy = proxies(cluster)
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    admin.create_topics([NewTopic("relayed", 2, 1)])["relayed"].result(30)
    cluster.wait_writable("relayed", owners={1, 2})

    async def scenario() -> None:
        before = BrokerLink(proxy.host, proxy.port, "relay-test")
        try:
            await _producer_id(before)      # the proxy's link to broker 1 for it is open
            cluster.brokers[1].pause()
            # On the proxy's link opened before the freeze: waited for until broker 1 left
            # the cluster, and then the client's connection was closed.
            first, took = await _producer_id(before)
            assert took < ANSWERED_S, f"answered after {took:.1f} s"
            # A new client connection: the proxy opens a new link to broker 1, which the
            # frozen process's kernel accepts, and logs in on it (never answered).
            after = BrokerLink(proxy.host, proxy.port, "relay-test-2")
            try:
                second, took = await _producer_id(after)
                assert took < ANSWERED_S, f"answered after {took:.1f} s"
            finally:
                after.close()
            assert first.producer_id != second.producer_id
            # The same connection still serves the client: nothing was closed under it.
            assert not before.closed
            await _producer_id(before)
        finally:
            before.close()

    try:
        asyncio.run(scenario())
        # ... while broker 1 was still registered, first in the relay's order all along.
        assert cluster.zk.exists(cluster.paths.broker(1)) is not None
    finally:
        cluster.brokers[1].resume()
