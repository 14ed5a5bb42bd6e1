"""The Dockerfile, checked as far as a machine without a Docker engine can: hadolint's rules and no
path that holds for one CPU architecture only. (docker-compose.yml: test_compose_schema.py and
tests/cluster/test_compose.py.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run([HADOLINT, "--no-color", str(ROOT / "Dockerfile")],
                            capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_names_no_cpu_architecture() -> None:
    text = (ROOT / "Dockerfile").read_text()
    for arch in ("amd64", "x86_64", "arm64", "aarch64"):
        assert arch not in text, f"the Dockerfile names {arch}: it would build for one CPU only"
