"""The import rules of docs/architecture.md: roles never import each other, and data flows one way
(roles -> coordinators -> read and write paths -> metadata and networking -> storage -> codec).
The rules between packages are import-linter's layers contract in pyproject.toml; inside a
package, no module imports one that imports it back, directly or not (checked here on grimp's
graph, import-linter's own, TYPE_CHECKING and function-level imports included)."""

from __future__ import annotations

import itertools
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

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


def import_circles(package: str) -> list[str]:
    """Every import circle among the modules of ``package``: one per set of modules that all
    reach each other, each shown as its shortest circle through its first module, one import
    a line (``importer:line -> imported``), then its other members."""
    graph = grimp.build_graph(package, cache_dir=None)
    seen: set[str] = set()
    circles = []
    for module in sorted(graph.modules):
        if module in seen:
            continue
        members = graph.find_upstream_modules(module) & graph.find_downstream_modules(module)
        if not members:
            continue
        seen |= members | {module}
        chains = (graph.find_shortest_chain(importer=first, imported=module)
                  for first in graph.find_modules_directly_imported_by(module) & members)
        circle = (module, *min((c for c in chains if c), key=len))
        lines = [f"{len(members) + 1} modules in a circle:"]
        for importer, imported in itertools.pairwise(circle):
            line = graph.get_import_details(importer=importer, imported=imported)[0]
            lines.append(f"  {importer}:{line['line_number']} -> {imported}")
        lines.append(f"  also in it: {sorted(members - set(circle)) or 'none'}")
        circles.append("\n".join(lines))
    return circles


def test_no_import_circles_inside_packages() -> None:
    circles = import_circles("bmq")
    assert not circles, "\n".join(circles)


def test_an_import_circle_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check really catches a circle, through a package's __init__ too."""
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("from circled.a import A\n")
    (package / "a.py").write_text("A = 1\n\n\ndef f() -> None:\n    import circled.b\n")
    (package / "b.py").write_text("import circled\n")
    (package / "c.py").write_text("import circled.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_circles("circled") == [
        "3 modules in a circle:\n  circled:1 -> circled.a\n  circled.a:5 -> circled.b\n"
        "  circled.b:1 -> circled\n  also in it: none"]
