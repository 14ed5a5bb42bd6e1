"""Every command of docs/*.md parses by the program it names, as the README's do
(test_readme.py's checks), and their Python examples compile.

The docs are reference pages: some commands are synopses, with placeholders and optional
parts. Those are parsed with each placeholder given an example value and each optional part
taken, so an option renamed in the code fails here too.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from tests.cli.readme_walk import logical_lines
from tests.cli.test_readme import ROOT, Block, _blocks, _check_command, _commands

PLACEHOLDERS = {"HOST:PORT": "127.0.0.1:9092", "URL": "file:///tmp/bmq", "N": "1",
                "BROKER": "3", "NAME": "orders", "KEY=VALUE": "endpoint_url=http://s3:8333",
                "DATA_DIR": "bmq-data"}
OPTIONAL = re.compile(r"\[(-(?:[^\[\]]|\[[^\[\]]*\])*)\]")   # [--opt VALUE], [--master local[2]]


def _doc_blocks() -> list[tuple[str, Block]]:
    return [(doc.name, block) for doc in sorted((ROOT / "docs").glob("*.md"))
            for block in _blocks(doc)]


def _as_example(command: str) -> str:
    """A synopsis made a command: optional parts taken, placeholders given values, a leading
    environment assignment and `spark-submit`'s own options dropped, `docker compose exec
    SERVICE` left to the command it runs."""
    line = OPTIONAL.sub(r"\1", command).replace(" ...", "")
    words = [PLACEHOLDERS.get(word, word) for word in line.split()]
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        words.pop(0)
    if words[:3] == ["docker", "compose", "exec"]:
        words = words[4:]
    if words[0] == "spark-submit":
        script = next(i for i, w in enumerate(words) if w.endswith(".py"))
        words = ["python", *words[script:]]
    return " ".join(words)


SHELL = [(name, block) for name, block in _doc_blocks() if block.lang == "sh"]


def _check_module_options(command: str) -> None:
    """`python -m MODULE --options`: the module's --help lists every option used."""
    words = command.split()
    module = words[words.index("-m") + 1]
    help_text = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT,
                               capture_output=True, text=True, timeout=60, check=True).stdout
    for option in (w for w in words if w.startswith("--")):
        assert option in help_text, f"{module} has no {option}"


@pytest.mark.parametrize(("doc", "block"), SHELL, ids=[f"{n}:{b.line}" for n, b in SHELL])
def test_every_docs_command_parses(doc: str, block: Block, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)   # where the files the commands read (--file) exist
    for line in logical_lines(block.text):
        for command in _commands(Block("sh", block.line, _as_example(line) + "\n")):
            words = command.split()
            if "--file" in words:
                (tmp_path / words[words.index("--file") + 1]).touch()
            try:
                if command.startswith(".venv/bin/python -m bench."):
                    _check_module_options(command)
                else:
                    _check_command(command)
            except (click.UsageError, SystemExit) as error:
                pytest.fail(f"docs/{doc}:{block.line}: {line}: {error}")


def test_docs_python_examples_compile() -> None:
    for doc, block in _doc_blocks():
        if block.lang == "python":
            compile(block.text, f"docs/{doc}:{block.line}", "exec")


def test_a_synopsis_is_made_a_command() -> None:
    assert _as_example("bmq broker --zookeeper HOST:PORT --broker-id N [--advertise HOST:PORT] "
                       "[--storage-option KEY=VALUE ...]") == (
        "bmq broker --zookeeper 127.0.0.1:9092 --broker-id 1 --advertise 127.0.0.1:9092 "
        "--storage-option endpoint_url=http://s3:8333")
