"""The message browser's filter: the filter syntax of views (``bmq.readpath.filters``, e.g.
``region = 'eu' AND amount > 100`` over record headers) applied in the console to the records
it reads, by the same compiler and the same C evaluator the brokers run for views, so a filter
keeps here exactly the records a view with it would show. Reading through a view instead would
mean creating a topic for each look."""

from __future__ import annotations

from dataclasses import dataclass

from bmq.console.admin import ConsoleError
from bmq.console.messages import MAX_PAGE, Message, read_page
from bmq.protocol.record_codec import Record, encode_batch, iter_records
from bmq.readpath.filters import CompiledFilter, FilterError, apply_filter, compile_filter

# Records read for one filtered page at most: a filter matching nothing stops here rather
# than reading a whole partition.
MAX_SCANNED = 20_000


@dataclass(frozen=True)
class FilteredPage:
    messages: list[Message]
    next_offset: int       # where the next page's scan starts
    scanned: int           # records read to find them


def compile_expression(expression: str) -> CompiledFilter:
    try:
        return compile_filter(expression)
    except FilterError as error:
        raise ConsoleError(f"filter: {error}") from None


def matching(compiled: CompiledFilter, messages: list[Message]) -> list[Message]:
    """The ``messages`` the filter keeps: their headers go through the C evaluator as one
    batch (numbered 0..n-1, without keys and values, which filters never read)."""
    if not messages:
        return []
    batch, _ = encode_batch([Record(n, 0, None, None, m.headers)
                             for n, m in enumerate(messages)])
    kept = apply_filter(compiled, bytes(batch))
    return [messages[record.offset] for record in iter_records(kept)]


def read_matching(config: dict[str, str | int | float | bool], topic: str, partition: int,
                  start: int, end: int, count: int, expression: str) -> FilteredPage:
    """Up to ``count`` records of ``topic[partition]`` from ``start`` that ``expression``
    keeps, reading at most MAX_SCANNED records and never past ``end``."""
    compiled = compile_expression(expression)
    kept: list[Message] = []
    position = start
    while len(kept) < count and position < end and position - start < MAX_SCANNED:
        chunk = read_page(config, topic, partition, position, end, MAX_PAGE)
        if not chunk:
            break
        for message in matching(compiled, chunk):
            if len(kept) == count:
                return FilteredPage(kept, message.offset, message.offset - start)
            kept.append(message)
        position = chunk[-1].offset + 1
    return FilteredPage(kept, position, position - start)
