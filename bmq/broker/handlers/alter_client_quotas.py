"""AlterClientQuotas: set or remove quota values of entities (ALTER_CONFIGS on the cluster);
``validate_only`` checks and changes nothing. Values must be positive; keys are Kafka's."""

from __future__ import annotations

import asyncio

from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.client_quotas import NO_QUOTAS, quota_manager
from bmq.metadata.acls import Operation
from bmq.metadata.quotas import QUOTA_KEYS, Entity, Quotas, entity_of
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import AlterClientQuotasRequest, AlterClientQuotasResponse
from bmq.protocol.messages.alter_client_quotas_request import EntryData as AskedEntry
from bmq.protocol.messages.alter_client_quotas_response import EntityData, EntryData


def _changed(entry: AskedEntry, current: Quotas
             ) -> tuple[Entity, dict[str, float]]:
    """The entity and its values after the entry's operations; ValueError if invalid."""
    entity = entity_of((e.entity_type, e.entity_name) for e in entry.entity)
    values = dict(current.get(entity, {}))
    for op in entry.ops:
        if op.key not in QUOTA_KEYS:
            raise ValueError(f"unknown quota key {op.key!r} ({', '.join(QUOTA_KEYS)})")
        if op.remove:
            values.pop(op.key, None)
        elif not op.value > 0:
            raise ValueError(f"{op.key} must be positive, not {op.value}")
        else:
            values[op.key] = op.value
    return entity, values


async def handle_alter_client_quotas(ctx: RequestContext, request: AlterClientQuotasRequest,
                                     version: int) -> AlterClientQuotasResponse:
    manager = quota_manager(ctx)

    def answer(entry: AskedEntry, code: ErrorCode, message: str | None = None) -> EntryData:
        return EntryData(error_code=code, error_message=message, entity=[
            EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
            for e in entry.entity])

    if manager is None:
        return AlterClientQuotasResponse(entries=[
            answer(e, ErrorCode.UNSUPPORTED_VERSION, NO_QUOTAS) for e in request.entries])
    if not ctx.authorize_cluster(Operation.ALTER_CONFIGS):
        return AlterClientQuotasResponse(entries=[
            answer(e, ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for e in request.entries])
    results, valid = [], []
    for entry in request.entries:
        try:
            _changed(entry, {})
        except ValueError as error:
            results.append(answer(entry, ErrorCode.INVALID_REQUEST, str(error)))
            continue
        valid.append(entry)
        results.append(answer(entry, ErrorCode.NONE))

    def change(quotas: Quotas) -> None:
        # On the quotas as stored now: in cluster mode another broker may have changed them.
        for entry in valid:
            entity, values = _changed(entry, quotas)
            quotas[entity] = values

    if not request.validate_only and valid:
        await asyncio.get_running_loop().run_in_executor(None, manager.store.change, change)
    return AlterClientQuotasResponse(entries=results)
