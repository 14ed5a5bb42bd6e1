"""The README's Security example, run as written: its config file, `bmq user add` and `bmq
serve` commands and its Python SASL_SSL producer (with this run's certificates, ports and
directory substituted), then a consumer over the same listener reads the record back."""

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


def _security_blocks() -> dict[str, str]:
    text = README.read_text().split("## Security\n", 1)[1].split("\n## ", 1)[0]
    blocks: dict[str, str] = {}
    for chunk in text.split("```")[1::2]:
        lang, _, body = chunk.partition("\n")
        blocks.setdefault(lang.strip(), body)   # the example: the first block of each kind
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
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{secure}", "group.id": "readme",
                         "auto.offset.reset": "earliest", "security.protocol": "SASL_SSL",
                         "ssl.ca.location": str(certificates.ca),
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
                         "sasl.password": "alice-secret"})
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
