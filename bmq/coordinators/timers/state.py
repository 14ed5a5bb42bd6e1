"""What a partition's timer keeps on storage besides its timer log: the state document (how far
delivery got, which runs hold the index, where a replay of the timer log starts), the
replay itself, and reading held records back from the timer log.

State documents are named by the owner's leader epoch (``state.<epoch>.json``) and the newest
epoch's wins, so a stale owner (fenced on the logs it writes) cannot change what the next owner
loads; the runs it made are never named in a newer document and are ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from bmq.coordinators.timers.records import Held, read_held
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import TRANSACTIONAL_FLAG, iter_batches
from bmq.storage import PartitionLog, Storage
from bmq.storage.producer_state import TXN_COMMIT, txn_kind

TIMER_LOG_PREFIX = "__bmq_timers"
_STATE_NAME = re.compile(r"state\.(\d{10})\.json")
_READ_BYTES = 4 << 20
_HELD_READ_BYTES = 1 << 20


def timer_log_name(topic: str) -> str:
    """The timer log of ``topic``'s partitions: a log beside them, never a topic itself."""
    return f"{TIMER_LOG_PREFIX}.{topic}"


def index_dir(topic: str, index: int) -> str:
    """Where a timer's runs and state live: under the reserved name, apart from any log."""
    return f"{TIMER_LOG_PREFIX}/{topic}/{index}"


@dataclass(slots=True)
class TimerState:
    """The durable part of a timer. ``due``/``offset``: the last delivered record (delivery
    goes in (due, offset) order); ``delivered``: how many were delivered, which is also the
    timer's producer sequence; ``accepted``: records indexed before ``spilled_through``.
    Entries of the timer log below ``spilled_through`` are in ``runs``, except the records of
    the transactions in ``txn_pending`` (producer id -> first offset), which a replay reads."""

    producer_id: int = -1
    due: int = -1
    offset: int = -1
    delivered: int = 0
    accepted: int = 0
    spilled_through: int = 0
    txn_pending: dict[int, int] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    pending: int = 0                 # for bmq topic describe (at the time of writing)

    @property
    def replay_from(self) -> int:
        return min([self.spilled_through, *self.txn_pending.values()])


def _epochs(storage: Storage, directory: str) -> list[int]:
    if not storage.exists(directory):
        return []
    names = (name.rsplit("/", 1)[-1] for name in storage.list(directory))
    return sorted(int(m.group(1)) for m in map(_STATE_NAME.fullmatch, names) if m)


def read_state(storage: Storage, directory: str, epoch: int) -> TimerState | None:
    """The newest state document; raises NOT_LEADER_OR_FOLLOWER if a newer owner wrote one."""
    epochs = _epochs(storage, directory)
    if not epochs:
        return None
    if epochs[-1] > epoch:
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                         f"timer state of epoch {epochs[-1]} is newer than {epoch}")
    doc = json.loads(storage.read_all(f"{directory}/state.{epochs[-1]:010d}.json"))
    doc["txn_pending"] = {int(k): v for k, v in doc.get("txn_pending", {}).items()}
    return TimerState(**doc)


def write_state(storage: Storage, directory: str, epoch: int, state: TimerState) -> None:
    storage.makedirs(directory)
    storage.write_atomic(f"{directory}/state.{epoch:010d}.json",
                         json.dumps(asdict(state), separators=(",", ":")).encode())


def has_state(storage: Storage, directory: str) -> bool:
    """Whether a timer ever ran here (its state document is written when it starts)."""
    return bool(_epochs(storage, directory))


def fenced(storage: Storage, directory: str, epoch: int) -> bool:
    """Whether a newer owner has taken the timer over (its state document exists)."""
    epochs = _epochs(storage, directory)
    return bool(epochs) and epochs[-1] > epoch


def drop_older_states(storage: Storage, directory: str, epoch: int) -> None:
    for older in _epochs(storage, directory):
        if older < epoch:
            storage.delete(f"{directory}/state.{older:010d}.json")


def read_held_at(log: PartitionLog, offsets: list[int]) -> dict[int, Held]:
    """The held records at ``offsets`` of the timer log ``log`` (their fields, for the
    entries loaded from runs). Worker thread."""
    wanted = sorted(set(offsets))
    found: dict[int, Held] = {}
    i = 0
    while i < len(wanted):
        data = memoryview(log.read(wanted[i], _HELD_READ_BYTES))
        end = wanted[i]
        for pos, header in iter_batches(data):
            end = header.next_offset
            if not header.is_control:
                for record in read_held(data[pos:pos + header.size], header):
                    found[record.offset] = record
        if end <= wanted[i]:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"timer log record {wanted[i]} is missing")
        while i < len(wanted) and wanted[i] < end:
            i += 1
    return found


def replay(log: PartitionLog, state: TimerState, index: Callable[[list[Held]], None],
           txn_open: dict[int, list[Held]]) -> None:
    """Read the timer log from ``state.replay_from``: records the runs do not hold are indexed
    (``index``), a transaction's records once its COMMIT marker is read (dropped at ABORT);
    records of transactions still open are left in ``txn_open``."""
    offset = max(state.replay_from, log.log_start_offset)
    while offset < log.high_watermark:
        data = memoryview(log.read(offset, _READ_BYTES))
        if not data:
            break
        for pos, header in iter_batches(data):
            offset = header.next_offset
            pid = header.producer_id
            batch = data[pos:pos + header.size]
            if header.is_control:
                held = txn_open.pop(pid, [])
                if txn_kind(header, batch[61:]) == TXN_COMMIT and held:
                    index(held)
                continue
            transactional = bool(header.attributes & TRANSACTIONAL_FLAG)
            if header.base_offset < state.spilled_through and not (
                    transactional and header.base_offset >= state.txn_pending.get(pid, 1 << 62)):
                continue            # in a run already
            if transactional:
                txn_open.setdefault(pid, []).extend(read_held(batch, header))
            else:
                index(read_held(batch, header))
