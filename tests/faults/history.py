"""A history of operations, as Jepsen records one: each operation is *invoked* by a process and
*completes* as ``ok`` (it happened), ``fail`` (it certainly did not) or ``info`` (unknown: it may
have happened, e.g. a timed-out produce). Times are monotonic nanoseconds since the history began,
so an operation's real-time interval is [invoke, complete]. Thread-safe: many clients record into
one history."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Outcome = Literal["invoke", "ok", "fail", "info"]


@dataclass
class Op:
    """One operation: ``f`` names it (``send``, ``poll``, ``txn``, ``ack``, ...), ``value`` is
    what it was asked to do at invocation and what it did at completion."""

    index: int
    process: str
    f: str
    value: Any
    invoked_ns: int
    type: Outcome = "invoke"
    completed_ns: int | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class History:
    def __init__(self) -> None:
        self._start = time.monotonic_ns()
        self._lock = threading.Lock()
        self._ops: list[Op] = []
        self._index = itertools.count()

    def now_ns(self) -> int:
        return time.monotonic_ns() - self._start

    def invoke(self, process: str, f: str, value: Any = None) -> Op:
        op = Op(next(self._index), process, f, value, self.now_ns())
        with self._lock:
            self._ops.append(op)
        return op

    def _complete(self, op: Op, outcome: Outcome, value: Any, error: str | None) -> Op:
        op.completed_ns = self.now_ns()
        op.type = outcome
        if value is not None:
            op.value = value
        op.error = error
        return op

    def ok(self, op: Op, value: Any = None) -> Op:
        return self._complete(op, "ok", value, None)

    def fail(self, op: Op, error: str, value: Any = None) -> Op:
        return self._complete(op, "fail", value, error)

    def info(self, op: Op, error: str, value: Any = None) -> Op:
        return self._complete(op, "info", value, error)

    def event(self, process: str, f: str, value: Any = None) -> Op:
        """An instantaneous operation (a fault starting, a consumer's assignment)."""
        op = self.invoke(process, f, value)
        return self.ok(op)

    def ops(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops())

    def write_jsonl(self, path: Path) -> None:
        with open(path, "w") as out:
            for op in self.ops():
                out.write(json.dumps(asdict(op), default=str) + "\n")
