# cython: language_level=3
"""What other kernels take from the CRC binding (pm/_batch checks each `_pm` of a table with it)."""

from libc.stdint cimport uint8_t, uint32_t


cdef bint crc_ready() noexcept nogil
cdef uint32_t crc32_raw(uint32_t init, const uint8_t* p, size_t n) noexcept nogil
