"""DescribeLogDirs (KIP-113): the "log dir" of a BMQ broker is the cluster's shared storage, one
for every broker, named by its URL without credentials; its partitions are those the broker has
open (in a cluster, those assigned to it; in `bmq serve`, every partition once the loader, which
opens them in the background after a start, or a client's request has reached it), each with
the bytes of its segments on the storage, known in memory. A partition not open is not reported
rather than opened to be measured, as a Kafka broker reports only the replicas it hosts; total
and usable bytes are -1 (unknown), as Kafka answers for a directory it cannot measure."""

from __future__ import annotations

import os
from collections import defaultdict
from urllib.parse import urlsplit, urlunsplit

from bmq.broker.handlers.base import RequestContext
from bmq.config import Config
from bmq.metadata.acls import Operation
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DescribeLogDirsRequest, DescribeLogDirsResponse
from bmq.protocol.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)


def storage_url(config: Config) -> str:
    """Where the broker's segments live: ``storage`` (cluster mode) or the data directory's
    ``topics`` (`bmq serve`), as a URL without user, password or query (which may hold keys)."""
    if not config.storage:
        return "file://" + os.path.join(os.path.abspath(config.data_dir), "topics")
    parts = urlsplit(config.storage)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


async def handle_describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequest,
                                   version: int) -> DescribeLogDirsResponse:
    if not ctx.authorize_cluster(Operation.DESCRIBE):
        # Kafka answers an unauthorized client no directories (and, from v3, this code).
        return DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    asked = None if request.topics is None else {
        topic.topic: set(topic.partitions) for topic in request.topics}
    sizes: dict[str, list[DescribeLogDirsPartition]] = defaultdict(list)
    for partition in ctx.broker.partitions.all():
        if asked is not None and partition.index not in asked.get(partition.topic, ()):
            continue
        sizes[partition.topic].append(DescribeLogDirsPartition(
            partition_index=partition.index, partition_size=partition.log.size_bytes))
    topics = [DescribeLogDirsTopic(name=name, partitions=sorted(
                  parts, key=lambda p: p.partition_index))
              for name, parts in sorted(sizes.items())]
    return DescribeLogDirsResponse(results=[DescribeLogDirsResult(
        error_code=ErrorCode.NONE, log_dir=storage_url(ctx.broker.config), topics=topics)])
