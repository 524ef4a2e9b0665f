# cython: language_level=3
"""What other kernels take from the Thrift codec: a page header read without the GIL (`_split`)."""

from libc.stdint cimport int64_t, uint8_t


cdef object page_parser()
cdef Py_ssize_t read_page_header(void* parser, const uint8_t* buf, Py_ssize_t n, Py_ssize_t pos,
                                 int64_t* h) noexcept nogil
