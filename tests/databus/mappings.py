"""The stream mappings as a cluster describes them, asked over the Kafka protocol."""

from __future__ import annotations

import asyncio
from typing import Any

from bmq.net.client import BrokerLink
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import BmqDescribeDatabusStreamsRequest
from tests.databus.conftest import KafkaCluster


def ask(cluster: KafkaCluster, request: Any) -> Any:
    """``request`` (v0) on a connection of its own to the cluster's first bootstrap server."""
    host, _, port = cluster.bootstrap.split(",")[0].rpartition(":")

    async def exchange() -> Any:
        link = BrokerLink(host, int(port), "tests")
        try:
            return await link.request(request, 0)
        finally:
            link.close()

    return asyncio.run(exchange())


def described(cluster: KafkaCluster, known_version: int = -1) -> tuple[int, dict[str, Any]]:
    """The mappings' version and each stream's mapping as the cluster describes them."""
    response = ask(cluster, BmqDescribeDatabusStreamsRequest(known_version=known_version))
    assert response.error_code == ErrorCode.NONE
    return response.version, {s.name: (s.topic, s.partitioner, s.compression, s.linger_ms,
                                       s.batch_bytes) for s in response.streams}
