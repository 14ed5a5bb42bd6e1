"""The Kafka APIs the broker serves: api key -> versions and handler.

Versions come from the generated message classes, so the broker never advertises a version its
codec cannot read or write.
"""

from __future__ import annotations

from bmq.broker.handlers.alter_configs import handle_alter_configs
from bmq.broker.handlers.api_versions import api_versions_error, handle_api_versions
from bmq.broker.handlers.base import ApiSpec, Handler, RequestContext, RequestMessage
from bmq.broker.handlers.create_partitions import handle_create_partitions
from bmq.broker.handlers.create_topics import handle_create_topics
from bmq.broker.handlers.delete_records import handle_delete_records
from bmq.broker.handlers.delete_topics import handle_delete_topics
from bmq.broker.handlers.describe_cluster import handle_describe_cluster
from bmq.broker.handlers.describe_configs import handle_describe_configs
from bmq.broker.handlers.fetch import handle_fetch
from bmq.broker.handlers.incremental_alter_configs import handle_incremental_alter_configs
from bmq.broker.handlers.init_producer_id import handle_init_producer_id
from bmq.broker.handlers.list_offsets import handle_list_offsets
from bmq.broker.handlers.metadata import handle_metadata
from bmq.broker.handlers.produce import handle_produce
from bmq.protocol import messages as m

API_VERSIONS_KEY = m.ApiVersionsRequest.API_KEY


def _spec(request_type: type[RequestMessage], handler: Handler) -> ApiSpec:
    return ApiSpec(request_type, request_type.MIN_VERSION, request_type.MAX_VERSION, handler)


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
    )
}

__all__ = ["API_VERSIONS_KEY", "HANDLERS", "ApiSpec", "RequestContext", "api_versions_error"]
