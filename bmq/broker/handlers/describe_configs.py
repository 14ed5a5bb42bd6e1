"""DescribeConfigs for topics, the broker and groups."""

from __future__ import annotations

import asyncio
from typing import Any

from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.config_resources import (
    PENDING_DUE_CONFIG,
    ConfigEntry,
    broker_entries,
    group_entries,
    pending_due_entry,
    pending_entry,
    topic_entries,
)
from bmq.broker.topic_config import ConfigSource, ResourceType, log_config
from bmq.metadata.acls import CLUSTER_NAME, Operation
from bmq.metadata.acls import ResourceType as AclResource
from bmq.metadata.documents import DocumentStore
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import DescribeConfigsRequest, DescribeConfigsResponse
from bmq.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)


async def _reloaded(store: DocumentStore[Any] | None) -> None:
    """The store read again: a change made through another broker a moment ago may not have
    reached this one's watch yet, and an admin describing right after altering must see it."""
    if store is not None:
        await asyncio.get_running_loop().run_in_executor(None, store.load)


async def _entries(ctx: RequestContext, resource_type: int, name: str,
                   keys: list[str] | None) -> list[ConfigEntry]:
    broker = ctx.broker
    if resource_type == ResourceType.TOPIC:
        ctx.require(Operation.DESCRIBE_CONFIGS, AclResource.TOPIC, name)
        info = await broker.lookup_topic(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        entries = topic_entries(broker, info)
        if log_config(broker.config, info.configs).delay_enable:
            entries.append(await pending_entry(broker, info))
            # Storage reads (a block per run and bound): only when asked for by name.
            if keys is not None and PENDING_DUE_CONFIG in keys:
                entries.append(await pending_due_entry(broker, info))
        return entries
    if resource_type == ResourceType.BROKER:
        ctx.require(Operation.DESCRIBE_CONFIGS, AclResource.CLUSTER, CLUSTER_NAME)
        if name not in ("", str(broker.node.node_id)):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown broker {name}")
        await _reloaded(broker.dynamic_configs)
        return broker_entries(broker, name)
    if resource_type == ResourceType.GROUP:
        ctx.require(Operation.DESCRIBE_CONFIGS, AclResource.GROUP, name)
        await _reloaded(broker.group_configs)
        return group_entries(broker, name)
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


async def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest,
                                  version: int) -> DescribeConfigsResponse:
    results = []
    for resource in request.resources:
        result = DescribeConfigsResult(resource_type=resource.resource_type,
                                       resource_name=resource.resource_name)
        results.append(result)
        try:
            entries = await _entries(ctx, resource.resource_type, resource.resource_name,
                                     resource.configuration_keys)
        except KafkaError as error:
            result.error_code = error.code
            result.error_message = error.message
            continue
        keys = resource.configuration_keys
        for entry in entries:
            if keys is not None and entry.name not in keys:
                continue
            synonyms = [DescribeConfigsSynonym(name=name, value=value, source=source)
                        for name, value, source in entry.synonyms] \
                if request.include_synonyms and version >= 1 else []
            result.configs.append(DescribeConfigsResourceResult(
                name=entry.name, value=entry.value, read_only=entry.read_only,
                config_source=entry.source, is_default=entry.source == ConfigSource.DEFAULT_CONFIG,
                is_sensitive=False, synonyms=synonyms, config_type=entry.type,
                documentation=entry.documentation if request.include_documentation else None))
    return DescribeConfigsResponse(results=results)
