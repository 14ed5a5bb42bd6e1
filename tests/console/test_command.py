"""`bmq console`'s start-up failures (one line on stderr and the roles' exit codes) and its
stop."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

import pytest

from bmq.startup import ExitCode
from tests.conftest import bmq_command, free_port
from tests.console.conftest import ConsoleProcess


def _console(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*bmq_command(), "console", *args], capture_output=True, text=True,
                          timeout=60)


def test_a_port_in_use_is_one_line_and_its_exit_code() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = _console("--listen", f"127.0.0.1:{port}")
    assert result.returncode == ExitCode.ADDRESS_IN_USE
    assert result.stderr.startswith("bmq: cannot listen: Address already in use")
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_malformed_listen_address_is_a_usage_error() -> None:
    result = _console("--listen", "localhost")
    assert result.returncode == ExitCode.USAGE
    assert result.stderr.strip() == "bmq: --listen: expected HOST:PORT, got 'localhost'"


def test_a_property_without_a_value_is_a_usage_error() -> None:
    result = _console("--listen", "127.0.0.1:0", "-X", "security.protocol")
    assert result.returncode == ExitCode.USAGE
    assert result.stderr.strip() == "bmq: -X expects KEY=VALUE, got 'security.protocol'"


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_asked_for_ends_with_exit_code_0(tmp_path: Path, stop: signal.Signals) -> None:
    # uvicorn raises the signal it stopped on again: Ctrl-C ended with click's "Aborted!" and
    # exit code 1 (the README walk's Ctrl-C failed on it), SIGTERM with the signal's death.
    console = ConsoleProcess(tmp_path, f"127.0.0.1:{free_port()}")
    console.proc.send_signal(stop)
    assert console.proc.wait(15) == 0, console.log_path.read_text()
    assert "Task was destroyed" not in console.log_path.read_text()
