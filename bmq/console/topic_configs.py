"""A topic's configs in the console: shown on its page (DescribeConfigs), set when it is
created (CreateTopics' configs) and changed (IncrementalAlterConfigs: SET for a changed value,
DELETE for one put back to its default). The cluster checks every value; a refusal is shown as
it came and, IncrementalAlterConfigs being all or nothing per topic, changes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bmq.console.admin import REQUEST_TIMEOUT_S, ClusterAdmin, ConsoleError
from bmq.console.pages import ConsolePages
from bmq.console.topic_forms import post_topic_form

# The free NAME / VALUE rows of the create and alter forms.
FREE_ROWS = 3
# Create form fields that are topic configs under their own names.
NAMED_FIELDS = ("cleanup.policy", "retention.ms")
INDEX_FIELDS = "bmq.index.fields"


@dataclass(frozen=True)
class TopicConfig:
    name: str
    value: str | None
    source: str            # "topic" (set on it), "broker", "default"...
    read_only: bool
    sensitive: bool

    @property
    def is_set(self) -> bool:
        """Set on the topic itself: putting it back to its default is a DELETE."""
        return self.source == "topic"


# By ConfigSource's value: confluent-kafka types an entry's source as ConfigSource, but
# DescribeConfigs' entries carry a plain int.
_SOURCES = {ConfigSource.DYNAMIC_TOPIC_CONFIG.value: "topic",
            ConfigSource.DYNAMIC_BROKER_CONFIG.value: "broker",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value: "cluster default",
            ConfigSource.STATIC_BROKER_CONFIG.value: "broker file",
            ConfigSource.DEFAULT_CONFIG.value: "default"}


def _source_name(source: object) -> str:
    number: Any = getattr(source, "value", source)
    return _SOURCES.get(int(number), "unknown")


def describe(admin: ClusterAdmin, topic: str) -> list[TopicConfig]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    futures = admin.kafka_admin.describe_configs([resource], request_timeout=REQUEST_TIMEOUT_S)
    entries: dict[str, ConfigEntry] = admin.result(
        futures[resource], f"cannot read the configs of {topic!r}")
    return [TopicConfig(e.name, None if e.is_sensitive else e.value,
                        _source_name(e.source), e.is_read_only, e.is_sensitive)
            for e in sorted(entries.values(), key=lambda e: e.name)]


def free_rows(form: Mapping[str, str]) -> dict[str, str]:
    """The NAME = VALUE rows a user filled in (``config-name-N``, ``config-value-N``); a value
    without a name is refused rather than dropped."""
    rows: dict[str, str] = {}
    for n in range(FREE_ROWS):
        name = form.get(f"config-name-{n}", "").strip()
        value = form.get(f"config-value-{n}", "").strip()
        if value and not name:
            raise ConsoleError(f"config value {value!r} has no name")
        if name:
            rows[name] = value
    return rows


def create_configs(form: Mapping[str, str]) -> dict[str, str]:
    """The configs of the create form: its named fields when filled, then its free rows."""
    configs = {name: form[name].strip() for name in NAMED_FIELDS if form.get(name, "").strip()}
    configs.update(free_rows(form))
    return configs


def changes(form: Mapping[str, str], current: list[TopicConfig]) -> dict[str, str | None]:
    """What the alter form asks: a new value where an editable config's field differs from
    the value the form showed (``was:NAME``; not the value now, which another client may
    have changed since: its change is kept unless this form's user changed that config too),
    None (back to its default) where "default" is ticked, and the free rows."""
    wanted: dict[str, str | None] = {}
    for config in current:
        if config.read_only or config.sensitive:
            continue
        if form.get(f"default:{config.name}") and config.is_set:
            wanted[config.name] = None
            continue
        value = form.get(f"set:{config.name}")
        shown = form.get(f"was:{config.name}", config.value or "")
        if value is not None and value.strip() != shown.strip():
            wanted[config.name] = value.strip()
    wanted.update(free_rows(form))
    return wanted


def alter(admin: ClusterAdmin, topic: str, wanted: Mapping[str, str | None]) -> None:
    """One IncrementalAlterConfigs of ``wanted``; the cluster applies all or none."""
    entries = [ConfigEntry(name, value, incremental_operation=(
                   AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET))
               for name, value in wanted.items()]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    futures = admin.kafka_admin.incremental_alter_configs(
        [resource], request_timeout=REQUEST_TIMEOUT_S)
    admin.result(futures[resource], f"cannot change the configs of {topic!r}")


def routes(console: ConsolePages) -> list[Route]:
    async def configs(request: Request, error: str | None = None,
                      entered: Mapping[str, str] | None = None) -> Response:
        """The configs table with its form; whole page, or the part the topic's page loads
        (``?part=1``)."""
        name = request.path_params["name"]
        template = "topic_configs_part.html" if request.query_params.get("part") \
            else "topic_configs.html"
        try:
            shown = await console._call(describe, console.admin, name)
        except ConsoleError as failure:
            return console.page(request, template, status=404, name=name, configs=None,
                                error=str(failure))
        return console.page(request, template, status=400 if error else 200, name=name,
                            configs=shown, error=error, entered=dict(entered or {}))

    async def alter_configs(request: Request) -> Response:
        async def save(name: str, form: dict[str, str]) -> Response:
            current = await console._call(describe, console.admin, name)
            wanted = changes(form, current)
            if not wanted:
                raise ConsoleError("no config was changed")
            await console._call(alter, console.admin, name, wanted)
            listed = ", ".join(f"{k}={'(default)' if v is None else v}"
                               for k, v in wanted.items())
            return console._back(request.url_for("topic", name=name), f"changed {listed}")

        return await post_topic_form(console, request, save, configs)

    return [
        Route("/topics/{name}/configs", configs, name="topic_configs"),
        Route("/topics/{name}/configs", alter_configs, methods=["POST"],
              name="alter_topic_configs"),
    ]
