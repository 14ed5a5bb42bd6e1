"""The roles' repeatable KEY=VALUE flags (client properties, storage options) parse one way:
a pair without ``=`` fails the command with exit 2 and names the flag, before anything is
contacted."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from bmq.cli import main


@pytest.mark.parametrize(("arguments", "flag"), [
    (["databus", "map", "clicks", "--topic", "clicks-v2", "-b", "127.0.0.1:1", "-X", "acks"],
     "-X"),
    (["databus", "run", "--cluster", "127.0.0.1:1", "--spool-dir", "spool",
      "--cluster-property", "security.protocol"], "--cluster-property"),
    (["mirror", "promote", "orders", "-b", "127.0.0.1:1", "-X", "=SSL"], "-X"),
    (["mirror", "status", "-b", "127.0.0.1:1", "--source", "127.0.0.1:2",
      "--source-property", "sasl.mechanism"], "--source-property"),
])
def test_a_pair_without_a_key_or_value_fails_with_usage(arguments: list[str], flag: str
                                                       ) -> None:
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 2, result.output
    assert f"{flag} expects KEY=VALUE, got" in result.output
