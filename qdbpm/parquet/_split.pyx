# cython: language_level=3
"""Kernel: a column chunk's pages walked and decoded without the GIL, for the worker that splits
chunks ahead of a scan (table/_offload.pyx; `pages.assemble` builds the Split from the answer).

The same walk as `pages._split_pages` (its slow, obviously correct reference, which tests hold this
to): page headers read by the Thrift codec (`_thrift.read_page_header`), each page's size checked
against the bytes left, a dictionary page only first, data pages counted up to the chunk's value
count, index pages passed over; Snappy pages decoded by `_snappy.decode_block` into one buffer,
uncompressed ones left in place. It takes only what it can answer exactly (data pages v1, Snappy
or no codec) and says so by its return code: anything else, malformed bytes included, is left to
the Python walk, which raises what is wrong or reads what this does not. A Snappy page may not
claim to decode to more than MAX_RATIO times its size (no Snappy block can), so hostile sizes
never allocate beyond that.
"""

from libc.stdint cimport int64_t, uint8_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

import os

from ._snappy cimport block_length, decode_block
from ._thrift cimport page_parser, read_page_header

from .._pthread cimport pthread_mutex_init, pthread_mutex_lock, pthread_mutex_t, pthread_mutex_unlock

cdef enum:
    PAGE_DATA = 0
    PAGE_INDEX = 1
    PAGE_DICTIONARY = 2
    CODEC_UNCOMPRESSED = 0
    CODEC_SNAPPY = 1
    MAX_RATIO = 22  # a Snappy copy of 64 bytes takes 3: no block decodes to more than ~21.4x its size


# Decoded buffers kept for the next walks, as Arrow's pool keeps its freed pages: glibc maps a
# large block fresh (or trims it) and every walk would fault its pages in again (a Q6 one shot:
# twelve 600 KB price pages). At most CACHE_BUFFERS of them, CACHE_BYTES in all; a buffer serves
# a walk needing between half its size and all of it.
cdef enum:
    CACHE_BUFFERS = 16
    CACHE_BYTES = 64 << 20
cdef pthread_mutex_t cache_mu
cdef uint8_t* cache_ptr[CACHE_BUFFERS]
cdef Py_ssize_t cache_cap[CACHE_BUFFERS]
cdef Py_ssize_t cache_n = 0, cache_bytes = 0


def reset():
    """The cache's lock made anew (at import, and in a forked child: the parent's worker may
    have held it as it forked)."""
    pthread_mutex_init(&cache_mu, NULL)


reset()
os.register_at_fork(after_in_child=reset)


cdef uint8_t* _take_buffer(Py_ssize_t need, Py_ssize_t* cap) noexcept nogil:
    """A buffer of at least `need` bytes (its size into `cap`): a kept one, else malloc's."""
    global cache_n, cache_bytes
    cdef Py_ssize_t i, best = -1
    cdef uint8_t* p = NULL
    pthread_mutex_lock(&cache_mu)
    for i in range(cache_n):
        if need <= cache_cap[i] <= 2 * need + 4096 and (best < 0 or cache_cap[i] < cache_cap[best]):
            best = i
    if best >= 0:
        p, cap[0] = cache_ptr[best], cache_cap[best]
        cache_bytes -= cache_cap[best]
        cache_n -= 1
        cache_ptr[best], cache_cap[best] = cache_ptr[cache_n], cache_cap[cache_n]
    pthread_mutex_unlock(&cache_mu)
    if p == NULL:
        p, cap[0] = <uint8_t*>malloc(need), need
    return p


cdef void _give_buffer(uint8_t* p, Py_ssize_t cap) noexcept nogil:
    """Keep `p` for a later walk, or free it when the cache is full."""
    global cache_n, cache_bytes
    cdef bint kept = False
    pthread_mutex_lock(&cache_mu)
    if cache_n < CACHE_BUFFERS and cache_bytes + cap <= CACHE_BYTES:
        cache_ptr[cache_n], cache_cap[cache_n] = p, cap
        cache_n += 1
        cache_bytes += cap
        kept = True
    pthread_mutex_unlock(&cache_mu)
    if not kept:
        free(p)


cdef int _grow(SplitOut* out) noexcept nogil:
    cdef Py_ssize_t cap = 8 if out.cap == 0 else 2 * out.cap
    cdef int64_t* p = <int64_t*>realloc(out.pages, cap * PAGE_FIELDS * sizeof(int64_t))
    if p == NULL:
        return 1
    out.pages, out.cap = p, cap
    return 0


cdef int split_chunk_c(void* parser, const uint8_t* src, Py_ssize_t n, int64_t num_values, int codec,
                       SplitOut* out) noexcept nogil:
    """Walk the chunk src[:n] into `out` (zeroed by the caller; `split_free` frees it either way):
    0 when every page is taken and decoded, else 1 (the Python walk decides)."""
    cdef Py_ssize_t pos = 0, end, need = 0, k, ip = 0, op = 0, start = 0
    cdef int64_t h[12]
    cdef int64_t total = 0
    cdef int64_t* row
    cdef bint data_seen = False, dict_seen = False
    if codec != CODEC_SNAPPY and codec != CODEC_UNCOMPRESSED:
        return 1
    while pos < n and total < num_values:
        end = read_page_header(parser, src, n, pos, h)
        if end < 0 or h[2] < 0 or h[3] < 0 or h[3] > n - end:
            return 1
        if h[1] == PAGE_INDEX:
            pos = end + h[3]
            continue
        if h[1] == PAGE_DICTIONARY:
            if dict_seen or data_seen or h[4] < 0:
                return 1
            dict_seen = True
        elif h[1] == PAGE_DATA:
            if h[4] < 0 or h[4] > num_values - total:
                return 1
            total += h[4]
            data_seen = True
        else:
            return 1  # data pages v2 and unknown types: the Python walk
        if codec == CODEC_UNCOMPRESSED and h[2] != h[3]:
            return 1
        if codec == CODEC_SNAPPY and h[2] > MAX_RATIO * h[3] + 32:
            return 1
        if out.npages == out.cap and _grow(out):
            return 1
        row = out.pages + out.npages * PAGE_FIELDS
        memcpy(row, h, 12 * sizeof(int64_t))
        row[12] = need if codec == CODEC_SNAPPY else -1
        if codec == CODEC_SNAPPY:
            need = (need + h[2] + 63) & ~(<Py_ssize_t>63)  # each page 64-byte aligned, as Arrow's pool gives it
        out.npages += 1
        pos = end + h[3]
    if total != num_values:
        return 1
    out.used = need
    if need:
        out.decoded = _take_buffer(need, &out.decoded_size)
        if out.decoded == NULL:
            return 1
    for k in range(out.npages):
        row = out.pages + k * PAGE_FIELDS
        if row[12] < 0:
            continue
        # the block: its preamble must say the page's size, its elements fill exactly that
        if block_length(src + row[0], row[3], &start) != row[2]:
            return 1
        if decode_block(src + row[0], start, row[3], out.decoded + row[12], row[2], row[2], 0, &op, &ip) != 0:
            return 1
        if op != row[2] or ip != row[3]:
            return 1
    return 0


cdef void split_free(SplitOut* out) noexcept nogil:
    free(out.pages)
    if out.decoded != NULL:
        _give_buffer(out.decoded, out.decoded_size)
    out.pages, out.decoded, out.npages, out.cap, out.decoded_size, out.used = NULL, NULL, 0, 0, 0, 0


cdef class Decoded:
    """Decoded page bytes (the kernel's buffer), owned: back to the cache with the last view of
    them. `size` bytes are the pages'; the buffer may be larger (`cap`)."""

    cdef uint8_t* data
    cdef Py_ssize_t size, cap
    cdef Py_ssize_t shape[1]

    def __getbuffer__(self, Py_buffer* buf, int flags):
        self.shape[0] = self.size
        buf.buf, buf.len, buf.readonly, buf.itemsize = self.data, self.size, 0, 1
        buf.format, buf.ndim, buf.shape, buf.strides = b"B", 1, self.shape, NULL
        buf.suboffsets, buf.internal = NULL, NULL
        buf.obj = self

    def __releasebuffer__(self, Py_buffer* buf):
        pass

    def __dealloc__(self):
        if self.data != NULL:
            _give_buffer(self.data, self.cap)


cdef object split_result(SplitOut* out):
    """(pages: a list of PAGE_FIELDS-tuples, Decoded or None) of a walk that returned 0; the
    decoded bytes change owner (`out` keeps none of them)."""
    cdef Decoded d = None
    cdef Py_ssize_t k, i
    pages = [tuple([out.pages[k * PAGE_FIELDS + i] for i in range(PAGE_FIELDS)]) for k in range(out.npages)]
    if out.decoded != NULL:
        d = Decoded.__new__(Decoded)
        d.data, d.size, d.cap = out.decoded, out.used, out.decoded_size
        out.decoded, out.decoded_size = NULL, 0
    return pages, d


def split_table(const uint8_t[::1] blob, int64_t num_values, int codec):
    """The kernel on `blob` (a chunk's bytes) with the GIL released: `split_result`'s answer, or
    None where the Python walk decides (tests hold it to `pages._split_pages`)."""
    cdef SplitOut out
    cdef int code
    cdef object parser = page_parser()
    cdef void* p = <void*>parser
    cdef const uint8_t* src = &blob[0] if blob.shape[0] else NULL
    cdef Py_ssize_t n = blob.shape[0]
    out.pages, out.decoded, out.npages, out.cap, out.decoded_size, out.used = NULL, NULL, 0, 0, 0, 0
    with nogil:
        code = split_chunk_c(p, src, n, num_values, codec, &out)
    try:
        return split_result(&out) if code == 0 else None
    finally:
        split_free(&out)
