"""A progress bar on stderr while a phase runs, fed by counters the workers share.

Each worker writes its message count into its own slot of a shared array (see
``stats.Timeline``) about ten times a second; a thread here sums the slots and
redraws the bar. Phases bounded by time get a bar over their duration.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import threading
import time
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

REFRESH_S = 0.2


@contextlib.contextmanager
def phase_progress(enabled: bool, label: str, slots: int, total: int | None = None,
                   seconds: float | None = None, count_slots: list[int] | None = None,
                   ) -> Iterator[Any]:
    """Yields the shared counters (an int array with ``slots`` slots) for the workers.

    With ``total`` the bar counts messages; else, with ``seconds``, it runs over the duration
    and shows the message count beside it. ``count_slots`` picks the slots that count
    (default: all).
    """
    counters = mp.get_context("spawn").RawArray("q", slots)
    if not enabled:
        yield counters
        return
    chosen = count_slots if count_slots is not None else list(range(slots))
    by_count = total is not None
    columns: list[Any] = [TextColumn("[bold]{task.description}"), BarColumn()]
    count_column = MofNCompleteColumn() if by_count else TextColumn(
        "{task.fields[messages]:,} msgs")
    columns.append(count_column)
    columns += [TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TimeRemainingColumn()]
    progress = Progress(*columns, console=Console(stderr=True), transient=False)
    task = progress.add_task(label, total=total if by_count else (seconds or 1.0),
                             messages=0, rate="")
    done = threading.Event()
    started = time.monotonic()
    first_seen: list[float] = []  # when the first message was counted (workers start slowly)

    def refresh() -> None:
        while not done.wait(REFRESH_S):
            update()

    def update() -> None:
        count = sum(counters[i] for i in chosen)
        now = time.monotonic()
        elapsed = max(1e-9, now - started)
        if count and not first_seen:
            first_seen.append(now)
        running = now - first_seen[0] if first_seen else 0.0
        rate = f"{count / running:,.0f} msg/s" if running > 0.5 else ""
        if by_count:
            progress.update(task, completed=count, messages=count, rate=rate)
        else:
            progress.update(task, completed=min(elapsed, seconds or elapsed), messages=count,
                            rate=rate)

    thread = threading.Thread(target=refresh, name="bench-progress", daemon=True)
    with progress:
        thread.start()
        try:
            yield counters
        finally:
            done.set()
            thread.join()
            update()
