"""Security settings as Kafka spells them: broker-wide `ssl.*`/`sasl.*` keys, per-listener
`listener.name.NAME.<setting>` keys in TOML (bare or quoted) and the environment, and the values
refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from bmq.config import ConfigError, load_config


def test_per_listener_settings_from_toml_and_environment(tmp_path: Path) -> None:
    path = tmp_path / "bmq.toml"
    path.write_text('listeners = "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093,'
                    'MY_EXT://127.0.0.1:9094"\n'
                    'listener.security.protocol.map = "MY_EXT:SSL"\n'
                    'ssl.keystore.location = "/etc/bmq/broker.pem"\n'
                    'listener.name.sasl_ssl.sasl.enabled.mechanisms = "PLAIN"\n'
                    '"listener.name.my_ext.ssl.client.auth" = "required"\n')
    config = load_config(str(path), environ={
        "BMQ_LISTENER_NAME_MY_EXT_SSL_KEYSTORE_LOCATION": "/etc/bmq/ext.pem"})
    assert [(lst.name, lst.protocol) for lst in config.listener_list] == [
        ("PLAINTEXT", "PLAINTEXT"), ("SASL_SSL", "SASL_SSL"), ("MY_EXT", "SSL")]
    assert config.listener_setting("MY_EXT", "ssl_keystore_location") == "/etc/bmq/ext.pem"
    assert config.listener_setting("SASL_SSL", "ssl_keystore_location") == "/etc/bmq/broker.pem"
    assert config.listener_setting("MY_EXT", "ssl_client_auth") == "required"
    assert config.listener_setting("SASL_SSL", "sasl_enabled_mechanisms") == "PLAIN"
    assert config.listener_setting("PLAINTEXT", "sasl_enabled_mechanisms") == \
        "SCRAM-SHA-256,SCRAM-SHA-512"


@pytest.mark.parametrize(("environ", "message"), [
    ({"BMQ_SSL_CLIENT_AUTH": "sometimes"}, "ssl.client.auth"),
    ({"BMQ_LISTENER_NAME_SSL_SSL_KEYSTORE_TYPE": "JKS"}, "only PEM"),
    ({"BMQ_LISTENERS": "SSL://127.0.0.1:9093", "BMQ_LISTENER_SECURITY_PROTOCOL_MAP": "SSL:TLS"},
     "unknown security protocol TLS"),
])
def test_settings_that_cannot_serve_are_refused(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(environ=environ)


def test_an_unknown_per_listener_key_is_refused_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bmq.toml"
    path.write_text('listener.name.ssl.ssl.keystore.flavour = "x"\n')
    with pytest.raises(ConfigError, match="unknown setting"):
        load_config(str(path), environ={})
