"""The large arrays a read makes, in Arrow's memory pool instead of numpy's allocator.

numpy takes large arrays from glibc's malloc, which maps each one fresh and unmaps it when it is
freed: every read faults its pages in and zeroes them again. Reading one month of TPC-H lineitem
took ~2,400 page faults and ~30 % of its CPU that way on the 2-vCPU VM (benchmarks/compare_tpch.py).
Arrow's pool (mimalloc or jemalloc) keeps freed pages for the next allocation, and what a read
decodes ends as Arrow buffers anyway. `empty` is the one place that choice is made.
"""

from __future__ import annotations

import numpy as np

pa = None  # pyarrow, imported on the first pooled array: reading a `_pm` alone needs none of it
POOL_MIN = 64 * 1024  # bytes: smaller arrays come from numpy's allocator (its own cache serves them)


def empty(n, dtype) -> np.ndarray:
    """An uninitialised, writable 1-D array of `n` values of `dtype` (64-byte aligned when
    pooled)."""
    dt = np.dtype(dtype)
    nbytes = int(n) * dt.itemsize
    if nbytes < POOL_MIN:
        return np.empty(int(n), dt)
    global pa
    if pa is None:
        import pyarrow as pa
    return np.frombuffer(pa.allocate_buffer(nbytes), dt)


def take_checked(values, idx) -> np.ndarray:
    """values[idx] in a pooled array. Every index must already be known to lie in
    [0, len(values)) (the dictionary kernel `_pages.rle_hybrid` checks each against the size):
    numpy's own range check copies the output once more, so it is skipped here."""
    out = empty(len(idx), values.dtype)
    # indexes in range: "clip" never changes one (a compare each; "wrap" divides, ~20 % slower)
    np.take(values, idx, out=out, mode="clip")
    return out
