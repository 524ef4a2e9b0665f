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


def stat_slots(const int64_t[:, :, :] start, const int64_t[:, :, :] length, const uint8_t[::1] data,
               const uint8_t[:, :] src_flags, const int64_t[::1] rows, const uint8_t[::1] keep,
               const uint8_t[::1] put, int64_t inline_max, int64_t ool_max,
               uint8_t[:, ::1] flags, uint8_t[:, ::1] sizes, uint64_t[:, :, ::1] slots, int64_t[:, :, ::1] ool):
    """pm/stat_slots.py StatSlots.block over row groups `rows`, in one pass (that numpy version
    stays the reference, tests/pm/test_encode_kernel.py): per chunk and stat (min, max) of
    length n, absent unless 1 <= n <= ool_max, inline when n <= inline_max (its bytes in the low
    bytes of the slot), else out of line (its length in `ool`). STAT_FLAGS keep `keep[code]` of
    the footer's flags and set `put[code]`, code = 3 * kind(min) + kind(max). Returns whether any
    stat is out of line."""
    cdef Py_ssize_t n = rows.shape[0], C = src_flags.shape[1], R = src_flags.shape[0]
    cdef Py_ssize_t size = data.shape[0], i, c, k, j
    cdef int64_t r, m, s
    cdef int kind[2]
    cdef uint64_t v
    cdef bint any_ool = False
    if (start.shape[0] != R or start.shape[1] != C or start.shape[2] != 2 or length.shape[0] != R
            or length.shape[1] != C or length.shape[2] != 2):
        raise PmError(f"stat_slots: stat references are not ({R}, {C}, 2)")
    if (flags.shape[0] != n or flags.shape[1] != C or sizes.shape[0] != n or sizes.shape[1] != C
            or slots.shape[0] != n or slots.shape[1] != C or slots.shape[2] != 2
            or ool.shape[0] != n or ool.shape[1] != C or ool.shape[2] != 2):
        raise PmError(f"stat_slots: outputs are not ({n}, {C}[, 2])")
    if keep.shape[0] != 9 or put.shape[0] != 9 or not 0 < inline_max <= 8 or ool_max < inline_max:
        raise PmError("stat_slots: bad flag tables or limits")
    for i in range(n):
        if rows[i] < 0 or rows[i] >= R:
            raise PmError(f"stat_slots: row group {rows[i]} of {R}")
        for c in range(C):
            for k in range(2):
                m = length[rows[i], c, k]
                s = start[rows[i], c, k]
                if 1 <= m <= ool_max and (s < 0 or s > size - m):
                    raise PmError("stat bytes reference outside their buffer")
    with nogil:
        for i in range(n):
            r = rows[i]
            for c in range(C):
                for k in range(2):
                    m = length[r, c, k]
                    kind[k] = 0
                    slots[i, c, k] = 0
                    ool[i, c, k] = 0
                    if 1 <= m <= inline_max:
                        kind[k] = 2
                        s = start[r, c, k]
                        v = 0
                        for j in range(m):
                            v |= (<uint64_t>data[s + j]) << (8 * j)
                        slots[i, c, k] = v
                    elif 1 <= m <= ool_max:
                        kind[k] = 1
                        ool[i, c, k] = m
                        any_ool = True
                j = 3 * kind[0] + kind[1]
                flags[i, c] = (src_flags[r, c] & keep[j]) | put[j]
                sizes[i, c] = <uint8_t>((length[r, c, 0] if kind[0] == 2 else 0)
                                        | ((length[r, c, 1] if kind[1] == 2 else 0) << 4))
    return any_ool
