"""Arrow arrays of a decision (`Table.prune`, `Scan.row_groups`, `Scan.byte_ranges`) built from
their buffers. `pa.array` asks pyarrow's pandas shim about its input on every call, and the shim
imports pandas wherever it is installed: ~0.27 s on a process's first call, most of a one-shot
`qdbpm prune`. These tables hold numbers and names only, which need none of it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_NUMBERS = {pa.int32(): np.int32, pa.int64(): np.int64}


def numbers(values, t) -> pa.Array:
    """An int32 / int64 array of `values` (any sequence of integers, numpy or not)."""
    v = np.ascontiguousarray(np.asarray(values, _NUMBERS[t]).reshape(-1))
    return pa.Array.from_buffers(t, len(v), [None, pa.py_buffer(v)])


def booleans(values) -> pa.Array:
    """A bool array of `values` (truthy / falsy, numpy or not)."""
    v = np.asarray(values, bool).reshape(-1)
    return pa.Array.from_buffers(pa.bool_(), len(v), [None, pa.py_buffer(np.packbits(v, bitorder="little"))])


def strings(items) -> pa.Array:
    """A string array of `items` (Python str)."""
    data = [s.encode() for s in items]
    offsets = np.zeros(len(data) + 1, np.int64)
    np.cumsum([len(b) for b in data], out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:  # never for names: a guard, and large_string would differ
        raise OverflowError("over 2 GiB of names in one string array")
    return pa.Array.from_buffers(pa.string(), len(data), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                          pa.py_buffer(b"".join(data))])


def repeated(items, counts) -> pa.Array:
    """A string array of each of `items` repeated its count of `counts` times, in order."""
    return taken(strings(items), np.repeat(np.arange(len(items), dtype=np.int64), np.asarray(counts, np.int64)))


def taken(array, positions) -> pa.Array:
    """array[positions] (int64 numpy positions, each checked by Arrow's take)."""
    return array.take(numbers(positions, pa.int64()))
