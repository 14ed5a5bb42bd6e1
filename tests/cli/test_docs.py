"""docs/configuration.md stays in step with bmq/config/settings.py, and its examples work."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from bmq.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def test_settings_table_matches_the_code() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_config_doc.py"), "--check"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_toml_example_loads(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    example = re.search(r"```toml\n(.*?)```", text, re.S)
    assert example is not None
    path = tmp_path / "bmq.toml"
    path.write_text(example.group(1))
    config = load_config(str(path), environ={})
    assert config.metrics_port == 9100
    assert config.log_format == "json"
    assert config.log_retention_ms == 86400000


def test_cli_doc_names_every_command() -> None:
    from bmq.commands import COMMANDS

    text = (ROOT / "docs" / "cli.md").read_text()
    for command in COMMANDS:
        assert f"bmq {command.name}" in text
        for sub in getattr(command, "commands", {}):
            assert f"bmq {command.name} {sub}" in text, sub
