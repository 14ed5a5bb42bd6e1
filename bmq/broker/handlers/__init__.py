"""The Kafka APIs the broker serves: api key -> versions and handler.

Versions come from the generated message classes, so the broker never advertises a version its
codec cannot read or write.
"""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.net.api import ApiSpec


def _api(request_name: str, module: str) -> ApiSpec:
    """``request_name`` answered by ``handle_<module>`` of ``bmq.broker.handlers.<module>``."""
    return ApiSpec(request_name, f"bmq.broker.handlers.{module}:handle_{module}")


HANDLERS: dict[int, ApiSpec] = {
    spec.api_key: spec
    for spec in (
        _api("ProduceRequest", "produce"),
        _api("FetchRequest", "fetch"),
        _api("ListOffsetsRequest", "list_offsets"),
        _api("MetadataRequest", "metadata"),
        _api("ApiVersionsRequest", "api_versions"),
        _api("CreateTopicsRequest", "create_topics"),
        _api("DeleteTopicsRequest", "delete_topics"),
        _api("DeleteRecordsRequest", "delete_records"),
        _api("InitProducerIdRequest", "init_producer_id"),
        _api("DescribeConfigsRequest", "describe_configs"),
        _api("AlterConfigsRequest", "alter_configs"),
        _api("CreatePartitionsRequest", "create_partitions"),
        _api("IncrementalAlterConfigsRequest", "incremental_alter_configs"),
        _api("DescribeClusterRequest", "describe_cluster"),
        # Consumer groups
        _api("FindCoordinatorRequest", "find_coordinator"),
        _api("JoinGroupRequest", "join_group"),
        _api("SyncGroupRequest", "sync_group"),
        _api("HeartbeatRequest", "heartbeat"),
        _api("LeaveGroupRequest", "leave_group"),
        _api("OffsetCommitRequest", "offset_commit"),
        _api("OffsetFetchRequest", "offset_fetch"),
        _api("DescribeGroupsRequest", "describe_groups"),
        _api("ListGroupsRequest", "list_groups"),
        _api("DeleteGroupsRequest", "delete_groups"),
        _api("OffsetDeleteRequest", "offset_delete"),
        # BMQ-internal: proxies hear of new durable data
        _api("BmqWatchPartitionsRequest", "watch_partitions"),
    )
}

__all__ = ["HANDLERS", "ApiSpec", "RequestContext"]
