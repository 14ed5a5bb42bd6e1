"""Types of the C module bmq/spark/native/_recdecode.c (see its comment for the layout)."""

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

_Column = tuple[bytes | None, bytes, bytes]   # validity (None: no nulls), int32 offsets, data

def decode(bodies: Sequence[bytes | memoryview], meta: npt.NDArray[np.int64] | bytes,
           start_offset: int, end_offset: int, want_headers: bool, /
           ) -> tuple[int, bytes, bytes, bytes, _Column, _Column,
                      tuple[bytes | None, bytes, int, _Column, _Column] | None]: ...

