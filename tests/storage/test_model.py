"""Model-based test: random appends, flushes, reads, deletions, clean and crash reopens."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage import LocalStorage, LogConfig, PartitionLog

from .batches import make_batch, request, split, with_offset


@dataclass
class Stored:
    base: int
    last: int
    max_ts: int
    raw: bytes


batch_spec = st.tuples(st.integers(1, 5), st.integers(0, 300), st.integers(0, 1000))


class LogMachine(RuleBasedStateMachine):
    @initialize(segment_bytes=st.integers(300, 6000), interval=st.integers(1, 3000))
    def setup(self, segment_bytes: int, interval: int) -> None:
        self.root = tempfile.mkdtemp(prefix="bmq-model-")
        self.config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval,
                                retention_ms=-1)
        self.log = self._open()
        self.durable: list[Stored] = []
        self.pending: list[Stored] = []
        self.log_start = 0

    def _open(self) -> PartitionLog:
        return PartitionLog.open(LocalStorage(self.root), "t", 0, self.config)

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log._shut()
            shutil.rmtree(self.root, ignore_errors=True)

    @property
    def hw(self) -> int:
        return self.durable[-1].last + 1 if self.durable else 0

    @property
    def leo(self) -> int:
        return (self.pending or self.durable or [Stored(-1, -1, 0, b"")])[-1].last + 1

    def _segment_bases(self) -> set[int]:
        return {int(n[:20]) for n in self.log.storage.list("t/0") if n.endswith(".log")}

    @rule(specs=st.lists(batch_spec, min_size=1, max_size=3))
    def append(self, specs: list[tuple[int, int, int]]) -> None:
        batches = [make_batch([bytes([65 + i % 26]) * size for i in range(count)],
                              timestamps=[ts + i for i in range(count)])
                   for count, size, ts in specs]
        result = self.log.append(*request(*batches), now_ms=0)
        offset = self.leo
        assert result.base_offset == offset
        for (count, _size, ts), batch in zip(specs, batches, strict=True):
            self.pending.append(Stored(offset, offset + count - 1, ts + count - 1,
                                       with_offset(batch, offset)))
            offset += count
        assert result.last_offset == offset - 1

    @rule()
    def flush(self) -> None:
        self.durable.extend(self.pending)
        self.pending = []
        assert self.log.flush() == self.hw

    @rule(data=st.data(), max_bytes=st.integers(0, 4000))
    def read(self, data: st.DataObject, max_bytes: int) -> None:
        offset = data.draw(st.integers(self.log_start, self.hw))
        got = bytes(self.log.read(offset, max_bytes))
        if offset == self.hw:
            assert got == b""
            return
        i = next(k for k, b in enumerate(self.durable) if b.last >= offset)
        headers = split(got)
        expected = self.durable[i:i + len(headers)]
        assert got == b"".join(b.raw for b in expected)
        assert len(got) <= max(max_bytes, len(expected[0].raw))
        if i + len(headers) < len(self.durable):
            following = self.durable[i + len(headers)]
            fits = len(got) + len(following.raw) <= max_bytes
            # Stopping short of max_bytes only happens at a segment boundary.
            assert not fits or following.base in self._segment_bases()

    @rule(data=st.data())
    def read_out_of_range(self, data: st.DataObject) -> None:
        offset = data.draw(st.sampled_from([self.log_start - 1, self.hw + 1, self.hw + 100]))
        if offset < 0 and self.log_start == 0:
            offset = -1
        try:
            self.log.read(offset, 100)
        except KafkaError as exc:
            assert exc.code == ErrorCode.OFFSET_OUT_OF_RANGE
        else:
            raise AssertionError(f"read({offset}) should be out of range")

    @rule(timestamp=st.integers(0, 1100))
    def offset_for_timestamp(self, timestamp: int) -> None:
        expected = None
        for b in self.durable:
            if b.last >= self.log_start and b.max_ts >= timestamp:
                expected = (max(b.base, self.log_start), b.max_ts)
                break
        assert self.log.offset_for_timestamp(timestamp) == expected

    @precondition(lambda self: self.hw > 0)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        before = data.draw(st.integers(0, self.hw))
        self.log_start = max(self.log_start, before)
        assert self.log.delete_records(before) == self.log_start

    @rule()
    def reopen_clean(self) -> None:
        self.log.close()
        self.durable.extend(self.pending)
        self.pending = []
        self.log = self._open()

    @rule()
    def reopen_after_crash(self) -> None:
        self.log._shut()              # no flush, no checkpoint: the queue is lost
        self.pending = []
        self.log = self._open()

    @invariant()
    def offsets(self) -> None:
        if not hasattr(self, "log"):
            return
        assert self.log.high_watermark == self.hw
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.log_start
        assert self.log.size_bytes == sum(
            self.log.storage.size(f"t/0/{b:020d}.log") for b in self._segment_bases())


LogMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestLogModel = LogMachine.TestCase
