"""Config precedence: defaults < TOML file < BMQ_* environment < explicit flags."""

from pathlib import Path

import pytest

from bmq.config import Config, ConfigError, load_config


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
