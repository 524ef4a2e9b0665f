# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# Byte-string stat kernels for pruning: R optional values packed in one buffer, value i being
# data[offsets[i] : offsets[i] + lengths[i]]. Order is Python's bytes order (unsigned
# lexicographic, a proper prefix first). GIL released; shapes and every (offset, length) were
# validated by qdbpm.prune.stats.ByteValues (bounds checks are off here).

from libc.stdint cimport int8_t, int64_t, uint8_t
from libc.string cimport memcmp, memcpy

# Operator codes of compare_literal (qdbpm.prune.stats.BYTE_OPS maps "<", "<=", ... to these).
cdef enum:
    OP_LT = 0
    OP_LE = 1
    OP_GT = 2
    OP_GE = 3
    OP_EQ = 4

LT, LE, GT, GE, EQ = OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ


cdef inline int cmp_bytes(const uint8_t* a, int64_t la, const uint8_t* b, int64_t lb) noexcept nogil:
    cdef int64_t n = la if la < lb else lb
    cdef int c = 0
    if n > 0:
        c = memcmp(a, b, <size_t>n)
    if c != 0:
        return 1 if c > 0 else -1
    return (la > lb) - (la < lb)


def compare_literal(const uint8_t[::1] data, const int64_t[::1] offsets, const int64_t[::1] lengths,
                    const uint8_t[::1] literal, int op, const uint8_t[::1] where, uint8_t elsewhere,
                    uint8_t[::1] out):
    """out[i] = (value_i op literal) where where[i], else `elsewhere`. All arrays have len R."""
    cdef Py_ssize_t i, n = offsets.shape[0]
    cdef const uint8_t* d = &data[0] if data.shape[0] else NULL
    cdef const uint8_t* lit = &literal[0] if literal.shape[0] else NULL
    cdef int64_t ll = literal.shape[0]
    cdef int c
    cdef bint r
    if not OP_LT <= op <= OP_EQ:
        raise ValueError(f"unknown operator code {op}")
    with nogil:
        for i in range(n):
            if not where[i]:
                out[i] = elsewhere
                continue
            c = cmp_bytes(d + offsets[i], lengths[i], lit, ll)
            if op == OP_LT:
                r = c < 0
            elif op == OP_LE:
                r = c <= 0
            elif op == OP_GT:
                r = c > 0
            elif op == OP_GE:
                r = c >= 0
            else:
                r = c == 0
            out[i] = r


def compare_pairs(const uint8_t[::1] data_a, const int64_t[::1] off_a, const int64_t[::1] len_a,
                  const uint8_t[::1] data_b, const int64_t[::1] off_b, const int64_t[::1] len_b,
                  int8_t[::1] out):
    """out[i] = sign(a_i vs b_i) where both are present (length >= 0), else 0."""
    cdef Py_ssize_t i, n = off_a.shape[0]
    cdef const uint8_t* da = &data_a[0] if data_a.shape[0] else NULL
    cdef const uint8_t* db = &data_b[0] if data_b.shape[0] else NULL
    with nogil:
        for i in range(n):
            if len_a[i] < 0 or len_b[i] < 0:
                out[i] = 0
            else:
                out[i] = <int8_t>cmp_bytes(da + off_a[i], len_a[i], db + off_b[i], len_b[i])


def gather(const uint8_t[::1] src, const int64_t[::1] src_off, const int64_t[::1] lengths,
           uint8_t[::1] dst, const int64_t[::1] dst_off):
    """dst[dst_off[i] : +lengths[i]] = src[src_off[i] : +lengths[i]] for every i with lengths[i] > 0."""
    cdef Py_ssize_t i, n = src_off.shape[0]
    with nogil:
        for i in range(n):
            if lengths[i] > 0:
                memcpy(&dst[0] + dst_off[i], &src[0] + src_off[i], <size_t>lengths[i])


# --- chunk records of many files (table pruning) -----------------------------------------------

cimport numpy as cnp

cnp.import_array()


def gather_column(list chunks, Py_ssize_t col, object dtype, uint8_t[:, ::1] out):
    """Copy column `col` of every (R_i, C) chunk-record array in `chunks` into `out` (sum R_i
    rows of itemsize bytes), arrays back to back: one call instead of a numpy view per file.
    Each array must have `dtype` (compared by identity, then equality) and more than `col`
    columns; any strides (the arrays are usually strided views of mappings)."""
    cdef Py_ssize_t i, r, R, k = 0, n = len(chunks), item = out.shape[1]
    cdef cnp.ndarray a
    cdef const char* base
    cdef cnp.npy_intp s0
    if col < 0:
        raise ValueError(f"column {col} < 0")
    for i in range(n):
        a = <cnp.ndarray?>chunks[i]
        if cnp.PyArray_NDIM(a) != 2 or cnp.PyArray_ITEMSIZE(a) != item:
            raise ValueError(f"array {i}: not 2-D of {item}-byte records")
        if <object>cnp.PyArray_DESCR(a) is not dtype and a.dtype != dtype:
            raise ValueError(f"array {i}: dtype {a.dtype} is not {dtype}")
        if col >= cnp.PyArray_DIMS(a)[1]:
            raise ValueError(f"array {i}: column {col} not < {cnp.PyArray_DIMS(a)[1]}")
        R = cnp.PyArray_DIMS(a)[0]
        if R > out.shape[0] - k:
            raise ValueError(f"{out.shape[0]} output rows are too few")
        base = <const char*>cnp.PyArray_DATA(a) + col * cnp.PyArray_STRIDES(a)[1]
        s0 = cnp.PyArray_STRIDES(a)[0]
        with nogil:
            for r in range(R):
                memcpy(&out[k + r, 0], base + r * s0, <size_t>item)
        k += R
    if k != out.shape[0]:
        raise ValueError(f"{out.shape[0]} output rows for {k} records")
