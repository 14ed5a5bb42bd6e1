"""The import rules of docs/architecture.md: roles never import each other, and data flows one way
(roles -> coordinators -> read and write paths -> metadata and networking -> storage -> codec).
The rules themselves are import-linter's layers contract in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import bmq

ROOT = Path(__file__).resolve().parents[2]


def _layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [contract] = config["tool"]["importlinter"]["contracts"]
    return [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]


def test_every_package_of_bmq_has_a_layer() -> None:
    """A new package outside the layers would escape every rule."""
    package_dir = Path(bmq.__file__).parent
    top_level = {f"bmq.{p.stem}" for p in package_dir.glob("*.py") if p.stem != "__init__"} | {
        f"bmq.{p.name}" for p in package_dir.iterdir() if (p / "__init__.py").exists()}
    named = {name for layer in _layers() for name in layer}
    assert top_level == named, (sorted(top_level - named), sorted(named - top_level))


def test_imports_follow_the_layers() -> None:
    result = subprocess.run([sys.executable, "-c",
                             "import sys; from importlinter.cli import lint_imports; "
                             "sys.exit(lint_imports(no_cache=True, no_logo=True))"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_role_importing_another_role_is_refused(tmp_path: Path) -> None:
    """The contract really catches a loop: the broker reaching into the proxy role."""
    config = (ROOT / "pyproject.toml").read_text()
    probe = ROOT / "bmq" / "broker" / "_import_rule_probe.py"
    probe.write_text("import bmq.proxy.proxy\n")
    try:
        (tmp_path / "pyproject.toml").write_text(config)
        result = subprocess.run(
            [sys.executable, "-c",
             "import sys; from importlinter.cli import lint_imports; "
             f"sys.exit(lint_imports(config_filename={str(tmp_path / 'pyproject.toml')!r}, "
             "no_cache=True, no_logo=True))"],
            cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        probe.unlink()
    assert result.returncode == 1, result.stdout + result.stderr
    assert "bmq.broker._import_rule_probe -> bmq.proxy.proxy" in result.stdout, result.stdout
