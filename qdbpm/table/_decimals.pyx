# cython: language_level=3
"""Kernel: integers widened to Arrow's decimal128 layout (`direct._array` is the wrapper).

A DECIMAL stored as INT32 / INT64 reads as pyarrow's decimal128: each value as a 16-byte
little-endian two's complement integer, its low 8 bytes the value and its high 8 its sign.
numpy writes that in three passes over strided memory (a cast, the low words, a shift into the
high words); this writes each pair once.
"""

cimport cython
from libc.stdint cimport int32_t, int64_t

ctypedef fused integer:
    int32_t
    int64_t


@cython.boundscheck(False)
@cython.wraparound(False)
def widen(const integer[::1] values, int64_t[::1] out):
    """out[2i], out[2i + 1] = values[i] and its sign (0 or -1); out holds exactly 2 x len(values)."""
    cdef Py_ssize_t i, n = values.shape[0]
    cdef int64_t v
    if out.shape[0] != 2 * n:
        raise ValueError(f"widen: {out.shape[0]} words for {n} values")
    with nogil:
        for i in range(n):
            v = values[i]
            out[2 * i] = v
            out[2 * i + 1] = -(<int64_t>(v < 0))
