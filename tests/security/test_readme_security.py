"""The README's Security examples, run as written: its config file, `bmq user add` and `bmq
serve` commands and its Python SASL_SSL producer (with this run's certificates, ports and
directory substituted), then a consumer over the same listener reads the record back; and its
OAUTHBEARER example: the stand-in issuer script, config, `bmq serve` and the producer with its
`oauth_cb`, whose record a consumer reads back."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer

from tests.conftest import BrokerFactory, free_port
from tests.security.conftest import Certificates

README = Path(__file__).resolve().parents[2] / "README.md"


def _security_text() -> str:
    return README.read_text().split("## Security\n", 1)[1].split("\n## ", 1)[0]


def _code_blocks(text: str) -> list[tuple[str, str]]:
    return [(lang.strip(), body) for lang, _, body in
            (chunk.partition("\n") for chunk in text.split("```")[1::2])]


def _security_blocks() -> dict[str, str]:
    blocks: dict[str, str] = {}
    for lang, body in _code_blocks(_security_text()):
        if "openssl" not in body:   # the certificates: this test has its own
            blocks.setdefault(lang, body)   # the example: the first block of each kind
    return blocks


def test_the_readme_sasl_ssl_example_works(broker_factory: BrokerFactory,
                                           certificates: Certificates, tmp_path: Path) -> None:
    blocks = _security_blocks()
    plaintext, secure = free_port(), free_port()

    def substitute(text: str, data_dir: str) -> str:
        return (text.replace("broker.pem", str(certificates.server))
                .replace("ca.crt", str(certificates.ca)).replace("9092", str(plaintext))
                .replace("9093", str(secure)).replace("./bmq-data", data_dir)
                .replace("0.0.0.0", "127.0.0.1"))

    broker = broker_factory(port=plaintext, start=False)
    config = tmp_path / "bmq-secure.toml"
    config.write_text(substitute(blocks["toml"], broker.data_dir))
    add_user, serve = substitute(blocks["sh"], broker.data_dir).strip().splitlines()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", "-c", add_user], check=True, env=env, timeout=60)
    serve_args = shlex.split(serve)
    assert serve_args[:2] == ["bmq", "serve"]
    broker.extra_args = [*serve_args[2:-1], str(config)]   # --data-dir ... --config FILE
    broker.start()
    exec(substitute(blocks["python"], broker.data_dir), {})
    _assert_paid_is_read({"bootstrap.servers": f"127.0.0.1:{secure}",
                          "security.protocol": "SASL_SSL",
                          "ssl.ca.location": str(certificates.ca),
                          "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
                          "sasl.password": "alice-secret"})


def test_the_readme_oauthbearer_example_works(broker_factory: BrokerFactory,
                                              certificates: Certificates,
                                              tmp_path: Path) -> None:
    text = _security_text().split("An OAUTHBEARER example", 1)[1].split("* **Audit**", 1)[0]
    blocks = _code_blocks(text)
    assert [lang for lang, _ in blocks] == ["python", "toml", "sh", "python"]
    (_, make_issuer), (_, toml), (_, serve), (_, produce) = blocks
    plaintext, secure = free_port(), free_port()
    broker = broker_factory(port=plaintext, start=False)

    def substitute(text: str) -> str:
        return (text.replace("broker.pem", str(certificates.server))
                .replace("ca.crt", str(certificates.ca)).replace("9092", str(plaintext))
                .replace("9093", str(secure)).replace("./bmq-data", broker.data_dir)
                .replace("0.0.0.0", "127.0.0.1")
                .replace("file:jwks.json", (tmp_path / "jwks.json").as_uri()))

    # The scripts run where the README's reader would: in the directory with issuer.pem.
    subprocess.run([sys.executable, "-c", make_issuer], cwd=tmp_path, check=True, timeout=60)
    config = tmp_path / "bmq-oauth.toml"
    config.write_text(substitute(toml))
    serve_args = shlex.split(substitute(serve).strip())
    assert serve_args[:2] == ["bmq", "serve"] and serve_args[-1] == "bmq-oauth.toml"
    broker.extra_args = [*serve_args[2:-1], str(config)]
    broker.start()
    subprocess.run([sys.executable, "-c", substitute(produce)], cwd=tmp_path, check=True,
                   timeout=60)
    _assert_paid_is_read({"bootstrap.servers": f"127.0.0.1:{plaintext}"})
    assert "authenticated User:alice" in broker.log_text()
    assert "with OAUTHBEARER (session" in broker.log_text()


def _assert_paid_is_read(settings: dict[str, str]) -> None:
    """The README example's record, "paid" on topic orders, is read back."""
    consumer = Consumer({**settings, "group.id": "readme", "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    try:
        message = None
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.value() == b"paid"
    finally:
        consumer.close()
