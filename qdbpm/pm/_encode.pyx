# cython: language_level=3, boundscheck=False, wraparound=False
"""Kernels of the block encoder (pm/encoder.py): lay each row group's fixed block part (NUM_ROWS,
then its chunk records with the derived stat fields) at its block's offset in one pass, and copy
out-of-line stat bytes range by range. They replace numpy passes that each made a 5 MB temporary
(a structured copy alone cost ~3 ms at 80,000 records). Every index and range is checked against
its buffer before anything is written; values are stored little-endian byte by byte, whatever the
host's byte order."""

from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset

from ..errors import PmError

# Byte offsets inside a 64-byte chunk record (pm/layout.py CHUNK_DTYPE).
cdef enum:
    REC = 64
    AT_STAT_FLAGS = 2
    AT_STAT_SIZES = 3
    AT_RESERVED = 4
    AT_MIN = 48
    AT_MAX = 56


cdef inline void put_u64(uint8_t* p, uint64_t v) noexcept nogil:
    cdef int k
    for k in range(8):
        p[k] = <uint8_t>(v >> (8 * k))


def fill_blocks(uint8_t[::1] out, const int64_t[::1] at, const int64_t[::1] rows,
                const uint64_t[::1] num_rows, const uint8_t[:, ::1] chunks,
                const uint8_t[:, :] flags, const uint8_t[:, :] sizes,
                const uint64_t[:, :] mins, const uint64_t[:, :] maxs):
    """For each i: at out[at[i]] the u64 num_rows[rows[i]], then the C records chunks[rows[i]]
    (C * 64 bytes) with STAT_FLAGS, STAT_SIZES, MIN_STAT, MAX_STAT from flags / sizes / mins /
    maxs[i, c] and RESERVED zeroed."""
    cdef Py_ssize_t n = at.shape[0], R = chunks.shape[0], width = chunks.shape[1]
    cdef Py_ssize_t C = width // REC, size = out.shape[0], i, c
    cdef int64_t r
    cdef uint8_t* rec
    if width % REC:
        raise PmError(f"fill_blocks: chunk rows of {width} bytes are not whole 64-byte records")
    if rows.shape[0] != n:
        raise PmError(f"fill_blocks: {rows.shape[0]} row groups for {n} offsets")
    if num_rows.shape[0] != R:
        raise PmError(f"fill_blocks: {num_rows.shape[0]} row counts for {R} row groups")
    if (flags.shape[0] != n or flags.shape[1] != C or sizes.shape[0] != n or sizes.shape[1] != C
            or mins.shape[0] != n or mins.shape[1] != C or maxs.shape[0] != n or maxs.shape[1] != C):
        raise PmError(f"fill_blocks: stat fields are not ({n}, {C})")
    for i in range(n):
        if rows[i] < 0 or rows[i] >= R:
            raise PmError(f"fill_blocks: row group {rows[i]} of {R}")
        if at[i] < 0 or at[i] > size - 8 - width:
            raise PmError(f"fill_blocks: block {i} at {at[i]} does not fit the {size}-byte buffer")
    with nogil:
        for i in range(n):
            r = rows[i]
            put_u64(&out[at[i]], num_rows[r])
            if width:
                memcpy(&out[at[i] + 8], &chunks[r, 0], width)
            for c in range(C):
                rec = &out[at[i] + 8 + c * REC]
                rec[AT_STAT_FLAGS] = flags[i, c]
                rec[AT_STAT_SIZES] = sizes[i, c]
                memset(rec + AT_RESERVED, 0, 4)
                put_u64(rec + AT_MIN, mins[i, c])
                put_u64(rec + AT_MAX, maxs[i, c])


def copy_ranges(uint8_t[::1] out, const int64_t[::1] dst, const uint8_t[::1] src,
                const int64_t[::1] src_start, const int64_t[::1] lengths):
    """out[dst[k] : dst[k] + lengths[k]] = src[src_start[k] : src_start[k] + lengths[k]]; zero or
    negative lengths copy nothing."""
    cdef Py_ssize_t n = lengths.shape[0], k, so = out.shape[0], ss = src.shape[0]
    if dst.shape[0] != n or src_start.shape[0] != n:
        raise PmError(f"copy_ranges: {dst.shape[0]} / {src_start.shape[0]} starts for {n} lengths")
    for k in range(n):
        if lengths[k] > 0 and (dst[k] < 0 or dst[k] > so - lengths[k]
                               or src_start[k] < 0 or src_start[k] > ss - lengths[k]):
            raise PmError(f"copy_ranges: range {k} ({lengths[k]} bytes from {src_start[k]} to "
                          f"{dst[k]}) is outside its buffers ({ss} / {so} bytes)")
    with nogil:
        for k in range(n):
            if lengths[k] > 0:
                memcpy(&out[dst[k]], &src[src_start[k]], lengths[k])
