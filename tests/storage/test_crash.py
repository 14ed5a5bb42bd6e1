"""kill -9 while appending and flushing; recovery must keep every flushed offset exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from bmq.storage import LocalStorage, PartitionLog, open_storage
from tests.seaweedfs import SeaweedFS

from .batches import make_batch, request, split, tag_of
from .crash_writer import CONFIG, batch_size

WRITER = Path(__file__).with_name("crash_writer.py")
PRODUCER = 4242


def _run_and_kill(root: str, seed: int, min_lines: int, epoch: int = 0,
                  env: dict[str, str] | None = None) -> int:
    """Start the writer, let it report ``min_lines`` flushes and then some, SIGKILL it; return
    the highest high watermark it reported."""
    proc = subprocess.Popen([sys.executable, str(WRITER), root, str(PRODUCER), str(seed),
                             str(epoch)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})})
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


def test_kill_9_while_appending_and_flushing_on_s3(seaweedfs: SeaweedFS) -> None:
    """The same on SeaweedFS S3 (object layout), the writer finding endpoint and credentials
    in the standard AWS_* variables; every other round a new owner with a higher epoch."""
    env = {"AWS_ENDPOINT_URL": seaweedfs.endpoint_url,
           "AWS_ACCESS_KEY_ID": seaweedfs.access_key,
           "AWS_SECRET_ACCESS_KEY": seaweedfs.secret_key}
    root = seaweedfs.url(f"crash/{os.getpid()}-{time.monotonic_ns()}")
    storage = open_storage(root, seaweedfs.storage_options())
    durable = 0
    epoch = 1
    for round_ in range(4):
        if round_ % 2:
            epoch += 1
        reported = _run_and_kill(root, seed=round_, min_lines=6 + 3 * round_, epoch=epoch,
                                 env=env)
        assert reported >= durable
        if round_ % 2:
            # A complete object nobody listed whose bytes are junk (it cannot be torn: PUTs
            # are atomic, but it can be garbage): recovery checks and skips it.
            names = [n for n in storage.list("t/0") if n.endswith(".log")]
            storage.write_atomic(f"t/0/{reported:020d}-{epoch:010d}-{999_999:012d}.log",
                                 bytes(make_batch([b"junk" * 500]))[:700])
            assert names
        log = PartitionLog.open(storage, "t", 0, CONFIG, epoch=epoch)
        assert log.high_watermark >= reported, (log.high_watermark, reported)
        _verify(log)
        durable = log.high_watermark
        retry = make_batch([b"retry"], producer_id=PRODUCER, producer_epoch=0,
                           base_sequence=durable - 1)
        result = log.append(*request(retry), now_ms=0)
        assert result.duplicate and result.base_offset == durable - 1
        if round_ % 2:
            log.close()
        else:
            log._shut()
    reader = PartitionLog.open_reader(storage, "t", 0)
    assert reader.high_watermark == durable
    reader.close()
