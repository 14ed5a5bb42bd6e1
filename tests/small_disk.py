"""A broker whose data directory is a small real disk that a test fills up: a tmpfs of a few
megabytes mounted on it (the tests run as root, as the fault tests do for their network
namespaces)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import BrokerFactory, BrokerProcess


@contextmanager
def broker_on_small_disk(factory: BrokerFactory, disk_bytes: int) -> Iterator[BrokerProcess]:
    broker = factory(start=False)
    Path(broker.data_dir).mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={disk_bytes}", "tmpfs",
                    broker.data_dir], check=True)
    try:
        broker.start()
        yield broker
    finally:
        broker.cleanup()
        subprocess.run(["umount", "-l", broker.data_dir], check=False)


def fill(broker: BrokerProcess, room_left: int) -> Path:
    """Fill the broker's disk but ``room_left`` bytes; returns the file to delete to free it."""
    filler = Path(broker.data_dir) / "filler"
    free = os.statvfs(broker.data_dir)
    with open(filler, "wb") as out:
        out.write(b"\0" * (free.f_bavail * free.f_frsize - room_left))
    return filler


def wait_for_log(broker: BrokerProcess, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in broker.log_text():
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{broker.log_text()[-3000:]}"
        time.sleep(0.2)
