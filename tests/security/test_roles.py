"""The roles of cluster mode keep no credentials and build no TLS contexts yet: `bmq broker` and
`bmq proxy` refuse SSL and SASL listeners at start (exit 2, one line), before they reach
ZooKeeper or create anything on storage, rather than serve them as plaintext."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import bmq_command, free_port


@pytest.mark.parametrize("role", ["broker", "proxy"])
@pytest.mark.parametrize("protocol", ["SSL", "SASL_PLAINTEXT"])
def test_cluster_roles_refuse_secured_listeners(role: str, protocol: str,
                                                tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    result = subprocess.run(
        [*bmq_command(), role], capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": "/usr/bin:/bin", "BMQ_LISTENERS": f"{protocol}://127.0.0.1:{free_port()}",
             "BMQ_ZOOKEEPER": "127.0.0.1:1", "BMQ_STORAGE": f"file://{storage}"})
    assert result.returncode == 2, result.stderr
    assert f"does not serve {protocol} listeners yet" in result.stderr
    assert "Traceback" not in result.stderr and not storage.exists()
