# cython: language_level=3
"""Kernel: the bodies of decompressed Parquet data pages to flat arrays (`pages` is the wrapper).

Loops numpy cannot vectorise: the RLE / bit-packed hybrid (definition levels and dictionary
indices; all of them, only those picked, `rle_pick`, or only whether all are one value, `rle_all`), the index of a PLAIN BYTE_ARRAY run
(4-byte little-endian lengths between the values), and the take of chosen byte strings into
Arrow's offsets and data buffers. Every read is checked against the end of its buffer; a
malformed run raises ParquetFormatError naming the byte, never reads past
(tests/test_kernel_bounds.py).
"""

cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from ._runs cimport (RUN_OK, Runs, end_packed, load8, load_le, next_run, run_error, start_runs,
                     value_error)

import numpy as np

from ..errors import ParquetFormatError
from .. import buffers


def rle_hybrid(const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t end, int bit_width, Py_ssize_t count,
               int32_t[::1] out, int64_t limit):
    """Decode `count` values of the RLE / bit-packed hybrid in buf[pos:end] into out[:count]; each
    must be < `limit` (the dictionary size, or max level + 1). Returns the end of the last run read."""
    cdef Runs r
    cdef Py_ssize_t k, fast, room, at
    cdef uint64_t v, bits, top
    cdef int code
    start_runs(&r, buf, pos, end, bit_width, count, out.shape[0])
    with nogil:
        while r.n < r.count:
            code = next_run(&r, limit)
            if code != RUN_OK:
                run_error(&r, code, limit)
            if not r.packed:
                for k in range(r.take):
                    out[r.n + k] = <int32_t>r.value
                r.n += r.take
                continue
            if not r.bit_width:  # every value 0, no byte to read (r.pos may be the buffer's end)
                for k in range(r.take):
                    out[r.n + k] = 0
                end_packed(&r)
                continue
            # Values whose 8-byte load ends inside the buffer take the plain loop (no length
            # test, the limit checked once on the run's largest value); the rest load_le.
            room = r.end - r.pos - 8
            fast = 0 if room < 0 else min(r.take, (room * 8 + 7) // r.bit_width + 1)
            top = 0
            for k in range(fast):
                bits = <uint64_t>k * r.bit_width
                v = (load8(r.p + r.pos + (bits >> 3)) >> (bits & 7)) & r.mask
                out[r.n + k] = <int32_t>v
                top = v if v > top else top
            for k in range(fast, r.take):
                bits = <uint64_t>k * r.bit_width
                at = r.pos + <Py_ssize_t>(bits >> 3)
                v = (load_le(r.p + at, r.end - at) >> (bits & 7)) & r.mask
                out[r.n + k] = <int32_t>v
                top = v if v > top else top
            if top >= <uint64_t>limit:
                for k in range(r.take):  # name the first value over the limit
                    v = <uint32_t>out[r.n + k]
                    if v >= <uint64_t>limit:
                        value_error(&r, v, limit)
            end_packed(&r)
    return r.pos


def rle_pick(const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t end, int bit_width, Py_ssize_t count,
             const int64_t[::1] picks, int32_t[::1] out, int64_t limit):
    """out[j] = value picks[j] of the first `count` values of the RLE / bit-packed hybrid in
    buf[pos:end] (picks ascending, each in [0, count)); each value read must be < `limit`. A
    gather of a page's few rows: every run is walked and its header checked, only the values
    picked are read (a bit-packed value is found from its position). Returns the end of the last
    run read."""
    cdef Runs r
    cdef Py_ssize_t j = 0, m = picks.shape[0], at
    cdef int64_t want
    cdef uint64_t v, bits
    cdef int code
    if m > out.shape[0]:
        raise ParquetFormatError("RLE/bit-packed run: bounds outside the page")
    start_runs(&r, buf, pos, end, bit_width, count, count)
    with nogil:
        while r.n < r.count and j < m:
            code = next_run(&r, limit)
            if code != RUN_OK:
                run_error(&r, code, limit)
            while j < m and picks[j] < r.n + r.take:
                want = picks[j]
                if want < r.n or (j and want <= picks[j - 1]):  # not ascending: never read before the run
                    with gil:
                        raise ParquetFormatError(f"RLE/bit-packed picks: {want} after {picks[j - 1] if j else -1}")
                if r.packed:
                    bits = <uint64_t>(want - r.n) * r.bit_width
                    at = r.pos + <Py_ssize_t>(bits >> 3)
                    v = (load_le(r.p + at, r.end - at) >> (bits & 7)) & r.mask
                    if v >= <uint64_t>limit:
                        value_error(&r, v, limit)
                    out[j] = <int32_t>v
                else:
                    out[j] = <int32_t>r.value
                j += 1
            if r.packed:
                end_packed(&r)
            else:
                r.n += r.take
    if j < m:
        raise ParquetFormatError(f"RLE/bit-packed picks: value {picks[j]} is not below {r.n} (of {count})")
    return r.pos


def byte_array_index(const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count,
                     int64_t[::1] starts, int32_t[::1] lens):
    """Index `count` PLAIN BYTE_ARRAY values in buf[pos:end]: each value's start and length.
    Returns the end of the last value."""
    cdef Py_ssize_t i
    cdef uint32_t ln
    if end > buf.shape[0] or pos < 0 or pos > end or count > starts.shape[0] or count > lens.shape[0]:
        raise ParquetFormatError("PLAIN BYTE_ARRAY values: bounds outside the page")
    with nogil:
        for i in range(count):
            if end - pos < 4:
                with gil:
                    raise ParquetFormatError(f"PLAIN BYTE_ARRAY value {i} of {count}: length truncated at byte {pos}")
            memcpy(&ln, &buf[pos], 4)
            pos += 4
            if ln > <uint64_t>(end - pos) or ln > 0x7FFFFFFF:
                with gil:
                    raise ParquetFormatError(f"PLAIN BYTE_ARRAY value {i} of {count}: length {ln} at byte {pos - 4} "
                                             f"runs past the page ({end - pos} bytes left)")
            starts[i] = pos
            lens[i] = <int32_t>ln
            pos += ln
    return pos


def take_bytes(const uint8_t[::1] buf, const int64_t[::1] starts, const int32_t[::1] lens, picks):
    """The values `picks` (an int32 / int64 array of indexes into starts / lens, -1 for a null and
    an empty value; None: every value in order) of an indexed byte-array run in `buf`, laid out
    as Arrow does: (offsets int64 of len(picks) + 1, data uint8). Spans and indexes are checked."""
    cdef Py_ssize_t m = starts.shape[0], n, k
    cdef int64_t j, total = 0, s, ln
    cdef const int64_t[::1] p64
    cdef const int32_t[::1] p32
    cdef int wide = 0
    if lens.shape[0] != m:
        raise ParquetFormatError("take_bytes: starts and lengths differ in length")
    for k in range(m):
        if lens[k] < 0 or starts[k] < 0 or starts[k] + lens[k] > buf.shape[0]:
            raise ParquetFormatError(f"take_bytes: value {k} spans outside its page")
    if picks is None:
        n = m
    elif picks.dtype == np.int64:
        p64 = picks
        n = p64.shape[0]
        wide = 1
    else:
        p32 = picks
        n = p32.shape[0]
        wide = 2
    a_off = buffers.empty(n + 1, np.int64)
    cdef int64_t[::1] off = a_off
    off[0] = 0
    for k in range(n):
        j = k if wide == 0 else (p64[k] if wide == 1 else p32[k])
        if j < -1 or j >= m:
            raise ParquetFormatError(f"take_bytes: value index {j} outside 0..{m - 1}")
        if j >= 0:
            total += lens[j]
        off[k + 1] = total
    a_data = buffers.empty(total, np.uint8)
    if total == 0:
        return a_off, a_data
    cdef uint8_t[::1] data = a_data
    with nogil:
        for k in range(n):
            j = k if wide == 0 else (p64[k] if wide == 1 else p32[k])
            if j >= 0:
                ln = lens[j]
                if ln:
                    memcpy(&data[off[k]], &buf[starts[j]], ln)
    return a_off, a_data


cdef extern from *:
    """
    /* Groups of 8 bit-packed values of width W (1..8) looked up in a 256-entry table, the 8
       answers ANDed into 8 output bytes; W a constant in each copy, so every shift is one. A
       group whose 8 input bytes would pass `end`, or that holds a value >= limit, stops the walk
       unwritten: the caller takes the rest one value at a time and names such a value. Returns
       the values done (a multiple of 8). */
    static inline __attribute__((always_inline)) Py_ssize_t qdbpm_lut_groups(
            const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t take, const int W,
            const uint8_t* tab, uint64_t limit, uint8_t* out) {
        const uint64_t mask = (((uint64_t)1) << W) - 1;
        Py_ssize_t k = 0;
        for (; k + 8 <= take; k += 8) {
            Py_ssize_t at = pos + (k >> 3) * W;
            if (end - at < 8) break;
            uint64_t w, acc = 0, word;
            uint64_t over = 0;
            memcpy(&w, p + at, 8);
            for (int j = 0; j < 8; j++) {
                uint64_t v = (w >> (j * W)) & mask;
                over |= (uint64_t)(v >= limit);
                acc |= ((uint64_t)tab[v]) << (8 * j);
            }
            if (over) break;
            memcpy(&word, out + k, 8);
            word &= acc;
            memcpy(out + k, &word, 8);
        }
        return k;
    }
    /* one copy of a group kernel per constant width */
    #define QDBPM_WIDTH(w, call) case w: return call;
    #define QDBPM_WIDTHS_1_6(F, ...) QDBPM_WIDTH(1, F(1, __VA_ARGS__)) QDBPM_WIDTH(2, F(2, __VA_ARGS__)) \
        QDBPM_WIDTH(3, F(3, __VA_ARGS__)) QDBPM_WIDTH(4, F(4, __VA_ARGS__)) QDBPM_WIDTH(5, F(5, __VA_ARGS__)) \
        QDBPM_WIDTH(6, F(6, __VA_ARGS__))
    #define QDBPM_LUT_GROUPS(w, ...) qdbpm_lut_groups(p, pos, end, take, w, tab, limit, out)
    static Py_ssize_t qdbpm_lut_packed(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t take,
                                       int width, const uint8_t* tab, uint64_t limit, uint8_t* out) {
        switch (width) {
            QDBPM_WIDTHS_1_6(QDBPM_LUT_GROUPS, 0) QDBPM_WIDTH(7, QDBPM_LUT_GROUPS(7)) QDBPM_WIDTH(8, QDBPM_LUT_GROUPS(8))
        }
        return 0;
    }
    /* Widths 1..6: two values at once. pairs[a | b << W] holds tab[a] and tab[b] in its low two
       bytes and, in bit 16, whether a or b is >= limit; a group of 8 values is 4 lookups. */
    static void qdbpm_pair_table(int W, const uint8_t* tab, uint64_t limit, uint32_t* pairs) {
        uint32_t n = (uint32_t)1 << W;
        for (uint32_t b = 0; b < n; b++)
            for (uint32_t a = 0; a < n; a++)
                pairs[a | (b << W)] = (uint32_t)tab[a] | ((uint32_t)tab[b] << 8)
                                      | ((uint32_t)(a >= limit || b >= limit) << 16);
    }
    static inline __attribute__((always_inline)) Py_ssize_t qdbpm_pair_groups(
            const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t take, const int W,
            const uint32_t* pairs, uint8_t* out) {
        const uint64_t mask = (((uint64_t)1) << (2 * W)) - 1;
        Py_ssize_t k = 0;
        for (; k + 8 <= take; k += 8) {
            Py_ssize_t at = pos + (k >> 3) * W;
            if (end - at < 8) break;
            uint64_t w, acc = 0, word;
            uint32_t over = 0;
            memcpy(&w, p + at, 8);
            for (int j = 0; j < 4; j++) {
                uint32_t e = pairs[(w >> (2 * j * W)) & mask];
                over |= e;
                acc |= ((uint64_t)(e & 0xFFFF)) << (16 * j);
            }
            if (over >> 16) break;
            memcpy(&word, out + k, 8);
            word &= acc;
            memcpy(out + k, &word, 8);
        }
        return k;
    }
    #define QDBPM_PAIR_GROUPS(w, ...) qdbpm_pair_groups(p, pos, end, take, w, pairs, out)
    static Py_ssize_t qdbpm_lut_pairs(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t take,
                                      int width, const uint32_t* pairs, uint8_t* out) {
        switch (width) { QDBPM_WIDTHS_1_6(QDBPM_PAIR_GROUPS, 0) }
        return 0;
    }
    """
    Py_ssize_t qdbpm_lut_packed(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t take, int width,
                                const uint8_t* tab, uint64_t limit, uint8_t* out) noexcept nogil
    void qdbpm_pair_table(int W, const uint8_t* tab, uint64_t limit, uint32_t* pairs) noexcept nogil
    Py_ssize_t qdbpm_lut_pairs(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t take, int width,
                               const uint32_t* pairs, uint8_t* out) noexcept nogil


cdef Py_ssize_t mask_rows_c(const uint8_t* mask, Py_ssize_t n, int64_t* out, Py_ssize_t cap) noexcept nogil:
    """mask_rows without the GIL: the rows into out (cap + 8 values), or -1 past cap rows."""
    cdef Py_ssize_t i = 0, j = 0, b
    cdef uint64_t w
    while i + 8 <= n and j <= cap:
        w = load8(mask + i)
        if w:
            for b in range(8):
                out[j] = i + b
                j += ((w >> (8 * b)) & 0xFF) != 0
        i += 8
    while i < n and j <= cap:
        out[j] = i
        j += mask[i] != 0
        i += 1
    return -1 if i < n or j > cap else j


def mask_rows(const uint8_t[::1] mask, int64_t[::1] out):
    """np.flatnonzero of a filter pass's keep mask into out[:k]; returns k. A word per step, a zero
    word skipped, a nonzero one's 8 positions written without a branch each (each written, the
    next over it unless its byte is nonzero). `out` holds k + 8 values: len(mask) + 8 always do."""
    cdef Py_ssize_t cap = out.shape[0] - 8, j
    if cap < 0:
        raise ParquetFormatError("mask_rows: an output of fewer than 8 values")  # never: a guard
    with nogil:
        j = mask_rows_c(&mask[0] if mask.shape[0] else NULL, mask.shape[0], &out[0], cap)
    if j < 0:
        raise ParquetFormatError(f"mask_rows: more than {cap} rows kept")  # never: the caller counted
    return j


cdef int lookup_runs(Runs* r, const uint8_t* lut, int64_t limit, uint8_t* out, uint64_t* bad) noexcept nogil:
    """rle_lookup_and's walk over the started runs `r` (lut: `limit` entries): out[k] &= lut[v_k]
    for its r.count values. RUN_OK, a run's error code (`r` names the run), or VALUE_OVER with
    the value in bad[0]. Callable without the GIL (the offload worker's filter, `_split`)."""
    cdef Py_ssize_t k, at
    cdef uint64_t v, bits
    cdef int code
    cdef int bit_width = r.bit_width
    cdef uint8_t tab[256]  # lut, then 0 up to 255: a value's entry read before its check is known
    cdef uint32_t pairs[4096]  # widths up to 6 on many values: two values per lookup (qdbpm_lut_pairs)
    cdef bint paired = 1 <= bit_width <= 6 and r.count - r.n >= (<Py_ssize_t>2 << (2 * bit_width))
    memset(tab, 0, 256)
    if limit:
        memcpy(tab, lut, limit if limit < 256 else 256)
    if paired:
        qdbpm_pair_table(bit_width, tab, <uint64_t>limit, pairs)
    while r.n < r.count:
        code = next_run(r, limit)
        if code != RUN_OK:
            return code
        if not r.packed:
            if not lut[r.value]:
                memset(out + r.n, 0, r.take)
            r.n += r.take
            continue
        k = 0
        if paired:
            k = qdbpm_lut_pairs(r.p, r.pos, r.end, r.take, bit_width, pairs, out + r.n)
        elif 1 <= bit_width <= 8:
            # a group of 8 values is bit_width bytes: one load, the 8 answers gathered into
            # one word, one read-modify-write of the 8 output bytes (qdbpm_lut_packed); a
            # group holding a value >= limit is left to the loop below, which names it
            k = qdbpm_lut_packed(r.p, r.pos, r.end, r.take, bit_width, tab, <uint64_t>limit, out + r.n)
        while k < r.take:
            bits = <uint64_t>k * bit_width
            at = r.pos + <Py_ssize_t>(bits >> 3)
            if r.end - at >= 8:
                v = (load8(r.p + at) >> (bits & 7)) & r.mask
            else:
                v = (load_le(r.p + at, r.end - at) >> (bits & 7)) & r.mask
            if v >= <uint64_t>limit:  # checked before the lookup: lut holds `limit` entries
                bad[0] = v
                return VALUE_OVER
            out[r.n + k] &= lut[v]
            k += 1
        end_packed(r)
    return RUN_OK


def rle_lookup_and(const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t end, int bit_width, Py_ssize_t count,
                   const uint8_t[::1] lut, uint8_t[::1] out, int64_t limit):
    """out[k] &= lut[v_k] for the `count` values v_k of the RLE / bit-packed hybrid in
    buf[pos:end] (a filter's answers, 0 / 1: an RLE run clears its rows where its value's
    entry is 0): `rle_hybrid` and a lookup in one pass, no index array. Every run is checked
    as `rle_hybrid` checks it, each value against `limit` (the dictionary's size, at most
    len(lut)). Returns the end of the last run read."""
    cdef Runs r
    cdef int code
    cdef uint64_t bad = 0
    if limit > lut.shape[0] or limit < 0:
        raise ParquetFormatError("RLE/bit-packed run: bounds outside the page")
    start_runs(&r, buf, pos, end, bit_width, count, out.shape[0])
    with nogil:
        code = lookup_runs(&r, &lut[0] if lut.shape[0] else NULL, limit, &out[0] if out.shape[0] else NULL, &bad)
    if code == VALUE_OVER:
        value_error(&r, bad, limit)
    elif code != RUN_OK:
        run_error(&r, code, limit)
    return r.pos


cdef bint all_equal(Runs* r, uint64_t value) noexcept nogil:
    cdef Py_ssize_t k, at
    cdef uint64_t bits
    while r.n < r.count:
        if next_run(r, <int64_t>value + 1) != RUN_OK:
            return False
        if not r.packed:
            if r.value != value:
                return False
            r.n += r.take
            continue
        for k in range(r.take):
            bits = <uint64_t>k * r.bit_width
            at = r.pos + <Py_ssize_t>(bits >> 3)
            if ((load_le(r.p + at, r.end - at) >> (bits & 7)) & r.mask) != value:
                return False
        end_packed(r)
    return True


def rle_all(const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t end, int bit_width, Py_ssize_t count,
            uint64_t value):
    """Whether the first `count` values of the RLE / bit-packed hybrid in buf[pos:end] are all
    `value`, read without storing them: a page's definition levels when every value is present
    (no level array then). False for anything else, a malformed run included: the caller then
    decodes the runs with `rle_hybrid`, whose checks and errors decide."""
    cdef Runs r
    cdef bint same
    if count < 0:
        return False
    try:
        start_runs(&r, buf, pos, end, bit_width, count, count)
    except ParquetFormatError:  # a width or bounds rle_hybrid refuses: it decides
        return False
    with nogil:
        same = all_equal(&r, value)
    return same
