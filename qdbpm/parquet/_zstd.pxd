# cython: language_level=3
"""What other kernels take from the ZSTD binding (`_split` decodes ZSTD pages without the GIL)."""

from libc.stdint cimport uint8_t


cdef enum:
    # Pages claiming to decode to more than this many times their size are left to the Python
    # walk: a ZSTD frame can legitimately say far more (a run of one byte), so this bounds what
    # the worker allocates, not what is valid.
    ZSTD_MAX_RATIO = 1024


cdef bint zstd_ready() noexcept nogil
cdef int zstd_page(const uint8_t* src, Py_ssize_t n, uint8_t* dst, Py_ssize_t size) noexcept nogil
