"""The Kafka APIs the broker serves: api key -> versions and handler.

Versions come from the generated message classes, so the broker never advertises a version its
codec cannot read or write.
"""

from __future__ import annotations

from bmq.broker.handlers.alter_configs import handle_alter_configs
from bmq.broker.handlers.api_versions import handle_api_versions
from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.create_partitions import handle_create_partitions
from bmq.broker.handlers.create_topics import handle_create_topics
from bmq.broker.handlers.delete_groups import handle_delete_groups
from bmq.broker.handlers.delete_records import handle_delete_records
from bmq.broker.handlers.delete_topics import handle_delete_topics
from bmq.broker.handlers.describe_cluster import handle_describe_cluster
from bmq.broker.handlers.describe_configs import handle_describe_configs
from bmq.broker.handlers.describe_groups import handle_describe_groups
from bmq.broker.handlers.fetch import handle_fetch
from bmq.broker.handlers.find_coordinator import handle_find_coordinator
from bmq.broker.handlers.heartbeat import handle_heartbeat
from bmq.broker.handlers.incremental_alter_configs import handle_incremental_alter_configs
from bmq.broker.handlers.init_producer_id import handle_init_producer_id
from bmq.broker.handlers.join_group import handle_join_group
from bmq.broker.handlers.leave_group import handle_leave_group
from bmq.broker.handlers.list_groups import handle_list_groups
from bmq.broker.handlers.list_offsets import handle_list_offsets
from bmq.broker.handlers.metadata import handle_metadata
from bmq.broker.handlers.offset_commit import handle_offset_commit
from bmq.broker.handlers.offset_delete import handle_offset_delete
from bmq.broker.handlers.offset_fetch import handle_offset_fetch
from bmq.broker.handlers.produce import handle_produce
from bmq.broker.handlers.sync_group import handle_sync_group
from bmq.broker.handlers.watch_partitions import handle_watch_partitions
from bmq.net.api import ApiSpec
from bmq.net.api import spec as _spec
from bmq.protocol import messages as m

HANDLERS: dict[int, ApiSpec] = {
    spec.request_type.API_KEY: spec
    for spec in (
        _spec(m.ProduceRequest, handle_produce),
        _spec(m.FetchRequest, handle_fetch),
        _spec(m.ListOffsetsRequest, handle_list_offsets),
        _spec(m.MetadataRequest, handle_metadata),
        _spec(m.ApiVersionsRequest, handle_api_versions),
        _spec(m.CreateTopicsRequest, handle_create_topics),
        _spec(m.DeleteTopicsRequest, handle_delete_topics),
        _spec(m.DeleteRecordsRequest, handle_delete_records),
        _spec(m.InitProducerIdRequest, handle_init_producer_id),
        _spec(m.DescribeConfigsRequest, handle_describe_configs),
        _spec(m.AlterConfigsRequest, handle_alter_configs),
        _spec(m.CreatePartitionsRequest, handle_create_partitions),
        _spec(m.IncrementalAlterConfigsRequest, handle_incremental_alter_configs),
        _spec(m.DescribeClusterRequest, handle_describe_cluster),
        # Consumer groups
        _spec(m.FindCoordinatorRequest, handle_find_coordinator),
        _spec(m.JoinGroupRequest, handle_join_group),
        _spec(m.SyncGroupRequest, handle_sync_group),
        _spec(m.HeartbeatRequest, handle_heartbeat),
        _spec(m.LeaveGroupRequest, handle_leave_group),
        _spec(m.OffsetCommitRequest, handle_offset_commit),
        _spec(m.OffsetFetchRequest, handle_offset_fetch),
        _spec(m.DescribeGroupsRequest, handle_describe_groups),
        _spec(m.ListGroupsRequest, handle_list_groups),
        _spec(m.DeleteGroupsRequest, handle_delete_groups),
        _spec(m.OffsetDeleteRequest, handle_offset_delete),
        # BMQ-internal: proxies hear of new durable data
        _spec(m.BmqWatchPartitionsRequest, handle_watch_partitions),
    )
}

__all__ = ["HANDLERS", "ApiSpec", "RequestContext"]
