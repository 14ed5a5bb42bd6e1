"""Fixtures for the `bmq` client commands: a broker to point them at, and a runner.

Every command runs as a real subprocess (`python -m bmq ...`), the way an operator runs it.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import bmq_command

# Groups form at once (no initial rebalance delay) so consuming with --group is quick.
CLI_ENV = {"BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}


@dataclass
class Result:
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"exit {self.code}\n--- stdout ---\n{self.out}\n--- stderr ---\n{self.err}"


class Bmq:
    """Runs `bmq ARGS` against one bootstrap address.

    In this process through click's test runner by default (the machine may be busy, and an
    interpreter start per command adds up); ``subprocess=True`` runs the real `bmq` process.
    """

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def __call__(self, *args: str, stdin: str | bytes | None = None, timeout: float = 60,
                 bootstrap: str | None = None, check: bool = True,
                 subprocess: bool = False) -> Result:
        argv = [*args, "--bootstrap", bootstrap or self.bootstrap]
        data = stdin.encode() if isinstance(stdin, str) else stdin
        if subprocess:
            result = _run_process(argv, data, timeout)
        else:
            from bmq.cli import main

            ran = CliRunner().invoke(main, argv, input=data)
            if ran.exception is not None and not isinstance(ran.exception, SystemExit):
                raise ran.exception
            result = Result(ran.exit_code, ran.stdout, ran.stderr)
        if check:
            assert result.code == 0, f"bmq {' '.join(args)} failed: {result}"
        return result


def _run_process(argv: list[str], data: bytes | None, timeout: float) -> Result:
    proc = subprocess.run([*bmq_command(), *argv], input=data, capture_output=True,
                          timeout=timeout, check=False)
    return Result(proc.returncode, proc.stdout.decode(errors="replace"),
                  proc.stderr.decode(errors="replace"))


@pytest.fixture(scope="module")
def cli_broker(module_broker_factory: Any) -> Any:
    return module_broker_factory(env=CLI_ENV)


@pytest.fixture
def bmq(cli_broker: Any) -> Bmq:
    return Bmq(cli_broker.bootstrap)
