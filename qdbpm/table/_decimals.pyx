# cython: language_level=3
"""Kernel: integers widened to Arrow's decimal128 layout (`build.array` and `build.kept_array`
are the wrappers).

A DECIMAL stored as INT32 / INT64 reads as pyarrow's decimal128: each value as a 16-byte
little-endian two's complement integer, its low 8 bytes the value and its high 8 its sign.
numpy writes that in three passes over strided memory (a cast, the low words, a shift into the
high words); this writes each pair once, and `take_widen` gathers the rows a filter kept as it
writes them.
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


ctypedef fused index:
    int32_t
    int64_t


@cython.boundscheck(False)
@cython.wraparound(False)
def take_widen(const integer[::1] values, const index[::1] picks, int64_t[::1] out):
    """`widen` of values[picks] in one pass, nothing in between: out[2j], out[2j + 1] =
    values[picks[j]] and its sign. Every pick is checked against len(values) (ValueError)."""
    cdef Py_ssize_t j, n = picks.shape[0], m = values.shape[0]
    cdef int64_t v, k
    cdef bint bad = False
    if out.shape[0] != 2 * n:
        raise ValueError(f"take_widen: {out.shape[0]} words for {n} values")
    with nogil:
        for j in range(n):
            k = picks[j]
            if k < 0 or k >= m:
                bad = True
                break
            v = values[k]
            out[2 * j] = v
            out[2 * j + 1] = -(<int64_t>(v < 0))
    if bad:
        raise ValueError(f"take_widen: a pick outside 0..{m - 1}")
