"""The `bmq` client commands as real processes: signals, pipes and files."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.cli.conftest import Bmq
from tests.conftest import bmq_command


def test_sigterm_stops_consume_cleanly_and_commits(bmq: Bmq, cli_broker: Any,
                                                   topic: str) -> None:
    group = f"{topic}-g"
    bmq("topic", "create", topic)
    bmq("produce", topic, stdin="".join(f"m{i}\n" for i in range(5)))
    proc = subprocess.Popen(
        [*bmq_command(), "consume", topic, "--group", group, "--from-beginning",
         "--bootstrap", cli_broker.bootstrap],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(5)]
        assert [line.strip() for line in lines] == [f"m{i}" for i in range(5)]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "5 messages consumed" in err
    state = json.loads(bmq("group", "describe", group, "-o", "json").out)
    assert state["partitions"][0]["committed_offset"] == 5
    assert state["total_lag"] == 0


def test_consume_into_a_closed_pipe_stops_quietly(bmq: Bmq, cli_broker: Any,
                                                  topic: str) -> None:
    bmq("topic", "create", topic)
    bmq("produce", topic, stdin="".join(f"line {i}\n" for i in range(20000)))
    started = time.monotonic()
    proc = subprocess.run(
        f"{' '.join(bmq_command())} consume {topic} --from-beginning --exit-at-end "
        f"--bootstrap {cli_broker.bootstrap} | head -n 3",
        shell=True, capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout.splitlines() == ["line 0", "line 1", "line 2"]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert time.monotonic() - started < 60


def test_produce_from_a_file(bmq: Bmq, topic: str, tmp_path: Path) -> None:
    source = tmp_path / "events.txt"
    source.write_bytes(b"a=1\r\nb=2\r\n")
    bmq("produce", topic, "--file", str(source), "-K", "=", subprocess=True)
    out = bmq("consume", topic, "--from-beginning", "-e", "-F", "{key}:{value}").out
    assert out.splitlines() == ["a:1", "b:2"]
