"""kill -9 of a consume-transform-produce processor mid-stream: a restarted processor with the
same transactional.id aborts what the dead one left open, carries on from the offsets committed
with the transactions, and the output holds every input exactly once (read_committed)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.integration.helpers import create_topic, produce_all
from tests.transactions.helpers import read_values

INPUTS = 400
PROCESSOR = Path(__file__).with_name("processor.py")


def _start(bootstrap: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(PROCESSOR), bootstrap, "crash-in", "crash-out",
                             "crash-group", "crash-processor"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def test_killed_processor_restarts_and_the_output_is_exactly_once(txn_broker: Any) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "crash-in", partitions=2)
    create_topic(bootstrap, "crash-out", partitions=2)
    produce_all(bootstrap, "crash-in", [{"value": f"in-{i}".encode(), "partition": i % 2}
                                        for i in range(INPUTS)])
    first = _start(bootstrap)
    try:
        assert first.stdout is not None
        committed = 0
        deadline = time.monotonic() + 60
        while committed < 5 and time.monotonic() < deadline:     # some transactions done
            line = first.stdout.readline()
            committed += line.startswith(b"committed")
        assert committed >= 5, "the processor did not get going"
    finally:
        first.kill()            # kill -9, wherever it is: mid-transaction most likely
        first.wait(10)
    second = _start(bootstrap)
    try:
        out = read_values(bootstrap, "crash-out", 2, "read_committed", timeout=90,
                          until=INPUTS)
    finally:
        second.kill()
        second.wait(10)
    assert sorted(out) == sorted(f"IN-{i}" for i in range(INPUTS)), "not exactly once"
