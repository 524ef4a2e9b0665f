# cython: language_level=3
"""What other kernels take from the Snappy decoder (`_split` decodes pages without the GIL)."""

from libc.stdint cimport int64_t, uint8_t


cdef int decode_block(const uint8_t* src, Py_ssize_t ip, Py_ssize_t n, uint8_t* dst, Py_ssize_t cap,
                      Py_ssize_t want, Py_ssize_t op, Py_ssize_t* out_op, Py_ssize_t* out_ip) noexcept nogil
cdef int64_t block_length(const uint8_t* src, Py_ssize_t n, Py_ssize_t* start) noexcept nogil
