# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# Batch XXH64 kernels: one call hashes a whole column of values, GIL released.
# Inputs are trusted only as far as qdbpm.bloom checked them (shapes, buffer sizes); Arrow
# offsets are checked here, per value, because checking them in Python would be a second pass.

cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

# A byte to point at when a buffer is empty, so xxh64 never sees a NULL pointer.
cdef unsigned char _EMPTY[1]

ctypedef fused fixed_t:
    int32_t
    int64_t
    float
    double

ctypedef fused offset_t:
    int32_t
    int64_t


cdef inline bint _bit(const uint8_t* bits, int64_t i) noexcept nogil:
    return (bits[i >> 3] >> (i & 7)) & 1


def xxh64_buffer(const uint8_t[::1] data):
    """XXH64 (seed 0) of a contiguous byte buffer."""
    cdef const unsigned char* p = &data[0] if data.shape[0] > 0 else _EMPTY
    cdef size_t n = data.shape[0]
    cdef uint64_t h
    with nogil:
        h = xxh64(p, n)
    return h


def hash_fixed_width(const fixed_t[::1] values, const uint8_t[::1] validity, int64_t bit_offset,
                     uint64_t[::1] out, uint8_t[::1] valid):
    """out[i] = XXH64 of the PLAIN bytes of values[i]; valid[i] = 0 for a null (validity bit clear,
    when `validity` is non-empty) or a NaN, the values a filter never holds. -0.0 hashes as +0.0.
    Returns the number of invalid values. len(out) == len(valid) == len(values)."""
    cdef Py_ssize_t i, n = values.shape[0]
    cdef int64_t bad = 0
    cdef bint has_bits = validity.shape[0] > 0
    cdef const uint8_t* bits = &validity[0] if has_bits else NULL
    cdef uint32_t u32
    cdef uint64_t u64
    cdef float f
    cdef double d
    cdef bint ok
    with nogil:
        for i in range(n):
            ok = True
            if fixed_t is int32_t:
                out[i] = xxh64_u32(<uint32_t>values[i])
            elif fixed_t is int64_t:
                out[i] = xxh64_u64(<uint64_t>values[i])
            elif fixed_t is float:
                f = values[i]
                if f == 0:  # true for -0.0 too: both zeros hash as +0.0
                    f = 0
                memcpy(&u32, &f, 4)
                out[i] = xxh64_u32(u32)
                ok = f == f
            else:
                d = values[i]
                if d == 0:
                    d = 0
                memcpy(&u64, &d, 8)
                out[i] = xxh64_u64(u64)
                ok = d == d
            if has_bits and not _bit(bits, bit_offset + i):
                ok = False
                out[i] = 0
            valid[i] = ok
            bad += not ok
    return bad


def hash_binary(const offset_t[::1] offsets, const uint8_t[::1] data, const uint8_t[::1] validity,
                int64_t bit_offset, uint64_t[::1] out, uint8_t[::1] valid):
    """Arrow (large_)binary/string: value i is data[offsets[i]:offsets[i+1]] (len(offsets) ==
    len(out) + 1, already shifted by the array offset). Nulls get hash 0 and valid 0.
    Returns the number of nulls, or -1 - i when value i's offsets fall outside `data`."""
    cdef Py_ssize_t i, n = out.shape[0]
    cdef int64_t start, stop, bad = 0, size = data.shape[0], err = 0
    cdef bint has_bits = validity.shape[0] > 0
    cdef const uint8_t* bits = &validity[0] if has_bits else NULL
    cdef const unsigned char* base = &data[0] if size > 0 else _EMPTY
    with nogil:
        for i in range(n):
            start = offsets[i]
            stop = offsets[i + 1]
            if start < 0 or stop < start or stop > size:
                err = -1 - i
                break
            if has_bits and not _bit(bits, bit_offset + i):
                out[i] = 0
                valid[i] = 0
                bad += 1
            else:
                out[i] = xxh64(base + start, <size_t>(stop - start))
                valid[i] = 1
    return err if err else bad


def hash_fixed_bytes(const uint8_t[::1] data, Py_ssize_t width, const uint8_t[::1] validity,
                     int64_t bit_offset, uint64_t[::1] out, uint8_t[::1] valid):
    """FIXED_LEN_BYTE_ARRAY: value i is data[i*width:(i+1)*width] (len(data) >= len(out)*width).
    Nulls get hash 0 and valid 0. Returns the number of nulls."""
    cdef Py_ssize_t i, n = out.shape[0]
    cdef int64_t bad = 0
    cdef bint has_bits = validity.shape[0] > 0
    cdef const uint8_t* bits = &validity[0] if has_bits else NULL
    cdef const unsigned char* base = &data[0] if data.shape[0] > 0 else _EMPTY
    with nogil:
        for i in range(n):
            if has_bits and not _bit(bits, bit_offset + i):
                out[i] = 0
                valid[i] = 0
                bad += 1
            else:
                out[i] = xxh64(base + i * width, <size_t>width)
                valid[i] = 1
    return bad
