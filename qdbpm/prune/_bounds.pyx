# cython: language_level=3
"""Kernel: prune.stats.chunk_stats for fixed-width columns, one pass over chunk records read in
place (the `_pm` bytes of a batch, by record address) instead of a gathered copy and ~20 numpy
passes; its outputs come from Arrow's pool (qdbpm/buffers.py).

chunk_stats (numpy) is the reference: tests/prune/test_bounds_kernel.py holds every output of
this kernel, bit for bit, to it on random records (any flags, sizes and slot bits). Every record
address is checked against the buffer before a byte is read.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy
from libc.math cimport isnan

import numpy as np

from .. import buffers
from ..errors import CorruptFileError

cdef enum:
    CHUNK_SIZE = 64
    AT_FLAGS = 2  # layout.CHUNK_AT
    AT_SIZES = 3
    AT_NUM_VALUES = 8
    AT_NULL_COUNT = 32
    AT_MIN = 48
    AT_MAX = 56
    MIN_PRESENT = 1
    MIN_INLINED = 2
    MIN_EXACT = 4
    MAX_PRESENT = 8
    MAX_INLINED = 16
    MAX_EXACT = 32
    NULL_COUNT_PRESENT = 128
    PT_BOOLEAN = 0
    PT_INT32 = 1
    PT_INT64 = 2
    PT_FLOAT = 4
    PT_DOUBLE = 5
    # How values are read (chunk_stats' kinds): INT and UINT differ for INT32 only (int32 / uint32).
    M_INT = 0
    M_UINT = 1
    M_FLOAT = 2
    M_ANYSIGN = 3

MODE_INT, MODE_UINT, MODE_FLOAT, MODE_ANYSIGN = M_INT, M_UINT, M_FLOAT, M_ANYSIGN
CONSTANTS = {"CHUNK_SIZE": CHUNK_SIZE, "stat_flags": AT_FLAGS, "stat_sizes": AT_SIZES,
             "num_values": AT_NUM_VALUES, "null_count": AT_NULL_COUNT, "min_stat": AT_MIN, "max_stat": AT_MAX,
             "flags": (MIN_PRESENT, MIN_INLINED, MIN_EXACT, MAX_PRESENT, MAX_INLINED, MAX_EXACT,
                       NULL_COUNT_PRESENT),
             "types": (PT_BOOLEAN, PT_INT32, PT_INT64, PT_FLOAT, PT_DOUBLE)}


cdef extern from *:
    """
    #define QDBPM_PREFETCH(p) __builtin_prefetch((p), 0, 0)
    """
    void QDBPM_PREFETCH(const void* p) nogil

cdef enum:
    AHEAD = 16  # records prefetched ahead: a batch's records lie in different files (cache misses)


cdef inline uint64_t u64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)  # little-endian hosts only (qdbpm/__init__.py refuses others)
    return v


def supports(int pt, int mode) -> bool:
    """Whether the kernel reads physical type `pt` in `mode` (else chunk_stats does)."""
    if mode == M_FLOAT:
        return pt == PT_FLOAT or pt == PT_DOUBLE
    if mode == M_ANYSIGN:
        return pt == PT_INT32 or pt == PT_INT64
    return (mode == M_INT or mode == M_UINT) and (pt == PT_BOOLEAN or pt == PT_INT32 or pt == PT_INT64)


def fixed_bounds(const uint8_t[::1] buf, const int64_t[::1] at, int pt, int mode, bint nullable):
    """chunk_stats' arrays of the R records at buf[at[i] : at[i] + 64]: (lo, hi, has_lo, has_hi,
    exact_eq, nulls_known, nulls, num_values, ulo, uhi); lo / hi int64 (float64 in MODE_FLOAT);
    ulo / uhi the unsigned readings (uint64) in MODE_ANYSIGN, else None."""
    cdef Py_ssize_t n = at.shape[0], i
    cdef int width, zero_width, k
    cdef bint is_float = mode == M_FLOAT, anysign = mode == M_ANYSIGN
    if not supports(pt, mode):
        raise ValueError(f"fixed_bounds: physical type {pt} in mode {mode}")
    width = 1 if pt == PT_BOOLEAN else (4 if pt == PT_INT32 or pt == PT_FLOAT else 8)
    zero_width = width  # zero_nibble_width: the physical width (all <= 8 here)
    for i in range(n):
        if at[i] < 0 or at[i] > buf.shape[0] - CHUNK_SIZE:
            raise CorruptFileError(f"_pm batch: record at {at[i]} lies outside the read buffer")
    a_lo = buffers.empty(n, np.float64 if is_float else np.int64)
    a_hi = buffers.empty(n, np.float64 if is_float else np.int64)
    a_has_lo, a_has_hi, a_eq, a_known = (buffers.empty(n, np.bool_) for _ in range(4))
    a_nulls, a_num = buffers.empty(n, np.uint64), buffers.empty(n, np.uint64)
    a_ulo = buffers.empty(n, np.uint64) if anysign else None
    a_uhi = buffers.empty(n, np.uint64) if anysign else None
    cdef int64_t[::1] ilo, ihi
    cdef double[::1] flo, fhi
    cdef uint64_t[::1] ulo, uhi
    cdef uint8_t[::1] has_lo = a_has_lo.view(np.uint8), has_hi = a_has_hi.view(np.uint8)
    cdef uint8_t[::1] eq = a_eq.view(np.uint8), known = a_known.view(np.uint8)
    cdef uint64_t[::1] nulls = a_nulls, num = a_num
    if is_float:
        flo, fhi = a_lo, a_hi
    else:
        ilo, ihi = a_lo, a_hi
    if anysign:
        ulo, uhi = a_ulo, a_uhi
    cdef const uint8_t* r
    cdef const uint8_t* base = &buf[0] if buf.shape[0] else NULL
    cdef uint8_t flags, sizes
    cdef uint64_t raw[2]
    cdef uint64_t u[2]
    cdef int64_t s[2]
    cdef double d[2]
    cdef bint ok[2]
    cdef bint exact, bad
    cdef int nib
    cdef float f32
    cdef uint32_t w32
    with nogil:
        for i in range(n):
            if i + AHEAD < n:  # both lines a record may straddle
                QDBPM_PREFETCH(base + at[i + AHEAD])
                QDBPM_PREFETCH(base + at[i + AHEAD] + CHUNK_SIZE - 1)
            r = base + at[i]
            flags, sizes = r[AT_FLAGS], r[AT_SIZES]
            num[i] = u64(r + AT_NUM_VALUES)
            if nullable:
                known[i] = (flags & NULL_COUNT_PRESENT) != 0
                nulls[i] = u64(r + AT_NULL_COUNT) if known[i] else 0
            else:  # a REQUIRED column has no nulls whatever the footer says
                known[i], nulls[i] = 1, 0
            exact = (flags & (MIN_EXACT | MAX_EXACT)) == (MIN_EXACT | MAX_EXACT)
            raw[0], raw[1] = u64(r + AT_MIN), u64(r + AT_MAX)
            for k in range(2):
                nib = (sizes >> (4 * k)) & 0xF
                if k == 0:
                    ok[k] = (flags & (MIN_PRESENT | MIN_INLINED)) == (MIN_PRESENT | MIN_INLINED)
                else:
                    ok[k] = (flags & (MAX_PRESENT | MAX_INLINED)) == (MAX_PRESENT | MAX_INLINED)
                ok[k] = ok[k] and (zero_width if nib == 0 else nib) == width
                if width == 1:
                    u[k] = raw[k] & 0xFFULL
                    s[k] = <int64_t>u[k]
                elif width == 4:
                    w32 = <uint32_t>(raw[k] & 0xFFFFFFFFULL)
                    u[k] = w32
                    if pt == PT_FLOAT:
                        memcpy(&f32, &w32, 4)
                        d[k] = f32
                    elif mode == M_UINT:
                        s[k] = <int64_t>w32
                    else:
                        s[k] = <int64_t>(<int32_t>w32)
                else:
                    u[k] = raw[k]
                    if pt == PT_DOUBLE:
                        memcpy(&d[k], &raw[k], 8)
                    else:
                        s[k] = <int64_t>raw[k]
            if is_float:
                for k in range(2):
                    if ok[k] and isnan(d[k]):  # the writer's NaN ordering is unknown: neither bound
                        ok[0] = ok[1] = False
                bad = ok[0] and ok[1] and d[0] > d[1]
                flo[i], fhi[i] = d[0], d[1]
                eq[i] = ok[0] and ok[1] and not bad and exact and d[0] == d[1]
            elif anysign:
                # disordered in both readings: no sane writer
                bad = ok[0] and ok[1] and s[0] > s[1] and u[0] > u[1]
                ilo[i], ihi[i], ulo[i], uhi[i] = s[0], s[1], u[0], u[1]
                eq[i] = ok[0] and ok[1] and not bad and exact and s[0] == s[1]
            else:
                bad = ok[0] and ok[1] and s[0] > s[1]  # min > max: trust neither
                ilo[i], ihi[i] = s[0], s[1]
                eq[i] = ok[0] and ok[1] and not bad and exact and s[0] == s[1]
            has_lo[i] = ok[0] and not bad
            has_hi[i] = ok[1] and not bad
    return a_lo, a_hi, a_has_lo, a_has_hi, a_eq, a_known, a_nulls, a_num, a_ulo, a_uhi
