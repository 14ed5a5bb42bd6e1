"""bmq.metrics.count_records: records of whole batches, from the headers alone."""

from __future__ import annotations

from bmq.metrics import count_records
from tests.storage.batches import make_batch


def test_counts_every_whole_batch() -> None:
    one = make_batch([b"a", b"b", b"c"])
    two = make_batch([b"d"] * 7, base_offset=3)
    assert count_records(one) == 3
    assert count_records(one + two) == 10
    assert count_records(memoryview(one + two)) == 10
    assert count_records(bytearray(two)) == 7


def test_partial_and_empty_data() -> None:
    one = make_batch([b"a", b"b"])
    two = make_batch([b"x"] * 5)
    # A fetch may end in the middle of a batch: only whole batches count.
    assert count_records(one + two[: len(two) - 1]) == 2
    assert count_records(one[:30]) == 0
    assert count_records(b"") == 0
