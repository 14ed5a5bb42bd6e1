"""AlterConfigs (legacy): replace a topic's whole set of config overrides, or a broker's (or the
cluster's) whole set of dynamic broker configs."""

from __future__ import annotations

from functools import partial

from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.config_resources import alter_broker_configs, find_topic
from bmq.broker.topic_config import ResourceType, validate_topic_configs
from bmq.broker.view_config import check_view_change
from bmq.metadata.mirrors import check_mark_change
from bmq.protocol.errors import KafkaError
from bmq.protocol.messages import AlterConfigsRequest, AlterConfigsResponse
from bmq.protocol.messages.alter_configs_response import AlterConfigsResourceResponse


def _replace(configs: dict[str, str], *, new: dict[str, str]) -> None:
    configs.clear()
    configs.update(new)


def _without_empty_markers(given: dict[str, str | None], current: dict[str, str]
                           ) -> dict[str, str | None]:
    """The given configs less BMQ's markers (bmq.view.source, bmq.mirror.source, ...) sent
    back empty, as DescribeConfigs shows them on a topic that has none: tools that replace a
    topic's configs by re-sending every described one (librdkafka's test suite does, old
    clients' admin tools too) mean no marker, and a marker's presence is what makes a view."""
    return {name: value for name, value in given.items()
            if not (name.startswith("bmq.") and value == "" and name not in current)}


async def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest,
                               version: int) -> AlterConfigsResponse:
    results = []
    for resource in request.resources:
        result = AlterConfigsResourceResponse(resource_type=resource.resource_type,
                                              resource_name=resource.resource_name)
        results.append(result)
        try:
            if resource.resource_type == ResourceType.BROKER:
                await alter_broker_configs(
                    ctx, resource.resource_name,
                    partial(_replace, new={c.name: c.value or "" for c in resource.configs}),
                    request.validate_only)
                continue
            info = await find_topic(ctx, resource.resource_type, resource.resource_name)
            configs = validate_topic_configs(_without_empty_markers(
                {c.name: c.value for c in resource.configs}, info.configs))
            check_view_change(info.name, info.configs, configs)
            # (Not a promotion: a whole set of configs without the mark is a tool's that does
            # not know it, more likely than a failover.)
            check_mark_change(info.name, info.configs, configs, promoting=False)
            if not request.validate_only:
                await ctx.broker.set_topic_configs(info, configs)
        except KafkaError as error:
            result.error_code = error.code
            result.error_message = error.message
    return AlterConfigsResponse(responses=results)
