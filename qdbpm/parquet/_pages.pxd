# cython: language_level=3
"""The page kernels callable without the GIL (`_pages.pyx`), for the offload worker's filter of
a split chunk (`_split.lookup_split_c`)."""

from libc.stdint cimport int64_t, uint8_t, uint64_t

from ._runs cimport Runs

cdef enum:
    VALUE_OVER = 16  # lookup_runs: a bit-packed value at or past the dictionary's size


cdef int lookup_runs(Runs* r, const uint8_t* lut, int64_t limit, uint8_t* out, uint64_t* bad) noexcept nogil
cdef Py_ssize_t mask_rows_c(const uint8_t* mask, Py_ssize_t n, int64_t* out, Py_ssize_t cap) noexcept nogil
cdef bint all_equal(Runs* r, uint64_t value) noexcept nogil
