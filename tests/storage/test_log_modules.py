"""The modules of ``bmq.storage.log`` import one another one way: the map in the package's
docstring lists every module, each importing only modules listed above it (imports for type
checking included), so there is no import circle among them."""

from __future__ import annotations

import re
from pathlib import Path

import grimp

import bmq.storage.log as package

PACKAGE = package.__name__


def _mapped_modules() -> list[str]:
    """The modules the docstring's map names, in its order (a line per module, starting with
    its name)."""
    return [match.group(1) for line in (package.__doc__ or "").splitlines()
            if (match := re.match(r"``(\w+)``", line))]


def test_the_map_lists_every_module_in_an_order_the_imports_follow() -> None:
    order = _mapped_modules()
    files = {p.stem for p in Path(package.__file__).parent.glob("*.py") if p.stem != "__init__"}
    assert set(order) == files
    graph = grimp.build_graph(PACKAGE.split(".", 1)[0])
    position = {name: i for i, name in enumerate(order)}
    for name in order:
        imported = {m.removeprefix(f"{PACKAGE}.")
                    for m in graph.find_modules_directly_imported_by(f"{PACKAGE}.{name}")
                    if m.startswith(f"{PACKAGE}.")}
        later = sorted(m for m in imported if position[m] >= position[name])
        assert not later, f"{name} imports {later}, listed after it"
