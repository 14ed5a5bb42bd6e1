"""What a Spark read task runs, for a batch query (``datasource``) and for a micro-batch of a
stream (``streaming``) alike: the Arrow record batches of one read range, read straight from
storage."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import InputPartition

from bmq.spark.planning import SourceOptions
from bmq.spark.ranges import DataLossError, ReadRange


class BMQInputPartition(InputPartition):
    """One read range (``value``: a ``ReadRange``, or None for an empty query)."""

    def __init__(self, value: ReadRange | None) -> None:
        super().__init__(value)


def read_partition(opts: SourceOptions, rng: ReadRange | None) -> Iterator[Any]:
    """A task of a batch or a micro-batch: the Arrow record batches of one read range."""
    if rng is None:
        return
    from bmq.spark.decode import read_range

    storage = opts.open_storage()
    try:
        yield from read_range(storage, rng, include_headers=opts.include_headers,
                              verify_crc=opts.verify_crc, record_filter=opts.record_filter)
    except FileNotFoundError as exc:
        if opts.fail_on_data_loss:
            raise DataLossError(
                f"{rng.path} was deleted after the query was planned (retention?); offsets "
                f"{rng.start_offset}-{rng.end_offset} of {rng.topic}-{rng.partition} are "
                f"lost. Set failOnDataLoss to false to skip them.") from exc
    finally:
        storage.close()
