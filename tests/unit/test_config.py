"""Config precedence: defaults < TOML file < BMQ_* environment < explicit flags."""

from pathlib import Path

import pytest

from bmq.config import (
    Config,
    ConfigError,
    accepted_names,
    described_value,
    kafka_name,
    load_config,
)


def test_defaults_match_kafka_and_readme() -> None:
    config = load_config(environ={})
    assert config.listen == "127.0.0.1:9092"
    assert config.data_dir == "./bmq-data"
    assert config.message_max_bytes == 1048588
    assert config.socket_request_max_bytes == 104857600
    assert config.advertised == ("127.0.0.1", 9092)


def test_precedence_file_env_flags(tmp_path: Path) -> None:
    toml = tmp_path / "bmq.toml"
    toml.write_text('num_partitions = 3\n"log.retention.ms" = 1000\nlisten = "127.0.0.1:1"\n')
    env = {"BMQ_NUM_PARTITIONS": "5", "BMQ_AUTO_CREATE_TOPICS_ENABLE": "false"}
    config = load_config(str(toml), environ=env, overrides={"listen": "127.0.0.1:2"})
    assert config.num_partitions == 5  # env beats file
    assert config.log_retention_ms == 1000  # dotted Kafka name accepted in the file
    assert config.auto_create_topics_enable is False
    assert config.listen == "127.0.0.1:2"  # flag beats file


def test_config_file_from_environment(tmp_path: Path) -> None:
    toml = tmp_path / "bmq.toml"
    toml.write_text('data_dir = "/srv/bmq"\n')
    assert load_config(environ={"BMQ_CONFIG": str(toml)}).data_dir == "/srv/bmq"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no_such_setting = 1\n", "unknown setting"),
        ("num_partitions = \"many\"\n", "cannot use"),
        ("listen = \"nohostport\"\n", "HOST:PORT"),
        # Kafka's names: one directory, one name per setting.
        ("\"log.dirs\" = \"/a,/b\"\n", "one data directory"),
        ("data_dir = \"/a\"\n\"log.dirs\" = \"/a\"\n", "set twice"),
        ("\"broker.id\" = 1\n\"node.id\" = 1\n", "set twice"),
        ("\"compression.type\" = \"brotli\"\n", "compression_type"),
        ("\"default.replication.factor\" = 0\n", "default_replication_factor"),
    ],
)
def test_bad_settings_are_reported(tmp_path: Path, text: str, message: str) -> None:
    toml = tmp_path / "bmq.toml"
    toml.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(str(toml), environ={})


def test_advertise_overrides_listen() -> None:
    config = Config(listen="0.0.0.0:9092", advertise="broker1.example:19092")
    assert config.advertised == ("broker1.example", 19092)
    assert Config(listen="0.0.0.0:9092").advertised == ("127.0.0.1", 9092)


def test_kafka_names_in_toml_and_environment(tmp_path: Path) -> None:
    toml = tmp_path / "server.toml"
    toml.write_text('listeners = "PLAINTEXT://0.0.0.0:19092"\n'
                    '"advertised.listeners" = "PLAINTEXT://broker1:19092"\n'
                    '"log.dirs" = "/srv/kafka-logs"\n"zookeeper.connect" = "zk:2181"\n'
                    '"log.retention.hours" = 168\n"log.retention.minutes" = 30\n')
    config = load_config(str(toml), environ={"BMQ_BROKER_ID": "4", "BMQ_LOG_ROLL_HOURS": "2",
                                             "BMQ_NUM_PARTITIONS": "6"})
    assert config.advertised == ("broker1", 19092)
    assert (config.data_dir, config.zookeeper, config.node_id) == ("/srv/kafka-logs", "zk:2181", 4)
    assert config.log_retention_ms == 30 * 60_000  # minutes beat hours, as in Kafka
    assert config.log_roll_ms == 2 * 3_600_000
    assert config.num_partitions == 6
    # The exact name beats the coarser ones in one source; a later source beats both.
    toml.write_text('"log.retention.hours" = 1\n"log.retention.ms" = 5\n')
    assert load_config(str(toml), environ={}).log_retention_ms == 5
    assert load_config(str(toml), environ={"BMQ_LOG_RETENTION_HOURS": "3"}).log_retention_ms \
        == 3 * 3_600_000


def test_described_under_kafka_names() -> None:
    assert kafka_name("data_dir") == "log.dirs" and kafka_name("metrics_port") == "metrics_port"
    # Listeners are described as the list in force, also when set through listen/advertise.
    shorthand = Config(listen="0.0.0.0:9092", advertise="b1:9092")
    assert described_value(shorthand, "listeners") == "PLAINTEXT://0.0.0.0:9092"
    assert described_value(shorthand, "advertised_listeners") == "PLAINTEXT://b1:9092"
    assert described_value(Config(listen="0.0.0.0:9"), "advertised_listeners") == \
        "PLAINTEXT://127.0.0.1:9"
    named = Config(listeners="INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092",
                   advertised_listeners="EXTERNAL://localhost:19092")
    assert described_value(named, "advertised_listeners") == \
        "INTERNAL://127.0.0.1:9092,EXTERNAL://localhost:19092"
    assert accepted_names("node_id") == ["node_id", "node.id", "broker.id"]
