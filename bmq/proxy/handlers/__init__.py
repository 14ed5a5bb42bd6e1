"""The Kafka APIs a proxy serves: api key -> versions and handler.

Answered here: Metadata (proxies as leaders), Fetch, ListOffsets and OffsetForLeaderEpoch
(from storage), Produce (forwarded to the owners). Every other API the broker serves is relayed
to a broker unchanged, at the same versions (FindCoordinator thus names the real coordinator).
"""

from __future__ import annotations

from bmq.broker.handlers import HANDLERS as BROKER_HANDLERS
from bmq.net.api import FIRST_INTERNAL_API_KEY, ApiSpec, spec
from bmq.protocol import messages as m
from bmq.proxy.handlers.api_versions import handle_api_versions
from bmq.proxy.handlers.base import ProxyContext
from bmq.proxy.handlers.fetch import handle_fetch
from bmq.proxy.handlers.forward import relay_to_broker
from bmq.proxy.handlers.list_offsets import handle_list_offsets
from bmq.proxy.handlers.metadata import handle_metadata
from bmq.proxy.handlers.offset_for_leader_epoch import handle_offset_for_leader_epoch
from bmq.proxy.handlers.produce import handle_produce

_ANSWERED = [
    spec(m.ApiVersionsRequest, handle_api_versions),
    spec(m.MetadataRequest, handle_metadata),
    spec(m.FetchRequest, handle_fetch),
    spec(m.ListOffsetsRequest, handle_list_offsets),
    spec(m.OffsetForLeaderEpochRequest, handle_offset_for_leader_epoch),
    spec(m.ProduceRequest, handle_produce),
]

HANDLERS: dict[int, ApiSpec] = {
    key: ApiSpec(s.request_type, s.min_version, s.max_version, relay_to_broker)
    for key, s in BROKER_HANDLERS.items() if key < FIRST_INTERNAL_API_KEY
}
HANDLERS.update({s.request_type.API_KEY: s for s in _ANSWERED})

__all__ = ["HANDLERS", "ProxyContext"]
