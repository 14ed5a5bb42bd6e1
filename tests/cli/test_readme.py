"""Every command the README shows is parsed by the program it names.

The commands that need a cluster, a lake or minutes of benchmarking are parsed by their real
command lines (an option renamed in the code fails here, not in a reader's terminal); the
configuration example is loaded. A command of a kind this module does not know fails the test,
so a new README example gets a check when it is written. test_readme_walk.py runs the examples
themselves, in order, as a reader would.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from bmq.cli import main as bmq_main
from bmq.config import load_config

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


@dataclass(frozen=True)
class Block:
    lang: str
    line: int
    text: str


def _blocks(markdown: Path = README) -> list[Block]:
    """The fenced code blocks of a Markdown file (the README by default), in order."""
    blocks: list[Block] = []
    lang, start, body = None, 0, []
    for number, line in enumerate(markdown.read_text().splitlines(), 1):
        if line.startswith("```"):
            if lang is None:
                lang, start, body = line[3:].strip(), number, []
            else:
                blocks.append(Block(lang, start, "\n".join(body) + "\n"))
                lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def _commands(block: Block) -> list[str]:
    """The block's shell commands, continuation lines joined, comments dropped."""
    joined = block.text.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            stages: list[list[str]] = [[]]
            for word in words:
                if word == "|":
                    stages.append([])
                else:
                    stages[-1].append(word)
            commands.append(" | ".join(shlex.join(stage) for stage in stages))
    return commands


def _shell_blocks() -> list[Block]:
    return [b for b in _blocks() if b.lang == "sh"]


# ----------------------------------------------------------------------------- parsers
def _parse_bmq(args: list[str]) -> None:
    group = click.Context(bmq_main, info_name="bmq")
    command = bmq_main.get_command(group, args[0])
    assert command is not None, f"no command bmq {args[0]}"
    context = command.make_context(args[0], list(args[1:]), parent=group)
    while isinstance(command, click.Group):
        # click 8.2 deprecates protected_args (9.0 folds it into args).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            remaining = [*context.protected_args, *context.args]
        if not remaining:
            break
        name, *rest = remaining
        sub = command.get_command(context, name)
        assert sub is not None, f"no command {name} under {args[0]}"
        command, context = sub, sub.make_context(name, rest, parent=context)


def _parse_bench(args: list[str]) -> None:
    from bench.cli import _check, parser

    p = parser()
    _check(p, p.parse_args(args))


def _parse_run_local(args: list[str]) -> None:
    # bench/run_local.sh runs python -m bench with these before the given options.
    _parse_bench(["--spawn-server", "--message-size", "1024", "--acks", "all",
                  "--partitions", "8", "--mode", "both", *args])


def _parse_parquet_export_job(args: list[str]) -> None:
    sys.path.insert(0, str(ROOT / "spark_jobs"))
    try:
        from export_to_parquet import parse_args
    finally:
        sys.path.pop(0)
    parse_args([a.strip("[]") for a in args])


def _make_target(args: list[str]) -> None:
    assert re.search(rf"^{re.escape(args[0])}:", (ROOT / "Makefile").read_text(), re.M)


def _existing_path(args: list[str]) -> None:
    if args[:1] == ["-m"]:         # a module of the tree, run with -m
        args = [args[1].replace(".", "/") + ".py"]
    assert (ROOT / args[0]).exists(), args[0]


def _shell_script(path: str) -> Callable[[list[str]], None]:
    """A script too slow for CI (librdkafka's suite builds for minutes): it exists, is
    executable and is valid shell."""
    def check(args: list[str]) -> None:
        script = ROOT / path
        assert script.exists() and os.access(script, os.X_OK), path
        subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)
    return check


def _java_main(args: list[str]) -> None:
    """``java -cp CLASSPATH CLASS ...``: the class is one of the tests' Java programs."""
    main = next(a for a in args if re.fullmatch(r"bmq\.clients\.\w+", a))
    source = ROOT / "tests/java/src/main/java" / (main.replace(".", "/") + ".java")
    assert source.exists(), main


def _kafka_tool(args: list[str]) -> None:
    """``scripts/kafka.sh TOOL ...``: the script knows the tool (or the subcommand)."""
    _shell_script("scripts/kafka.sh")(args)
    known = subprocess.run(["bash", str(ROOT / "scripts/kafka.sh"), "tools"], check=True,
                           capture_output=True, text=True, timeout=30).stdout.split()
    assert args[0] in [*known, "tools", "bin", "build", "classpath", "run-class",
                           "connect-plugins"], args[0]


CHECKS: dict[str, Callable[[list[str]], None]] = {
    "bmq": _parse_bmq,
    ".venv/bin/python -m bench": _parse_bench,
    "bench/run_local.sh": _parse_run_local,
    "python spark_jobs/export_to_parquet.py": _parse_parquet_export_job,
    "make": _make_target,
    "scripts/librdkafka_suite.sh": _shell_script("scripts/librdkafka_suite.sh"),
    "scripts/java_clients.sh": _shell_script("scripts/java_clients.sh"),
    "scripts/kafka.sh": _kafka_tool,
    "java": _java_main,
    ".venv/bin/pytest": _existing_path,
    ".venv/bin/python": _existing_path,
    # docker-compose.yml: test_compose_schema.py and tests/cluster/test_compose.py.
    "docker compose": lambda args: None,
    # Run by test_readme_walk.py: Index Query's HTTP examples, the TLS certificates.
    "curl": lambda args: None,
    "openssl": lambda args: None,
    "cat": lambda args: None,
}


def _check_command(command: str) -> None:
    words = shlex.split(command)
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words = words[1:]          # the command's environment
    if "|" in words:
        words = words[words.index("|") + 1:]
    line = " ".join(words)
    for prefix, check in sorted(CHECKS.items(), key=lambda item: -len(item[0])):
        if line == prefix or line.startswith(prefix + " "):
            check(line[len(prefix):].split() if prefix != "bmq" else words[1:])
            return
    if words[0] == "kcat":
        return   # run by test_readme_walk.py
    pytest.fail(f"README command with no check in {__name__}: {command}")


@pytest.mark.parametrize("block", _shell_blocks(), ids=lambda b: f"line{b.line}")
def test_every_shell_command_parses(block: Block) -> None:
    for command in _commands(block):
        try:
            _check_command(command)
        except (click.UsageError, SystemExit) as error:
            pytest.fail(f"README line {block.line}: {command}: {error}")


def test_an_unknown_option_is_caught() -> None:
    with pytest.raises(click.UsageError):
        _check_command("bmq topic create orders --partitons 6")
    with pytest.raises(SystemExit):
        _check_command("bench/run_local.sh --mesages 10")


def test_configuration_example_loads(tmp_path: Path) -> None:
    block = next(b for b in _blocks() if b.lang == "toml")
    path = tmp_path / "bmq.toml"
    path.write_text(block.text)
    config = load_config(str(path), environ={})
    assert config.num_partitions == 8 and config.log_retention_ms == 86400000


def test_python_examples_compile() -> None:
    # The Spark example runs in the slow walk only; here it must at least be Python.
    for block in _blocks():
        if block.lang == "python":
            compile(block.text, f"README.md:{block.line}", "exec")
