# cython: language_level=3
"""The chunk walk without the GIL (`_split.pyx`), for the worker that splits chunks ahead
(table/_offload.pyx)."""

from libc.stdint cimport int64_t, uint8_t

cdef enum:
    PAGE_FIELDS = 13  # page_header's 12 slots, then where the page's decoded bytes start (-1: its body)


cdef struct SplitOut:
    int64_t* pages      # npages x PAGE_FIELDS, malloc'd
    Py_ssize_t npages
    Py_ssize_t cap
    uint8_t* decoded    # the Snappy pages decoded, back to back, 64-byte aligned, or NULL
    Py_ssize_t decoded_size  # the buffer's size (a kept buffer may be larger than needed)
    Py_ssize_t used     # the bytes the pages take


cdef int split_chunk_c(void* parser, const uint8_t* src, Py_ssize_t n, int64_t num_values, int codec,
                       SplitOut* out) noexcept nogil
cdef void split_free(SplitOut* out) noexcept nogil
cdef object split_result(SplitOut* out)
cdef int lookup_split_c(const SplitOut* out, const uint8_t* src, int ptype, int max_def, int width,
                        const void* known, Py_ssize_t nknown, const uint8_t* answers, uint8_t* keep,
                        Py_ssize_t nrows) noexcept nogil
