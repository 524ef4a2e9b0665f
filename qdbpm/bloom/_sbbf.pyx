# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# Batch SBBF kernels: many hashes against one filter, and hashes x row groups against the filters
# of one column stored back to back in one buffer. GIL released; shapes, offsets and lengths were
# validated by qdbpm.bloom (bounds checks are off here).

cimport cython
from libc.stdint cimport int64_t, uint8_t, uint64_t


def insert(uint8_t[::1] bitset, const uint64_t[::1] hashes):
    """Set the bits of every hash in `bitset` (len a positive multiple of 32)."""
    cdef Py_ssize_t i, n = hashes.shape[0]
    cdef uint64_t nblocks = bitset.shape[0] // 32
    cdef uint8_t* bits = &bitset[0]
    with nogil:
        for i in range(n):
            sbbf_insert(bits, nblocks, hashes[i])


def probe(const uint8_t[::1] bitset, const uint64_t[::1] hashes, uint8_t[::1] out):
    """out[i] = 1 when hashes[i] may be in the filter. len(out) == len(hashes)."""
    cdef Py_ssize_t i, n = hashes.shape[0]
    cdef uint64_t nblocks = bitset.shape[0] // 32
    cdef const uint8_t* bits = &bitset[0]
    with nogil:
        for i in range(n):
            out[i] = sbbf_check(bits, nblocks, hashes[i])


def probe_matrix(const uint64_t[::1] hashes, const uint8_t[::1] data, const int64_t[::1] offsets,
                 const int64_t[::1] lengths, uint8_t[:, ::1] out):
    """out[v, r] = 1 when hashes[v] may be in filter r = data[offsets[r]:offsets[r]+lengths[r]].
    lengths[r] == -1: no filter, so every value may be present. out has shape (len(hashes), R)."""
    cdef Py_ssize_t v, r, n = hashes.shape[0], R = offsets.shape[0]
    cdef uint64_t nblocks
    cdef const uint8_t* bits
    with nogil:
        # Row group outer: one filter stays in cache while every value probes it.
        for r in range(R):
            if lengths[r] < 0:
                for v in range(n):
                    out[v, r] = 1
                continue
            bits = &data[0] + offsets[r]
            nblocks = <uint64_t>lengths[r] // 32
            for v in range(n):
                out[v, r] = sbbf_check(bits, nblocks, hashes[v])


def probe_any(const uint64_t[::1] hashes, const uint8_t[::1] data, const int64_t[::1] offsets,
              const int64_t[::1] lengths, uint8_t[::1] out):
    """out[r] = 1 when some hash may be in filter r (or r has no filter). len(out) == R.
    The IN-list question pruning asks: a row group is skipped only if every value is absent."""
    cdef Py_ssize_t v, r, n = hashes.shape[0], R = offsets.shape[0]
    cdef uint64_t nblocks
    cdef const uint8_t* bits
    cdef uint8_t hit
    with nogil:
        for r in range(R):
            if lengths[r] < 0:
                out[r] = n > 0  # no filter: any value may be present (but an empty list matches none)
                continue
            bits = &data[0] + offsets[r]
            nblocks = <uint64_t>lengths[r] // 32
            hit = 0
            for v in range(n):
                if sbbf_check(bits, nblocks, hashes[v]):
                    hit = 1
                    break
            out[r] = hit
