"""The Kafka APIs a proxy serves: api key -> versions and handler.

Answered here: SASL (the proxy authenticates its clients itself), Metadata (proxies as leaders),
Fetch, ListOffsets and OffsetForLeaderEpoch (from storage), Produce (forwarded to the owners),
FindCoordinator and DescribeCluster (relayed, with addresses for the client's listener),
ShareFetch and ShareAcknowledge (split by partition owner, bmq.proxy.share), DeleteRecords,
DescribeProducers, WriteTxnMarkers and `bmq mirror`'s BmqMirrorAppend (split by partition
owner, by_owner), ListTransactions (none: a proxy coordinates no transaction, and clients ask
every node). Every other API the broker serves is relayed to a broker unchanged, at the same
versions, on links that act for the client's principal, BMQ's own for clients too (the databus
stream mappings); BMQ's other internal APIs are not served.
"""

from __future__ import annotations

from bmq.net.api import ApiSpec, ApiTables
from bmq.net.broker_apis import BROKER_REQUESTS
from bmq.proxy.handlers.base import ProxyContext
from bmq.security.handlers import SASL_APIS


def _api(request_name: str, module: str) -> ApiSpec:
    """``request_name`` answered by ``handle_<module>`` of ``bmq.proxy.handlers.<module>``."""
    return ApiSpec(request_name, f"bmq.proxy.handlers.{module}:handle_{module}")


_ANSWERED = [
    _api("ApiVersionsRequest", "api_versions"),
    _api("MetadataRequest", "metadata"),
    _api("FetchRequest", "fetch"),
    _api("ListOffsetsRequest", "list_offsets"),
    _api("OffsetForLeaderEpochRequest", "offset_for_leader_epoch"),
    _api("ProduceRequest", "produce"),
    _api("FindCoordinatorRequest", "find_coordinator"),
    _api("DescribeClusterRequest", "describe_cluster"),
    _api("ShareFetchRequest", "share_fetch"),
    _api("ShareAcknowledgeRequest", "share_acknowledge"),
    _api("ListTransactionsRequest", "list_transactions"),
    *(ApiSpec(name, f"bmq.proxy.handlers.by_owner:handle_{module}") for name, module in (
        ("DeleteRecordsRequest", "delete_records"),
        ("DescribeProducersRequest", "describe_producers"),
        ("WriteTxnMarkersRequest", "write_txn_markers"),
        ("BmqMirrorAppendRequest", "mirror_append"))),
]

_RELAYED = (ApiSpec(name, "bmq.proxy.handlers.forward:relay_to_broker")
            for name in BROKER_REQUESTS)
HANDLERS: dict[int, ApiSpec] = {s.api_key: s for s in _RELAYED if s.listed}
HANDLERS.update({s.api_key: s for s in [*_ANSWERED, *SASL_APIS]})
# With and without the versions Kafka 4 removed (bmq.legacy.clients.enable).
TABLES = ApiTables(HANDLERS)

__all__ = ["HANDLERS", "TABLES", "ProxyContext"]
