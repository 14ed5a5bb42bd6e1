"""Settings for every role, with one precedence order: defaults < TOML file < BMQ_* env < flags.

TOML keys are the field names of ``Config`` or Kafka's name for the setting (``KAFKA_NAMES``):
``"log.dirs"`` and ``data_dir`` are the same key, and so are ``"log.retention.ms"`` and
``log_retention_ms``.
The environment variable for a key is ``BMQ_`` plus its upper-cased name with dots as
underscores, e.g. ``BMQ_DATA_DIR`` or ``BMQ_LOG_DIRS``, ``BMQ_LOG_RETENTION_MS``.

The package's face: ``settings`` holds the dataclass, ``kafka`` Kafka's names, aliases and units
and how DescribeConfigs shows a setting, ``loading`` the sources' reading and the checks.
"""

from bmq.config.kafka import (
    DESCRIBED_ALIASES,
    KAFKA_ALIASES,
    KAFKA_NAMES,
    KAFKA_SCALED,
    LISTENER_SETTINGS,
    SENSITIVE,
    accepted_names,
    described_value,
    explicitly_set,
    field_default,
    kafka_name,
)
from bmq.config.loading import env_name, load_config
from bmq.config.settings import (
    COMPRESSION_TYPES,
    LOG_FORMATS,
    SSL_CLIENT_AUTH,
    Config,
    ConfigError,
    split_host_port,
)

__all__ = [
    "COMPRESSION_TYPES", "DESCRIBED_ALIASES", "KAFKA_ALIASES", "KAFKA_NAMES", "KAFKA_SCALED",
    "LISTENER_SETTINGS", "LOG_FORMATS", "SENSITIVE", "SSL_CLIENT_AUTH", "Config", "ConfigError",
    "accepted_names", "described_value", "env_name", "explicitly_set", "field_default",
    "kafka_name", "load_config", "split_host_port",
]
