"""The README's Index Query examples run as written, against a `bmq serve` with a metrics
port (the other README commands are checked by tests/cli/test_readme.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_readme import _blocks, _commands
from tests.conftest import BrokerFactory, free_port

VENV_BIN = Path(sys.executable).parent


def test_index_query_examples_run(broker_factory: BrokerFactory) -> None:
    port = free_port()
    broker = broker_factory(config={"metrics_port": port})
    blocks = _blocks()
    python_block = next(b for b in blocks if b.lang == "python" and "bmq.index.fields" in b.text)
    shell_block = next(b for b in blocks if b.lang == "sh" and "bmq query" in b.text)
    exec(python_block.text.replace("localhost:9092", broker.bootstrap), {})
    env = {**os.environ, "BMQ_BOOTSTRAP": broker.bootstrap,
           "BMQ_HTTP": f"http://127.0.0.1:{port}",
           "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    outputs = []
    for command in _commands(shell_block):
        line = command.replace("localhost:9100", f"127.0.0.1:{port}")
        proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env,
                              timeout=60, check=False)
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
        outputs.append(proc.stdout)
    by_id = [json.loads(line) for line in outputs[1].splitlines()]
    assert [json.loads(r["value"])["order_id"] for r in by_id] == [42]
    both = [json.loads(line) for line in outputs[2].splitlines()]
    assert len(both) == 5 and all(r["key"] == "c7" for r in both)
    by_header = [json.loads(line) for line in outputs[4].splitlines()]
    assert [r["headers"] for r in by_header] == [[["trace", "t42"]]]
    assert json.loads(outputs[5])["fields"] == ["order_id", "customer.id", "key", "header:trace"]
