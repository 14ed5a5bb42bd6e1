"""Which batches the proxy's produce router answers REQUEST_TIMED_OUT unsent after one of their
flow was answered with an error its producer retries (``bmq.client.produce._Flow.refuses``):
those the producer sent after it, before it heard, never its retry nor a batch of another
epoch or producer."""

from __future__ import annotations

from bmq.client.produce import _Flow

PID, EPOCH = 7, 0


def _flow_timed_out_at(seq: int) -> _Flow:
    flow = _Flow()
    flow.failed = (PID, EPOCH, seq)
    return flow


def test_batches_after_a_timed_out_one_are_refused_until_its_retry() -> None:
    flow = _flow_timed_out_at(100)
    assert flow.refuses((PID, EPOCH, 104))
    assert flow.refuses((PID, EPOCH, 130))
    assert not flow.refuses((PID, EPOCH, 100))      # the retry: forwarded, the flow clear
    assert flow.failed is None
    assert not flow.refuses((PID, EPOCH, 104))


def test_a_retry_from_an_earlier_batch_clears_the_flow() -> None:
    flow = _flow_timed_out_at(100)
    assert not flow.refuses((PID, EPOCH, 96))
    assert flow.failed is None


def test_another_epoch_or_producer_is_not_refused() -> None:
    assert not _flow_timed_out_at(100).refuses((PID, EPOCH + 1, 0))
    assert not _flow_timed_out_at(100).refuses((PID + 1, EPOCH, 104))


def test_sequences_wrap() -> None:
    """Sequence numbers wrap from 2**31 - 1 to 0."""
    flow = _flow_timed_out_at(2**31 - 3)
    assert flow.refuses((PID, EPOCH, 2))
    assert not flow.refuses((PID, EPOCH, 2**31 - 3))


def test_a_flow_without_a_timed_out_batch_refuses_nothing() -> None:
    assert not _Flow().refuses((PID, EPOCH, 5))
