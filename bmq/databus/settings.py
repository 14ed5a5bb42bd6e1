"""A databus agent's settings: a ``[databus]`` table in a TOML file of its own, flags over it.

    [databus]
    cluster = "broker-1:9092,broker-2:9092"  # the cluster's bootstrap servers
    listen = "127.0.0.1:9094"                # the Kafka port applications produce to
    http_listen = "127.0.0.1:9095"           # POST /streams/NAME ("" for none)
    unix_socket = "/run/bmq/databus.sock"    # the Kafka protocol on a Unix socket ("" for none)
    spool_dir = "/var/lib/bmq-databus"       # the durable spool
    spool_bytes = 268435456                  # its bound: past it, producing is refused
    linger_ms = 50                           # how long a batch waits for more messages ...
    batch_bytes = 1048576                    # ... unless it has this many bytes first
    compression = "lz4"                      # a stream's defaults (its mapping overrides them)
    workers = 1                              # processes sharing the ports, a spool each
    [databus.cluster_properties]             # librdkafka-style client properties
    "security.protocol" = "SASL_SSL"
"""

from __future__ import annotations

import dataclasses
import tomllib
from typing import Any

from bmq.listeners import ListenerError, split_host_port
from bmq.metadata.databus_streams import COMPRESSIONS


class SettingsError(ValueError):
    """A setting is missing or wrong."""


@dataclasses.dataclass(frozen=True)
class DatabusSettings:
    cluster: str
    spool_dir: str
    listen: str = "127.0.0.1:9094"
    http_listen: str = ""
    unix_socket: str = ""
    cluster_properties: dict[str, str] = dataclasses.field(default_factory=dict)
    spool_bytes: int = 256 << 20
    # The batching every stream gets unless its mapping says otherwise.
    linger_ms: int = 50
    batch_bytes: int = 1 << 20
    compression: str = "lz4"
    # A single message larger than this is refused (MESSAGE_TOO_LARGE): Kafka's
    # max.message.bytes default, below which every topic takes it.
    max_message_bytes: int = 1048588
    # An HTTP connection idle this long, or a request whose headers or body take longer to
    # arrive, is closed (a body: answered 408 first).
    http_timeout_ms: int = 30000
    # How often the agent reads the stream mappings (a change applies within about this).
    mappings_interval_ms: int = 1000
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"
    # Processes serving the ports together (bmq/databus/workers.py): one is one core.
    workers: int = 1
    log_level: str = "INFO"


def load_settings(path: str | None, overrides: dict[str, Any]) -> DatabusSettings:
    """The ``[databus]`` table of ``path`` (if any) with ``overrides`` (flags, None: unset)."""
    values: dict[str, Any] = {}
    if path:
        try:
            with open(path, "rb") as fh:
                table = tomllib.load(fh).get("databus", {})
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise SettingsError(f"cannot read {path}: {error}") from error
        if not isinstance(table, dict):
            raise SettingsError(f"{path}: [databus] must be a table")
        values.update(table)
    values.update({key: value for key, value in overrides.items()
                   if value is not None and value != ()})
    known = {field.name for field in dataclasses.fields(DatabusSettings)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise SettingsError(f"unknown databus setting(s): {', '.join(unknown)}")
    for key in ("cluster", "spool_dir"):
        if not values.get(key):
            raise SettingsError(f"the databus's {key} is required "
                                f"(--{key.replace('_', '-')} or {key} = ...)")
    values["cluster_properties"] = {str(k): str(v)
                                    for k, v in values.get("cluster_properties", {}).items()}
    for key in ("listen", "http_listen"):
        if values.get(key):
            try:
                split_host_port(values[key])
            except ListenerError as error:
                raise SettingsError(f"{key}: {error}") from error
    if values.get("compression", "lz4") not in COMPRESSIONS:
        raise SettingsError(f"compression: one of {', '.join(COMPRESSIONS)}, "
                            f"not {values['compression']!r}")
    for field in dataclasses.fields(DatabusSettings):
        value = values.get(field.name)
        lowest = 0 if field.name in ("metrics_port", "linger_ms") else 1
        if field.type == "int" and value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < lowest):
            raise SettingsError(f"{field.name}: a whole number of at least {lowest}, "
                                f"not {value!r}")
    return DatabusSettings(**values)
