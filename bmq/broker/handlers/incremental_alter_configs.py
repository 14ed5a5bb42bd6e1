"""IncrementalAlterConfigs (KIP-339): set, delete, append to or subtract from topic configs,
dynamic broker configs and group configs."""

from __future__ import annotations

from functools import partial

from bmq.broker.dynamic_config import DYNAMIC_CONFIGS
from bmq.broker.group_config import GROUP_CONFIGS
from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.config_resources import (
    alter_broker_configs,
    alter_group_configs,
    find_topic,
)
from bmq.broker.topic_config import (
    TOPIC_CONFIGS,
    ConfigType,
    ResourceType,
    validate_topic_configs,
)
from bmq.broker.view_config import check_view_change
from bmq.metadata.mirrors import MIRROR_SOURCE, check_mark_change
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from bmq.protocol.messages.incremental_alter_configs_request import AlterableConfig
from bmq.protocol.messages.incremental_alter_configs_response import AlterConfigsResourceResponse

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _apply(current: dict[str, str], change: AlterableConfig, default: str,
           kind: ConfigType) -> None:
    if change.config_operation == SET:
        if change.value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value for {change.name}")
        current[change.name] = change.value
    elif change.config_operation == DELETE:
        current.pop(change.name, None)
    elif change.config_operation in (APPEND, SUBTRACT):
        if kind != ConfigType.LIST:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Config {change.name} is not a list: cannot append or subtract")
        items = [i for i in current.get(change.name, default).split(",") if i]
        for item in (change.value or "").split(","):
            if change.config_operation == APPEND and item and item not in items:
                items.append(item)
            elif change.config_operation == SUBTRACT and item in items:
                items.remove(item)
        current[change.name] = ",".join(items)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Unknown config operation {change.config_operation}")


def _apply_all(configs: dict[str, str], *, changes: list[AlterableConfig]) -> None:
    """A broker's or a group's changes (names are checked after, with the values)."""
    for change in changes:
        if change.name in DYNAMIC_CONFIGS:
            kind = DYNAMIC_CONFIGS[change.name][1]
        elif change.name in GROUP_CONFIGS:
            kind = GROUP_CONFIGS[change.name].type
        else:
            kind = ConfigType.STRING
        _apply(configs, change, "", kind)


async def handle_incremental_alter_configs(ctx: RequestContext,
                                           request: IncrementalAlterConfigsRequest,
                                           version: int) -> IncrementalAlterConfigsResponse:
    broker = ctx.broker
    results = []
    for resource in request.resources:
        result = AlterConfigsResourceResponse(resource_type=resource.resource_type,
                                              resource_name=resource.resource_name)
        results.append(result)
        try:
            if resource.resource_type == ResourceType.BROKER:
                await alter_broker_configs(ctx, resource.resource_name,
                                           partial(_apply_all, changes=resource.configs),
                                           request.validate_only)
                continue
            if resource.resource_type == ResourceType.GROUP:
                await alter_group_configs(ctx, resource.resource_name,
                                          partial(_apply_all, changes=resource.configs),
                                          request.validate_only)
                continue
            info = await find_topic(ctx, resource.resource_type, resource.resource_name)
            configs = dict(info.configs)
            for change in resource.configs:
                definition = TOPIC_CONFIGS.get(change.name)
                if definition is None:
                    raise KafkaError(ErrorCode.INVALID_CONFIG,
                                     f"Unknown topic config name: {change.name}")
                _apply(configs, change, definition.default(broker.config), definition.type)
            configs = validate_topic_configs(configs)
            check_view_change(info.name, info.configs, configs)
            check_mark_change(info.name, info.configs, configs, promoting=any(
                change.name == MIRROR_SOURCE and change.config_operation == DELETE
                for change in resource.configs))
            if not request.validate_only:
                await broker.set_topic_configs(info, configs)
        except KafkaError as error:
            result.error_code = error.code
            result.error_message = error.message
    return IncrementalAlterConfigsResponse(responses=results)
