# cython: language_level=3
"""Kernel: place fixed-size rows at given offsets of an output buffer (pm/encoder.py's blocks: each
row group's NUM_ROWS and chunk records at its block's offset), one memcpy per row instead of
three Python slice assignments. Every destination range is checked against the buffer first."""

from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcpy

from ..errors import PmError


def scatter(uint8_t[::1] out, const int64_t[::1] at, const uint8_t[:, ::1] rows):
    """out[at[i] : at[i] + width] = rows[i] for every i (width = rows.shape[1])."""
    cdef Py_ssize_t n = rows.shape[0], w = rows.shape[1], i, size = out.shape[0]
    if at.shape[0] != n:
        raise PmError(f"scatter: {at.shape[0]} offsets for {n} rows")
    for i in range(n):
        if at[i] < 0 or at[i] > size - w:
            raise PmError(f"scatter: row {i} at {at[i]} does not fit the {size}-byte buffer")
    for i in range(n):
        if w:
            memcpy(&out[at[i]], &rows[i, 0], w)
