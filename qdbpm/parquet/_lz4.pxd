# cython: language_level=3
"""What other kernels take from the LZ4 decoder (`_split` decodes LZ4_RAW pages without the GIL)."""

from libc.stdint cimport uint8_t


cdef enum:
    LZ4_OK = 0
    LZ4_TRUNCATED = 1
    LZ4_LITERAL_OVER = 2
    LZ4_OUTPUT_OVER = 3
    LZ4_OFFSET_BAD = 4
    LZ4_SHORT = 5
    LZ4_MAX_RATIO = 256  # an LZ4 match grows 255 bytes a length byte: no block decodes to 256x its size


cdef int decode_block(const uint8_t* src, Py_ssize_t n, uint8_t* dst, Py_ssize_t cap,
                      Py_ssize_t* at) noexcept nogil
