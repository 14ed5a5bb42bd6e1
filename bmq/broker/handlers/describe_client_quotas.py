"""DescribeClientQuotas: the quota values of the entities a filter matches (DESCRIBE_CONFIGS on
the cluster). Each component matches a user or client id exactly (0), the default (1) or any
(2); ``strict`` leaves out entities with other components."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.client_quotas import NO_QUOTAS, quota_manager
from bmq.metadata.acls import Operation
from bmq.metadata.quotas import ABSENT, ENTITY_TYPES, Entity, components
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from bmq.protocol.messages.describe_client_quotas_request import ComponentData
from bmq.protocol.messages.describe_client_quotas_response import (
    EntityData,
    EntryData,
    ValueData,
)

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def _matches(entity: Entity, filters: list[ComponentData], strict: bool) -> bool:
    named = dict(zip(ENTITY_TYPES, entity, strict=True))
    for component in filters:
        value = named[component.entity_type]
        if value == ABSENT:
            return False
        if component.match_type == MATCH_EXACT and value != component.match:
            return False
        if component.match_type == MATCH_DEFAULT and value is not None:
            return False
    asked = {c.entity_type for c in filters}
    return not strict or all(v == ABSENT or t in asked for t, v in named.items())


async def handle_describe_client_quotas(ctx: RequestContext,
                                        request: DescribeClientQuotasRequest,
                                        version: int) -> DescribeClientQuotasResponse:
    manager = quota_manager(ctx)
    if manager is None:
        return DescribeClientQuotasResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                                            error_message=NO_QUOTAS, entries=None)
    if not ctx.authorize_cluster(Operation.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                            error_message=None, entries=None)
    types = [c.entity_type for c in request.components]
    if any(t not in ENTITY_TYPES for t in types) or len(set(types)) != len(types) or any(
            c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY)
            for c in request.components):
        return DescribeClientQuotasResponse(
            error_code=ErrorCode.INVALID_REQUEST, entries=None,
            error_message="components name user and client-id at most once each, with match "
                          "type 0 (exact), 1 (default) or 2 (any)")
    return DescribeClientQuotasResponse(error_message=None, entries=[
        EntryData(entity=[EntityData(entity_type=t, entity_name=n) for t, n in components(e)],
                  values=[ValueData(key=k, value=v) for k, v in sorted(values.items())])
        for e, values in manager.store.quotas.items()
        if _matches(e, request.components, request.strict)])
