"""The streaming source's ``watch`` option: wait on the brokers' partition notifications
(``BmqWatchPartitions``, the request BMQ's proxies park at brokers) instead of listing storage
at every trigger.

Each partition's owner is asked, with the high watermark the stream last saw on storage,
to answer as soon as that partition's durable end moves (or after ``max_wait_ms``). Only the
partitions a broker reports as changed are looked at again on storage; a partition a broker
does not own (moved, or moving) or a broker that cannot be reached makes the caller fall back to
a full listing. The notification is only a wake-up: offsets always come from storage, so a
broker that is ahead of what storage shows can never make the stream read past durable data.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping

from bmq.metadata.topics import TopicPartition
from bmq.net.client import BrokerLink, LinkError
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import BmqWatchPartitionsRequest
from bmq.protocol.messages.bmq_watch_partitions_request import WatchPartition, WatchTopic

log = logging.getLogger("bmq.spark.watch")

# How long to wait for the brokers' metadata and for a connection.
_METADATA_TIMEOUT_S = 10.0


class WatchUnavailable(Exception):
    """The brokers cannot tell (unreachable, or a partition has no owner that answers)."""


def partition_owners(bootstrap: str, topics: list[str]) -> dict[TopicPartition, tuple[str, int]]:
    """Each partition's leader (owner) address, from the brokers' metadata."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "bmq-spark-watch"})
    try:
        metadata = admin.list_topics(timeout=_METADATA_TIMEOUT_S)
    except Exception as error:   # librdkafka's KafkaException: no broker answered
        raise WatchUnavailable(f"metadata from {bootstrap}: {error}") from error
    owners: dict[TopicPartition, tuple[str, int]] = {}
    for topic in topics:
        info = metadata.topics.get(topic)
        if info is None:
            continue
        for partition, meta in info.partitions.items():
            broker = metadata.brokers.get(meta.leader)
            if broker is not None:
                owners[(topic, partition)] = (str(broker.host), int(broker.port))
    return owners


async def _ask(address: tuple[str, int], known: Mapping[TopicPartition, int],
               max_wait_ms: int) -> set[TopicPartition]:
    topics: dict[str, list[WatchPartition]] = {}
    for (topic, partition), hwm in known.items():
        topics.setdefault(topic, []).append(
            WatchPartition(partition_index=partition, known_high_watermark=hwm))
    request = BmqWatchPartitionsRequest(
        max_wait_ms=max_wait_ms,
        topics=[WatchTopic(name=name, partitions=parts) for name, parts in topics.items()])
    link = BrokerLink(*address, client_id="bmq-spark-watch")
    try:
        response = await asyncio.wait_for(link.request(request, 0),
                                          max_wait_ms / 1000 + _METADATA_TIMEOUT_S)
    except (LinkError, OSError, TimeoutError) as error:
        raise WatchUnavailable(f"broker {address[0]}:{address[1]}: {error}") from error
    finally:
        link.close()
    if response.error_code != ErrorCode.NONE:
        raise WatchUnavailable(f"broker {address[0]}:{address[1]} refused the watch: error "
                               f"{ErrorCode(response.error_code).name}")
    changed = set()
    for topic in response.topics:
        for part in topic.partitions:
            if part.error_code != ErrorCode.NONE:
                raise WatchUnavailable(f"{topic.name}-{part.partition_index} is not served "
                                       f"by {address[0]}:{address[1]} any more")
            changed.add((topic.name, part.partition_index))
    return changed


async def _first_news(requests: dict[tuple[str, int], dict[TopicPartition, int]],
                      max_wait_ms: int) -> set[TopicPartition]:
    tasks = [asyncio.ensure_future(_ask(address, known, max_wait_ms))
             for address, known in requests.items()]
    try:
        done, _pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        changed: set[TopicPartition] = set()
        for task in done:
            changed |= task.result()
        return changed
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*tasks, return_exceptions=True)


def wait_for_news(owners: Mapping[TopicPartition, tuple[str, int]],
                  known: Mapping[TopicPartition, int], max_wait_ms: int) -> set[TopicPartition]:
    """The partitions whose durable end differs from ``known``, as soon as one does, or an
    empty set after ``max_wait_ms``. Raises ``WatchUnavailable`` when the brokers cannot
    tell (the caller then lists storage)."""
    requests: dict[tuple[str, int], dict[TopicPartition, int]] = {}
    for tp, hwm in known.items():
        address = owners.get(tp)
        if address is None:
            raise WatchUnavailable(f"{tp[0]}-{tp[1]} has no owner in the brokers' metadata")
        requests.setdefault(address, {})[tp] = hwm
    if not requests:
        return set()
    return asyncio.run(_first_news(requests, max_wait_ms))
