# cython: language_level=3, boundscheck=False, wraparound=False
"""Kernel of the block encoder (pm/encoder.py) for blocks with out-of-line bytes: `ool_layout`
sizes each row group's out-of-line region, `fill_blocks` writes whole blocks in one pass per row
group: NUM_ROWS, the chunk records with their derived stat fields (STAT_FLAGS, STAT_SIZES, the
inline slots or out-of-line references), the out-of-line stat bytes and bloom bitsets, and the
zero padding. One pass keeps each footer-sized input hot once, where separate numpy passes and
kernels each missed cache on it (~7 ms of a 10,000 x 8 file). Every index and range is checked
before anything is written; values are stored little-endian byte by byte, whatever the host's
byte order. The reference is the per-row Python encoder in tests/pm/test_encode_kernel.py."""

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
    OOL_LENGTH_BITS = 16  # layout.OOL_LENGTH_BITS: reference = (offset << 16) | length
    ALIGN = 8  # layout.BLOCK_ALIGN


cdef extern from *:
    """
    #include <stdint.h>
    static inline uint64_t qdbpm_le64(uint64_t v) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        return __builtin_bswap64(v);
    #else
        return v;
    #endif
    }
    """
    uint64_t le64 "qdbpm_le64"(uint64_t v) nogil  # host <-> little-endian (its own inverse)

# LOW_BYTES[m]: the low m bytes of a u64 (m = 0..8).
cdef uint64_t LOW_BYTES[9]
LOW_BYTES[:] = [0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFF, 0xFFFFFFFFFFFF, 0xFFFFFFFFFFFFFF,
                0xFFFFFFFFFFFFFFFF]


cdef inline void put_u64(uint8_t* p, uint64_t v) noexcept nogil:
    v = le64(v)
    memcpy(p, &v, 8)


cdef inline int64_t align(int64_t n) noexcept nogil:
    return (n + (ALIGN - 1)) & ~(<int64_t>ALIGN - 1)


cdef inline int64_t region_size(const int64_t[:, :, :] length, const int64_t[:, :] bl_len, Py_ssize_t r,
                                Py_ssize_t i, Py_ssize_t C, int64_t inline_max, int64_t ool_max,
                                bint blooms, int64_t* brel) noexcept nogil:
    """Bytes of the out-of-line region of row group r (position i): per column its out-of-line
    min, then max, then, when it has a bitset, the pad to 8 and [i32 length][bitset]. `brel`
    (C entries, or NULL): where each column's bitset entry starts in the region, -1 for none."""
    cdef int64_t q = 0, m
    cdef Py_ssize_t c
    for c in range(C):
        m = length[r, c, 0]
        if inline_max < m <= ool_max:
            q += m
        m = length[r, c, 1]
        if inline_max < m <= ool_max:
            q += m
        if brel != NULL:
            brel[c] = -1
        if blooms and bl_len[i, c] >= 0:
            q = align(q)
            if brel != NULL:
                brel[c] = q
            q += 4 + bl_len[i, c]
    return q


cdef int check_common(const int64_t[:, :, :] length, const int64_t[::1] rows, const int64_t[:, :] bl_len,
                      Py_ssize_t R, Py_ssize_t C, int64_t inline_max, int64_t ool_max) except -1:
    cdef Py_ssize_t n = rows.shape[0], i
    if length.shape[0] != R or length.shape[1] != C or length.shape[2] != 2:
        raise PmError(f"encode kernel: stat lengths are not ({R}, {C}, 2)")
    if bl_len.shape[0] and (bl_len.shape[0] != n or bl_len.shape[1] != C):
        raise PmError(f"encode kernel: bloom lengths are not ({n}, {C})")
    if not 0 < inline_max <= 8 or not inline_max <= ool_max < (1 << OOL_LENGTH_BITS):
        raise PmError("encode kernel: bad stat length limits")
    for i in range(n):
        if rows[i] < 0 or rows[i] >= R:
            raise PmError(f"encode kernel: row group {rows[i]} of {R}")
    return 0


def ool_layout(const int64_t[:, :, :] length, const int64_t[::1] rows, const int64_t[:, :] bl_len,
               int64_t inline_max, int64_t ool_max, int64_t[::1] size, int64_t[:, ::1] bloom_rel):
    """size[i]: the out-of-line region's bytes of row group rows[i]; bloom_rel[i, c] (when
    bl_len has rows): where column c's [i32 length][bitset] starts in it, -1 for none.
    bl_len (len(rows), C): bitset lengths, -1 = none; a (0, 0) array when there are no blooms."""
    cdef Py_ssize_t n = rows.shape[0], R = length.shape[0], C = length.shape[1], i
    cdef bint blooms = bl_len.shape[0] != 0
    check_common(length, rows, bl_len, R, C, inline_max, ool_max)
    if size.shape[0] != n or (blooms and (bloom_rel.shape[0] != n or bloom_rel.shape[1] != C)):
        raise PmError(f"ool_layout: outputs are not ({n},) / ({n}, {C})")
    with nogil:
        for i in range(n):
            size[i] = region_size(length, bl_len, rows[i], i, C, inline_max, ool_max, blooms,
                                  &bloom_rel[i, 0] if blooms and C else NULL)


def fill_blocks(uint8_t[::1] out, const int64_t[::1] at, const int64_t[::1] rows,
                const uint64_t[::1] num_rows, const uint8_t[:, ::1] chunks,
                const int64_t[:, :, :] start, const int64_t[:, :, :] length, const uint8_t[::1] data,
                const uint8_t[::1] keep, const uint8_t[::1] put, int64_t inline_max, int64_t ool_max,
                const int64_t[:, :] bl_len, const int64_t[:, :] bl_start, const uint8_t[::1] bl_data):
    """All of `out`: for each i, at out[at[i]] (8-aligned, each after the previous block) the block of
    row group rows[i]: u64 num_rows, its C records from chunks[r] with the stat fields derived
    from its stat references (start / length into `data`), then its out-of-line region; zeros
    everywhere else. Per stat of length m: inline when 1 <= m <= inline_max (its bytes in the low
    bytes of the slot), out of line when m <= ool_max, else absent. STAT_FLAGS keep
    keep[code] of the record's flags and set put[code], code = 3 * kind(min) + kind(max), kind
    0 absent / 1 out of line / 2 inline. Bitsets: bl_len as in ool_layout, their bytes at
    bl_data[bl_start[r, c]:]."""
    cdef Py_ssize_t n = at.shape[0], R = chunks.shape[0], width = chunks.shape[1]
    cdef Py_ssize_t C = width // REC, size = out.shape[0], ds = data.shape[0], bs = bl_data.shape[0]
    cdef Py_ssize_t fixed = 8 + width, i, c, k, j
    cdef bint blooms = bl_len.shape[0] != 0
    cdef int64_t r, m, s, p, q, end, prev = 0, base
    cdef int kind[2]
    cdef uint64_t v
    cdef uint8_t* rec
    if width % REC:
        raise PmError(f"fill_blocks: chunk rows of {width} bytes are not whole 64-byte records")
    if rows.shape[0] != n:
        raise PmError(f"fill_blocks: {rows.shape[0]} row groups for {n} offsets")
    if num_rows.shape[0] != R:
        raise PmError(f"fill_blocks: {num_rows.shape[0]} row counts for {R} row groups")
    check_common(length, rows, bl_len, R, C, inline_max, ool_max)
    if start.shape[0] != R or start.shape[1] != C or start.shape[2] != 2:
        raise PmError(f"fill_blocks: stat starts are not ({R}, {C}, 2)")
    if blooms and (bl_start.shape[0] != R or bl_start.shape[1] != C):
        raise PmError(f"fill_blocks: bloom starts are not ({R}, {C})")
    if keep.shape[0] != 9 or put.shape[0] != 9:
        raise PmError("fill_blocks: bad flag tables")
    for i in range(n):
        r = rows[i]
        for c in range(C):
            for k in range(2):
                m = length[r, c, k]
                s = start[r, c, k]
                if 1 <= m <= ool_max and (s < 0 or s > ds - m):
                    raise PmError("stat bytes reference outside their buffer")
            if blooms and bl_len[i, c] >= 0 and (bl_start[r, c] < 0 or bl_start[r, c] > bs - bl_len[i, c]
                                                 or bl_len[i, c] > 0x7FFFFFFF):
                raise PmError(f"bloom bitset of row group {r} column {c} lies outside its buffer")
        end = at[i] + fixed + region_size(length, bl_len, r, i, C, inline_max, ool_max, blooms, NULL)
        if at[i] < prev or at[i] % ALIGN or end > size:
            raise PmError(f"fill_blocks: block {i} at {at[i]} does not fit the {size}-byte buffer "
                          f"after the previous block's end {prev}")
        prev = end
    with nogil:
        prev = 0
        for i in range(n):
            r = rows[i]
            p = at[i]
            memset(&out[prev], 0, p - prev)
            put_u64(&out[p], num_rows[r])
            if width:
                memcpy(&out[p + 8], &chunks[r, 0], width)
            base = p + fixed
            q = base
            for c in range(C):
                rec = &out[p + 8 + c * REC]
                for k in range(2):
                    m = length[r, c, k]
                    s = start[r, c, k]
                    kind[k] = 0
                    v = 0
                    if 1 <= m <= inline_max:
                        kind[k] = 2
                        if s <= ds - 8:  # one unaligned load, cut to the payload's m bytes
                            memcpy(&v, &data[s], 8)
                            v = le64(v) & LOW_BYTES[m]
                        else:
                            for j in range(m):
                                v |= (<uint64_t>data[s + j]) << (8 * j)
                    elif 1 <= m <= ool_max:
                        kind[k] = 1
                        v = ((<uint64_t>(q - base)) << OOL_LENGTH_BITS) | <uint64_t>m
                        memcpy(&out[q], &data[s], m)
                        q += m
                    put_u64(rec + AT_MIN + 8 * k, v)
                j = 3 * kind[0] + kind[1]
                rec[AT_STAT_FLAGS] = (rec[AT_STAT_FLAGS] & keep[j]) | put[j]
                rec[AT_STAT_SIZES] = <uint8_t>((length[r, c, 0] if kind[0] == 2 else 0)
                                               | ((length[r, c, 1] if kind[1] == 2 else 0) << 4))
                memset(rec + AT_RESERVED, 0, 4)
                if blooms and bl_len[i, c] >= 0:
                    m = align(q - base) + base
                    memset(&out[q], 0, m - q)
                    q = m
                    for k in range(4):  # i32 LENGTH
                        out[q + k] = <uint8_t>(bl_len[i, c] >> (8 * k))
                    memcpy(&out[q + 4], &bl_data[bl_start[r, c]], bl_len[i, c])
                    q += 4 + bl_len[i, c]
            prev = q  # the pad to the next block is zeroed with the gap before it
        memset(&out[prev], 0, size - prev)
