"""kill -9 while appending and flushing; recovery must keep every flushed offset exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from bmq.storage import LocalStorage, PartitionLog

from .batches import make_batch, request, split, tag_of
from .crash_writer import CONFIG, batch_size

WRITER = Path(__file__).with_name("crash_writer.py")
PRODUCER = 4242


def _run_and_kill(root: str, seed: int, min_lines: int) -> int:
    """Start the writer, let it report ``min_lines`` flushes and then some, SIGKILL it; return
    the highest high watermark it reported."""
    proc = subprocess.Popen([sys.executable, str(WRITER), root, str(PRODUCER), str(seed)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    reported = []
    try:
        for _ in range(min_lines):
            line = proc.stdout.readline()
            assert line, proc.stderr.read().decode() if proc.stderr else "writer died"
            reported.append(int(line))
        time.sleep(random.Random(seed).uniform(0.05, 0.4))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err.decode()
    reported.extend(int(line) for line in out.split())
    return max(reported)


def _verify(log: PartitionLog) -> None:
    """Offsets 0..hw-1 each present once, in order, each batch's content intact (CRC)."""
    offset = 0
    while offset < log.high_watermark:
        data = bytes(log.read(offset, 4 << 20))
        pos = 0
        for header in split(data):          # checks framing and CRC-32C
            raw = data[pos:pos + header.size]
            assert header.base_offset == offset
            assert header.record_count == 1
            assert header.size == batch_size(offset)
            assert tag_of(raw) == offset
            assert header.base_sequence == offset
            offset += 1
            pos += header.size
    assert offset == log.high_watermark == log.log_end_offset


def test_kill_9_while_appending_and_flushing(tmp_path: Path) -> None:
    root = str(tmp_path / "data")
    durable = 0
    for round_ in range(4):
        reported = _run_and_kill(root, seed=round_, min_lines=20 + 10 * round_)
        assert reported >= durable
        if round_ % 2:
            # As if the machine died too: half a batch of junk after whatever was written.
            directory = os.path.join(root, "t", "0")
            last = max(n for n in os.listdir(directory) if n.endswith(".log"))
            with open(os.path.join(directory, last), "ab") as f:
                f.write(bytes(make_batch([b"junk" * 500]))[:700])
        log = PartitionLog.open(LocalStorage(root), "t", 0, CONFIG)
        assert log.high_watermark >= reported, (log.high_watermark, reported)
        _verify(log)
        durable = log.high_watermark
        # Dedup survived the crash: a retry of the last durable batch is recognised.
        retry = make_batch([b"retry"], producer_id=PRODUCER, producer_epoch=0,
                           base_sequence=durable - 1)
        result = log.append(*request(retry), now_ms=0)
        assert result.duplicate and result.base_offset == durable - 1
        assert log.pending_bytes() == 0
        if round_ % 2:
            log.close()       # alternate clean closes and plain abandonment
        else:
            log._shut()
    segments = [n for n in os.listdir(os.path.join(root, "t", "0")) if n.endswith(".log")]
    assert len(segments) > 1
