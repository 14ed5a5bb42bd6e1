"""The Dockerfile and docker-compose.yml, checked as far as a machine without a Docker engine can:
hadolint's rules, no path that holds for one CPU architecture only, and every `bmq` command of the
compose file parsed by the real `bmq` command line (an option renamed in the code would otherwise
only fail when somebody runs `docker compose up`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from bmq.cli import main

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


def _bmq_commands() -> list[tuple[str, list[str]]]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return [(name, service["command"][1:]) for name, service in compose["services"].items()
            if service.get("command", [None])[0] == "bmq"]


def test_compose_runs_every_role() -> None:
    roles = {args[0] for _, args in _bmq_commands()}
    assert {"controller", "broker", "proxy"} <= roles


@pytest.mark.parametrize(("service", "args"), _bmq_commands())
def test_compose_commands_parse(service: str, args: list[str]) -> None:
    group_ctx = click.Context(main, info_name="bmq")
    command = main.get_command(group_ctx, args[0])
    assert command is not None, f"{service}: no command bmq {args[0]}"
    try:
        command.make_context(args[0], list(args[1:]), parent=group_ctx)
    except click.UsageError as error:
        pytest.fail(f"{service}: bmq {' '.join(args)}: {error.format_message()}")
