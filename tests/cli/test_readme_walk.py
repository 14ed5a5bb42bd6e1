"""The README read and run top to bottom, as a reader on a fresh checkout would: every example
block in document order, in one working directory, on one `bmq serve` data directory (and
`bmq local` for the cluster section). What the walk adapts (ports, the cleaner's back-off) and
what it cannot run here (each with its reason, parsed instead) is in tests/cli/readme_walk.py.

Timings on the 2-core VM shared with other work, 2026-11-29: the CI walk 52 s at a load
average of 2-4, 66-80 s at 10-16 (of which `bmq local`'s start and stop 10-12 s, the scheduled
record's 5 s wait, the compaction example 6-7 s). The slow walk took 125 s at a load of about 4:
the Spark snippet 22 s and the Parquet job 10 s (the snippet alone took 80 s at a load of 16),
the compaction example's own 40 s wait 41 s. 2026-11-30: the CI walk 59 s at a load of 3-9, of
which the Mirror section's second `bmq serve` and mirror 7 s (the mirror's first assignment
in its group takes about 1 s of it, its Python commands 0.3-0.8 s each).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.readme_walk import (
    NOT_RUN,
    SPARK,
    WAIT_FOR,
    Walk,
    logical_lines,
    terminal_commands,
)
from tests.cli.test_readme import _blocks


def _walk(tmp_path: Path, *, slow: bool) -> Walk:
    walk = Walk(tmp_path, slow=slow, shortcuts=not slow)
    walk.run()
    print("README blocks not run here, and why:")
    for step in walk.not_run():
        print(f"  README.md:{step.line}: {step.what}\n      {step.outcome}")
    print("seconds per block:", {line: round(s, 1) for line, s in walk.seconds.items()})
    assert not walk.failures, "\n\n".join(walk.failures)
    return walk


def test_the_readme_runs_in_order(tmp_path: Path) -> None:
    walk = _walk(tmp_path, slow=False)
    quick_start = walk.output_of("kcat -C -b localhost:9092 -t demo")
    assert "k1=hello (partition" in quick_start and "k2=world" in quick_start, quick_start
    assert "k3=from python" in quick_start, quick_start
    dead_letter = walk.output_of("bmq consume dlq.jobs")
    assert dead_letter.startswith("job-7 resize image 7 ") and "reason=rejected" in dead_letter
    committed = walk.output_of("bmq consume payments --from-beginning -e")
    everything = walk.output_of("bmq consume payments --from-beginning -e --isolation-level")
    assert committed.split("\n") == ["charged 42.00", "charged 7.50", ""], committed
    assert "charged 99.00" in everything, everything
    view = walk.output_of("kcat -C -b localhost:9092 -t paid-orders")
    assert "order 1" in view and "order 2" not in view, view
    assert "call back" in walk.output_of("kcat -C -b localhost:9092 -t reminders")
    compaction = next(b.line for b in _blocks() if b.lang == "python" and '"profiles"' in b.text)
    assert "90 live users" in walk.output_at(compaction)
    assert sorted(walk.output_of("bmq consume clicks").split()) == ["cart", "checkout", "home"]
    consumed = walk.output_of("bmq consume shipments --group billing")
    assert "k1=hello @0" in consumed and "k2=world @0" in consumed, consumed   # two partitions
    assert "batch-loader" in walk.output_of("bmq quota list")
    mirrored = walk.output_of("bmq consume invoices -b 127.0.0.1:9093 --from-beginning -n 3")
    assert mirrored.split("\n") == ["0 k1=one", "1 k2=two", "2 k3=three", ""], mirrored
    status = walk.output_of("bmq mirror status").splitlines()
    assert [row.split()[:6] for row in status[1:]] == [
        ["invoices", "0", "east", "3", "3", "0"]], status       # the lag: 0
    assert walk.output_of("bmq mirror promote invoices") == "invoices: promoted, writable\n"
    promoted = walk.output_of("bmq consume invoices -b 127.0.0.1:9093 --from-beginning -e")
    assert promoted.endswith("2 k3=three\n3 k4=four\n"), promoted
    assert any(step.outcome == SPARK for step in walk.steps)


@pytest.mark.slow
def test_the_readme_runs_in_order_with_spark(tmp_path: Path) -> None:
    """As a reader runs it: Spark too, and the compaction example's full wait."""
    walk = _walk(tmp_path, slow=True)
    assert not any(step.outcome == SPARK for step in walk.steps)
    assert (tmp_path / "lake" / "orders").is_dir() and (tmp_path / "lake" / "bmq").is_dir()


def test_every_reason_not_to_run_names_a_readme_command() -> None:
    """No stale entry in NOT_RUN: each one still matches a command of the README."""
    commands = [line for block in _blocks() if block.lang == "sh"
                for line in logical_lines(block.text)]
    for pattern, reason in NOT_RUN:
        assert any(pattern.search(c) for c in commands), f"{pattern.pattern}: {reason}"


def test_only_the_command_right_under_an_in_a_terminal_comment_is_marked() -> None:
    """Only the command right under ``# in ... terminal`` runs in another terminal."""
    text = ("bmq topic create t\n# in a second terminal\nbmq serve --listen 127.0.0.1:9093\\\n"
            "    --data-dir d\n# in a third terminal; wait for \"mirroring t-0\"\n"
            "bmq mirror run --topic t\n# a comment\nbmq consume t\n")
    assert terminal_commands(text) == [
        ("bmq topic create t", None),
        ("bmq serve --listen 127.0.0.1:9093 --data-dir d", "# in a second terminal"),
        ("bmq mirror run --topic t", '# in a third terminal; wait for "mirroring t-0"'),
        ("bmq consume t", None)]
    wait_for = WAIT_FOR.search(terminal_commands(text)[2][1] or "")
    assert wait_for is not None and wait_for.group(1) == "mirroring t-0"
