"""The roles of cluster mode serve secured listeners; settings they cannot serve or log in with
stop `bmq broker` and `bmq proxy` at start (exit 2, one line), before they reach ZooKeeper or
create anything on storage."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import bmq_command, free_port
from tests.security.conftest import Certificates


def _start(role: str, storage: Path, settings: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bmq_command(), role], capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": "/usr/bin:/bin", "BMQ_ZOOKEEPER": "127.0.0.1:1",
             "BMQ_STORAGE": f"file://{storage}", **settings})


@pytest.mark.parametrize("role", ["broker", "proxy"])
def test_a_tls_listener_without_a_keystore_stops_the_start(role: str, tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    result = _start(role, storage, {"BMQ_LISTENERS": f"SSL://127.0.0.1:{free_port()}"})
    assert result.returncode == 2, result.stderr
    assert "TLS needs ssl.keystore.location" in result.stderr
    assert "Traceback" not in result.stderr and not storage.exists()


@pytest.mark.parametrize("role", ["broker", "proxy"])
def test_a_sasl_inter_broker_listener_needs_a_login(role: str, tmp_path: Path,
                                                    certificates: Certificates) -> None:
    """Links to the other nodes' SASL listener need a user and password (sasl.jaas.config)."""
    storage = tmp_path / "storage"
    result = _start(role, storage, {"BMQ_LISTENERS": f"SASL_SSL://127.0.0.1:{free_port()}",
                                    "BMQ_SSL_KEYSTORE_LOCATION": str(certificates.server)})
    assert result.returncode == 2, result.stderr
    assert "sasl.jaas.config" in result.stderr and len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.stderr and not storage.exists()


@pytest.mark.parametrize(("setting", "content", "reason"), [
    ("BMQ_SSL_KEYSTORE_LOCATION", None, "No such file or directory"),
    ("BMQ_SSL_KEYSTORE_LOCATION", "not a key\n", "not a usable PEM file"),
    ("BMQ_SSL_TRUSTSTORE_LOCATION", None, "No such file or directory"),
])
def test_a_tls_file_that_cannot_be_loaded_is_named(setting: str, content: str | None,
                                                    reason: str, tmp_path: Path,
                                                    certificates: Certificates) -> None:
    storage, path = tmp_path / "storage", tmp_path / "tls" / "given.pem"
    if content is not None:
        path.parent.mkdir()
        path.write_text(content)
    settings = {"BMQ_LISTENERS": f"SSL://127.0.0.1:{free_port()}",
                "BMQ_SSL_KEYSTORE_LOCATION": str(certificates.server), setting: str(path)}
    result = _start("broker", storage, settings)
    assert result.returncode == 2, result.stderr
    name = setting.removeprefix("BMQ_").lower().replace("_", ".")
    assert f"cannot load {name} {path}: {reason}" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and not storage.exists()
