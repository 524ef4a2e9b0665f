# cython: language_level=3
"""Kernel: ranges.coalesce's rule over arrays (ranges.py is the wrapper; `coalesce_reference`
there is the slow, obviously correct rule the tests hold this to).

A full scan of 1,000 partitions x 10 row groups x 8 columns plans 80,000 chunks; the rule in
Python cost ~0.17 ms per partition, most of planning. Here one pass in C decides which span
starts a new range. It reads only indexes it has checked against the arrays' lengths.
"""

cimport cython
from libc.stdint cimport int64_t

import numpy as np


@cython.boundscheck(False)
@cython.wraparound(False)
def runs(const int64_t[::1] starts, const int64_t[::1] lengths, const int64_t[::1] barriers,
         double max_gap, double max_range, double max_waste):
    """(first, start, length, useful), int64 arrays with one entry per range: the index of its
    first span (the spans of range i are first[i]:first[i + 1]), its start, its length and its
    requested bytes. Spans (starts, lengths) sorted by start, barriers sorted ascending. A span
    joins the range before it when the hole is at most max_gap, the merged length at most
    max_range, the unrequested bytes at most max_waste x the requested ones, and no barrier b has
    range end <= b < span start (compared as Python compares an int with a float: exactly, for
    offsets below 2**53)."""
    cdef Py_ssize_t n = starts.shape[0], nb = barriers.shape[0], i, k = 0, m = 0
    if lengths.shape[0] != n:
        raise ValueError(f"{n} starts but {lengths.shape[0]} lengths")
    first = np.empty(n, np.int64)
    out_start = np.empty(n, np.int64)
    out_len = np.empty(n, np.int64)
    out_useful = np.empty(n, np.int64)
    cdef int64_t[::1] f = first, os_ = out_start, ol = out_len, ou = out_useful
    cdef int64_t s, ln, cur_start = 0, cur_end = 0, useful = 0, new_end, new_len, new_useful
    cdef bint crosses
    with nogil:
        for i in range(n):
            s, ln = starts[i], lengths[i]
            if m:
                new_end = cur_end if cur_end > s + ln else s + ln
                new_len = new_end - cur_start
                new_useful = useful + ln
                # k = bisect_left(barriers, cur_end), moved from the last range's (ends need not grow)
                while k < nb and barriers[k] < cur_end:
                    k += 1
                while k > 0 and barriers[k - 1] >= cur_end:
                    k -= 1
                crosses = k < nb and barriers[k] < s
                if (<double>(s - cur_end) <= max_gap and <double>new_len <= max_range
                        and <double>(new_len - new_useful) <= max_waste * <double>new_useful and not crosses):
                    cur_end, useful = new_end, new_useful
                    continue
                os_[m - 1], ol[m - 1], ou[m - 1] = cur_start, cur_end - cur_start, useful
            f[m] = i
            m += 1
            cur_start, cur_end, useful = s, s + ln, ln
        if m:
            os_[m - 1], ol[m - 1], ou[m - 1] = cur_start, cur_end - cur_start, useful
    return first[:m], out_start[:m], out_len[:m], out_useful[:m]
