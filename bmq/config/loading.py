"""Loading the settings: defaults < TOML file < BMQ_* env < flags, each key under any of its
names, then the checks that stop a start before anything runs."""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from typing import Any, get_type_hints

from bmq.config.kafka import KAFKA_ALIASES, KAFKA_NAMES, KAFKA_SCALED, LISTENER_SETTINGS, kafka_name
from bmq.config.settings import (
    COMPRESSION_TYPES,
    LOG_FORMATS,
    SSL_CLIENT_AUTH,
    Config,
    ConfigError,
    split_host_port,
)
from bmq.listeners import ListenerError

_SCALED_KEYS = {name.replace(".", "_"): (name, field_name, multiplier)
                for name, (field_name, multiplier) in KAFKA_SCALED.items()}
_LISTENER_PREFIX = "listener_name_"


def _listener_override(normal: str) -> tuple[str, str] | None:
    """``listener_name_<listener>_<setting>`` (normalised) -> (LISTENER, field), else None;
    listener names may hold underscores, so the setting is matched from the end."""
    if not normal.startswith(_LISTENER_PREFIX):
        return None
    rest = normal[len(_LISTENER_PREFIX):]
    for field_name in LISTENER_SETTINGS:
        listener = rest.removesuffix("_" + field_name)
        if listener != rest and listener:
            return listener.upper(), field_name
    return None


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML's dotted keys written bare (``listener.name.ssl.ssl.client.auth = ...``) are nested
    tables: back to one dotted key each, as Kafka writes them."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _normalise(key: str) -> str:
    return key.replace(".", "_").replace("-", "_").lower()


def _keys() -> dict[str, str]:
    """Every accepted key (normalised) -> the field it sets (scaled names excluded)."""
    # listener_overrides is set through its listener.name.NAME.<setting> keys only.
    keys = {f.name: f.name for f in dataclasses.fields(Config) if f.name != "listener_overrides"}
    for field_name, kafka in KAFKA_NAMES.items():
        keys[_normalise(kafka)] = field_name
    for alias, field_name in KAFKA_ALIASES.items():
        keys[_normalise(alias)] = field_name
    return keys


def env_name(key: str) -> str:
    return "BMQ_" + _normalise(key).upper()


def _coerce(name: str, kind: Any, value: Any) -> Any:
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("true", "1", "yes", "on"):
                return True
            if text in ("false", "0", "no", "off"):
                return False
            raise ValueError(value)
        if kind is int:
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        text = str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"setting {name!r}: cannot use {value!r} as {kind.__name__}") from None
    if name == "data_dir" and "," in text:
        raise ConfigError(f"setting 'data_dir' (log.dirs): BMQ keeps one data directory, "
                          f"got {text!r}")
    return text


def _read_source(items: Mapping[str, Any], origin: str, keys: Mapping[str, str],
                 hints: Mapping[str, Any], strict: bool) -> dict[str, Any]:
    """The fields one source (the TOML file, the environment) sets; two names of one setting in
    one source are refused rather than one silently winning."""
    values: dict[str, Any] = {}
    seen: dict[str, str] = {}
    scaled: dict[str, tuple[int, str, Any]] = {}
    for key, value in items.items():
        normal = _normalise(key.removeprefix("BMQ_"))  # environment variables carry BMQ_
        scale = _SCALED_KEYS.get(normal)
        if scale is not None:
            kafka, field_name, multiplier = scale
            # Kafka's precedence: hours < minutes; the exact field below beats both.
            if field_name not in scaled or multiplier < scaled[field_name][0]:
                scaled[field_name] = (multiplier, kafka, value)
            continue
        override = _listener_override(normal)
        if override is not None:
            listener, field_name = override
            values.setdefault("listener_overrides", {}).setdefault(listener, {})[field_name] = \
                _coerce(field_name, str, value)
            continue
        target = keys.get(normal)
        if target is None:
            if strict:
                raise ConfigError(f"unknown setting {key!r} in {origin}")
            continue
        field_name = target
        if field_name in seen:
            raise ConfigError(f"setting {field_name!r} is set twice in {origin}: as "
                              f"{seen[field_name]!r} and as {key!r}")
        seen[field_name] = key
        values[field_name] = _coerce(field_name, hints[field_name], value)
    for field_name, (multiplier, kafka, value) in scaled.items():
        if field_name not in values:
            values[field_name] = _coerce(kafka, int, value) * multiplier
    return values


def load_config(
    config_file: str | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Build the config from the TOML file, then BMQ_* variables, then explicit overrides."""
    hints = get_type_hints(Config)
    keys = _keys()
    values: dict[str, Any] = {}
    environ = os.environ if environ is None else environ
    config_file = config_file or environ.get("BMQ_CONFIG")
    if config_file:
        try:
            with open(config_file, "rb") as fh:
                table = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {config_file}: {exc}") from exc
        values.update(_read_source(_flatten(table), config_file, keys, hints, strict=True))
    names = [*keys, *_SCALED_KEYS]
    env = {env_name(name): environ[env_name(name)] for name in names if env_name(name) in environ}
    env.update({name: value for name, value in environ.items()
                if name.startswith("BMQ_LISTENER_NAME_")})
    from_env = _read_source(env, "the environment", keys, hints, strict=False)
    for listener, settings in from_env.pop("listener_overrides", {}).items():
        values.setdefault("listener_overrides", {}).setdefault(listener, {}).update(settings)
    values.update(from_env)
    for key, value in (overrides or {}).items():
        if value is not None:
            name = _normalise(key)
            values[name] = _coerce(name, hints[name], value)
    config = Config(**values)
    split_host_port(config.listen)
    if config.log_format not in LOG_FORMATS:
        raise ConfigError(f"setting 'log_format': expected one of {', '.join(LOG_FORMATS)}, "
                          f"got {config.log_format!r}")
    if not 0 <= config.metrics_port <= 65535:
        raise ConfigError(f"setting 'metrics_port': {config.metrics_port} is not a port "
                          "(0 turns metrics off)")
    if config.advertise:
        split_host_port(config.advertise)
    if config.console_listen:
        try:
            split_host_port(config.console_listen)
        except ConfigError as error:
            raise ConfigError(f"setting 'console_listen': {error} (\"\" turns the console "
                              "off)") from None
    if config.compression_type not in COMPRESSION_TYPES:
        raise ConfigError(f"setting 'compression_type': expected one of "
                          f"{', '.join(COMPRESSION_TYPES)}, got {config.compression_type!r}")
    if config.default_replication_factor < 1:
        raise ConfigError("setting 'default_replication_factor': must be 1 or more, got "
                          f"{config.default_replication_factor}")
    _check_security(config)
    try:
        config.listener_list  # noqa: B018 (parsed now, so a bad listener stops the start)
    except ListenerError as error:
        raise ConfigError(str(error)) from None
    return config


def _check_security(config: Config) -> None:
    for field_name in ("connections_max_reauth_ms", "sasl_oauthbearer_clock_skew_seconds"):
        if getattr(config, field_name) < 0:
            raise ConfigError(f"setting {kafka_name(field_name)!r}: must be 0 or more")
    if config.sasl_oauthbearer_jwks_endpoint_refresh_ms <= 0:
        raise ConfigError("setting 'sasl.oauthbearer.jwks.endpoint.refresh.ms': must be more "
                          "than 0")
    for listener in ["", *config.listener_overrides]:
        where = f" (listener {listener})" if listener else ""
        for kind in ("ssl_keystore_type", "ssl_truststore_type"):
            if config.listener_setting(listener, kind).upper() != "PEM":
                raise ConfigError(f"setting {kafka_name(kind)!r}{where}: only PEM is supported")
        if config.listener_setting(listener, "ssl_client_auth").lower() not in SSL_CLIENT_AUTH:
            raise ConfigError(f"setting 'ssl.client.auth'{where}: expected one of "
                              f"{', '.join(SSL_CLIENT_AUTH)}")
