"""Acknowledged writes survive kill -9; idempotent producers see no duplicates or gaps
across broker restarts."""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict

import pytest

from .helpers import consume, create_topic, producer, wait_until

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 4


class BackgroundProducer(threading.Thread):
    """Produces key=i / value=v{i} continuously (or up to ``total``), recording delivery reports.

    All librdkafka callbacks run on this thread (poll/flush are only called here).
    """

    def __init__(self, bootstrap: str, topic: str, total: int | None = None,
                 chunk: int = 200, pause: float = 0.0, **conf):
        super().__init__(daemon=True)
        self.topic = topic
        self.total = total
        self.chunk = chunk
        self.pause = pause
        self.p = producer(bootstrap, **conf)
        self.acked: list[tuple[int, int, int]] = []  # (seq, partition, offset)
        self.failed: list[tuple[int, str]] = []
        self.sent = 0
        self.remaining_after_flush: int | None = None
        self.stop_flag = threading.Event()
        self.exc: BaseException | None = None

    def _on_delivery(self, err, msg):
        seq = int(msg.key())
        if err is not None:
            self.failed.append((seq, str(err)))
        else:
            self.acked.append((seq, msg.partition(), msg.offset()))

    def run(self):
        try:
            i = 0
            while not self.stop_flag.is_set() and (self.total is None or i < self.total):
                try:
                    self.p.produce(self.topic, key=str(i).encode(),
                                   value=f"v{i:09d}".encode(), on_delivery=self._on_delivery)
                except BufferError:
                    self.p.poll(0.01)
                    continue
                i += 1
                self.sent = i
                if i % self.chunk == 0:
                    self.p.poll(0)
                    if self.pause:
                        time.sleep(self.pause)
            self.remaining_after_flush = self.p.flush(60)
        except BaseException as exc:  # surfaced by the test
            self.exc = exc

    def finish(self, timeout: float = 90) -> None:
        self.stop_flag.set()
        self.join(timeout)
        assert not self.is_alive(), "producer thread did not finish"
        if self.exc is not None:
            raise self.exc


def _read_log(broker, topic, timeout=60):
    got = consume(broker.bootstrap, topic, range(PARTITIONS), timeout=timeout)
    log: dict[tuple[int, int], int] = {}
    for partition, msgs in got.items():
        offsets = [m.offset for m in msgs]
        assert offsets == list(range(len(msgs))), \
            f"partition {partition}: offsets not contiguous from 0 (first gaps: " \
            f"{[o for a, o in zip(range(len(offsets)), offsets, strict=False) if a != o][:5]})"
        for m in msgs:
            seq = int(m.key)
            assert m.value == f"v{seq:09d}".encode(), f"key {seq} has value {m.value!r}"
            log[(partition, m.offset)] = seq
    return log


def _check_acked_present(log, acked):
    counts = Counter(log.values())
    missing = [(s, p, o) for s, p, o in acked if log.get((p, o)) != s]
    assert not missing, (f"{len(missing)} acknowledged records are not at their acknowledged "
                         f"offset, e.g. (seq, partition, offset) {missing[:5]}; log has "
                         f"{[log.get((p, o)) for _, p, o in missing[:5]]} there")
    dupes = [s for s, _, _ in acked if counts[s] != 1]
    assert not dupes, f"acknowledged records stored more than once: {dupes[:10]}"
    by_partition = defaultdict(list)
    for s, p, o in acked:
        by_partition[p].append((o, s))
    for p, pairs in by_partition.items():
        seqs = [s for _, s in sorted(pairs)]
        assert seqs == sorted(seqs), f"partition {p}: acknowledged records out of order"


def test_kill_9_during_acks_all_production(broker, topic):
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    bg = BackgroundProducer(
        broker.bootstrap, topic, acks="all", linger_ms=2, enable_idempotence=False,
        message_send_max_retries=0, queue_buffering_max_messages=5000,
        message_timeout_ms=20000)
    bg.start()
    wait_until(lambda: len(bg.acked) >= 3000 or bg.exc, 60, message="3000 acks before kill")
    broker.kill()
    acked_at_kill = len(bg.acked)
    time.sleep(0.5)
    broker.start()
    wait_until(lambda: len(bg.acked) >= acked_at_kill + 1000 or bg.exc, 60,
               message="production resumes after restart")
    bg.finish()
    acked = list(bg.acked)
    print(f"acked before kill: {acked_at_kill}, acked in total: {len(acked)}, "
          f"failed: {len(bg.failed)}, sent: {bg.sent}")
    assert acked_at_kill >= 3000

    log = _read_log(broker, topic)
    _check_acked_present(log, acked)
    # Without retries every record was sent at most once.
    counts = Counter(log.values())
    assert max(counts.values()) == 1, "a record that was sent once is stored twice"
    # Records acknowledged after the restart were given fresh offsets past the recovered end.
    positions = [(p, o) for _, p, o in acked]
    assert len(positions) == len(set(positions)), "two acknowledged records share an offset"


def test_repeated_kill_9_cycles(broker, topic):
    """Three crash/recover cycles in a row while producing: recovery after a recovery keeps
    every acknowledged record exactly once, and offsets stay contiguous."""
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    bg = BackgroundProducer(
        broker.bootstrap, topic, acks="all", linger_ms=2, enable_idempotence=False,
        message_send_max_retries=0, queue_buffering_max_messages=5000,
        message_timeout_ms=20000, compression_type="gzip")
    bg.start()
    for cycle in range(1, 4):
        wait_until(lambda c=cycle: len(bg.acked) >= 2500 * c or bg.exc, 60,
                   message=f"acks before kill #{cycle}")
        broker.kill()
        time.sleep(0.3)
        broker.start()
    wait_until(lambda: len(bg.acked) >= 10_000 or bg.exc, 60, message="acks after last restart")
    bg.finish()
    print(f"acked {len(bg.acked)}, failed {len(bg.failed)}, sent {bg.sent}")
    log = _read_log(broker, topic)
    _check_acked_present(log, bg.acked)
    assert max(Counter(log.values()).values()) == 1


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_idempotent_producer_across_restart(broker, topic, how):
    total = 40_000
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    bg = BackgroundProducer(
        broker.bootstrap, topic, total=total, chunk=500, pause=0.04,
        enable_idempotence=True, linger_ms=5, message_timeout_ms=90000,
        queue_buffering_max_messages=20000)
    bg.start()
    wait_until(lambda: len(bg.acked) >= 6000 or bg.exc, 60, message="6000 acks before restart")
    acked_at_restart = len(bg.acked)
    assert acked_at_restart < total, "production finished before the restart; slow it down"
    if how == "sigterm":
        broker.restart()
    else:
        broker.kill()
        broker.start()
    bg.join(150)
    print(f"{how}: acked before restart {acked_at_restart}, total acked {len(bg.acked)}")
    assert not bg.is_alive()
    if bg.exc is not None:
        raise bg.exc
    assert bg.remaining_after_flush == 0, f"{bg.remaining_after_flush} records never delivered"
    assert not bg.failed, f"delivery failures: {bg.failed[:5]} (total {len(bg.failed)})"
    assert len(bg.acked) == total

    log = _read_log(broker, topic, timeout=90)
    _check_acked_present(log, bg.acked)
    counts = Counter(log.values())
    assert sorted(counts) == list(range(total)), \
        f"missing: {sorted(set(range(total)) - set(counts))[:10]}"
    assert set(counts.values()) == {1}, \
        f"duplicates: {[s for s, c in counts.items() if c > 1][:10]}"
    # Idempotence also preserves per-partition order.
    per_partition = defaultdict(list)
    for (p, _offset), seq in sorted(log.items()):
        per_partition[p].append(seq)
    for p, seqs in per_partition.items():
        assert seqs == sorted(seqs), f"partition {p} out of order"
