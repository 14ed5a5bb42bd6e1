"""A mirror's settings: a ``[mirror]`` table in a TOML file of its own, flags over it.

    [mirror]
    name = "east"                          # the source's name, marks the mirrored topics
    source = "east-1:9092,east-2:9092"     # the source's bootstrap servers
    target = "localhost:9092"              # the target's
    topics = ["orders", "payments"]        # names ...
    topics_regex = "audit\\..*"            # ... and/or a regular expression (whole names)
    groups = ["billing"]                   # consumer groups whose offsets are copied
    groups_regex = ""
    [mirror.source_properties]             # librdkafka-style client properties
    "security.protocol" = "SASL_SSL"
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from typing import Any

from bmq.metadata.mirrors import LEGAL_SOURCE_NAME

# The consumer groups mirror processes share their work in (bmq.mirror.members).
MIRROR_GROUP_PREFIX = "bmq-mirror."


class SettingsError(ValueError):
    """A setting is missing or wrong."""


@dataclasses.dataclass(frozen=True)
class MirrorSettings:
    name: str
    source: str
    target: str
    topics: tuple[str, ...] = ()
    topics_regex: str = ""
    groups: tuple[str, ...] = ()
    groups_regex: str = ""
    source_properties: dict[str, str] = dataclasses.field(default_factory=dict)
    target_properties: dict[str, str] = dataclasses.field(default_factory=dict)
    # How often source metadata (new topics and partitions, configs) and group offsets are
    # looked at.
    metadata_interval_ms: int = 5000
    offsets_interval_ms: int = 5000
    # The mirror processes of one source share its partitions as a consumer group on the
    # target (bmq.mirror.members): a dead one's partitions move after this long.
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 1000
    # What one fetch from a source broker brings (and so one append to a target broker
    # carries: below the target's socket.request.max.bytes, 100 MiB by default), and of that
    # one partition's share.
    fetch_max_bytes: int = 64 << 20
    partition_max_bytes: int = 16 << 20
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"
    log_level: str = "INFO"

    def topic_selected(self, topic: str) -> bool:
        """Whether a source topic is mirrored (internal topics never are)."""
        if topic.startswith("__"):
            return False
        return topic in self.topics or bool(
            self.topics_regex and re.fullmatch(self.topics_regex, topic))

    def group_selected(self, group: str) -> bool:
        """Whether a source group's offsets are copied (never a mirror's own group)."""
        if group.startswith(MIRROR_GROUP_PREFIX):
            return False
        return group in self.groups or bool(
            self.groups_regex and re.fullmatch(self.groups_regex, group))


def load_settings(path: str | None, overrides: dict[str, Any]) -> MirrorSettings:
    """The ``[mirror]`` table of ``path`` (if any) with ``overrides`` (flags, None: unset)."""
    values: dict[str, Any] = {}
    if path:
        try:
            with open(path, "rb") as fh:
                table = tomllib.load(fh).get("mirror", {})
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise SettingsError(f"cannot read {path}: {error}") from error
        if not isinstance(table, dict):
            raise SettingsError(f"{path}: [mirror] must be a table")
        values.update(table)
    values.update({key: value for key, value in overrides.items()
                   if value is not None and value != ()})
    known = {field.name for field in dataclasses.fields(MirrorSettings)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise SettingsError(f"unknown mirror setting(s): {', '.join(unknown)}")
    for key in ("name", "source", "target"):
        if not values.get(key):
            raise SettingsError(f"the mirror's {key} is required (--{key} or {key} = ...)")
    if not LEGAL_SOURCE_NAME.fullmatch(values["name"]):
        raise SettingsError(f"name {values['name']!r}: letters, digits, '.', '_', '-' only")
    for key in ("topics", "groups"):
        values[key] = tuple(values.get(key, ()))
    for key in ("source_properties", "target_properties"):
        values[key] = {str(k): str(v) for k, v in values.get(key, {}).items()}
    for key in ("topics_regex", "groups_regex"):
        try:
            re.compile(values.get(key, ""))
        except re.error as error:
            raise SettingsError(f"{key}: {error}") from error
    if not values["topics"] and not values.get("topics_regex"):
        raise SettingsError("the mirror needs topics or topics_regex")
    for field in dataclasses.fields(MirrorSettings):
        value = values.get(field.name)
        lowest = 0 if field.name == "metrics_port" else 1
        if field.type == "int" and value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < lowest):
            raise SettingsError(f"{field.name}: a whole number of at least {lowest}, "
                                f"not {value!r}")
    return MirrorSettings(**values)
