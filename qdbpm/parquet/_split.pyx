# cython: language_level=3
"""Kernel: a column chunk's pages walked and decoded without the GIL, for the worker that splits
chunks ahead of a scan (table/_offload.pyx; `pages.assemble` builds the Split from the answer).

The same walk as `pages._split_pages` (its slow, obviously correct reference, which tests hold this
to): page headers read by the Thrift codec (`_thrift.read_page_header`), each page's size checked
against the bytes left, a dictionary page only first, data pages counted up to the chunk's value
count, index pages passed over; Snappy, LZ4_RAW (QuestDB's codec) and ZSTD pages decoded by
`_snappy.decode_block` / `_lz4.decode_block` / `_zstd.zstd_page` (zstandard's libzstd, where it
is found) into one buffer, uncompressed ones left in place. It takes only what it can answer
exactly (data pages v1; Snappy, LZ4_RAW, ZSTD or no codec) and says so by its return code:
anything else, malformed bytes included, is left to the Python walk, which raises what is wrong
or reads what this does not. A page may not claim to decode to more than MAX_RATIO (Snappy),
LZ4_MAX_RATIO (`_lz4.pxd`) or ZSTD_MAX_RATIO (`_zstd.pxd`) times its size (no Snappy or LZ4 block
can; a ZSTD page that does goes to the Python walk), so hostile sizes never allocate beyond that.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

import os

from ._pages cimport all_equal, lookup_runs
from ._runs cimport RUN_OK, Runs, init_runs
from ._lz4 cimport LZ4_MAX_RATIO, LZ4_OK, decode_block as lz4_block
from ._snappy cimport block_length, decode_block
from ._zstd cimport ZSTD_MAX_RATIO, zstd_page, zstd_ready
from ._thrift cimport page_parser, read_page_header

from .._pthread cimport pthread_mutex_init, pthread_mutex_lock, pthread_mutex_t, pthread_mutex_unlock

cdef enum:
    PAGE_DATA = 0
    PAGE_INDEX = 1
    PAGE_DICTIONARY = 2
    CODEC_UNCOMPRESSED = 0
    CODEC_SNAPPY = 1
    CODEC_ZSTD = 6
    CODEC_LZ4_RAW = 7
    PT_INT32 = 1
    PT_INT64 = 2
    PT_FLOAT = 4
    PT_DOUBLE = 5
    ENC_PLAIN = 0
    ENC_PLAIN_DICTIONARY = 2
    ENC_RLE = 3
    ENC_RLE_DICTIONARY = 8
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
    # Decoded into `out.decoded` (the rest left in place), each page claiming at most `ratio`
    # times its size (plus 32 bytes).
    cdef int64_t ratio = (MAX_RATIO if codec == CODEC_SNAPPY else LZ4_MAX_RATIO if codec == CODEC_LZ4_RAW
                          else ZSTD_MAX_RATIO if codec == CODEC_ZSTD and zstd_ready() else 0)
    cdef bint packed = ratio > 0
    if not packed and codec != CODEC_UNCOMPRESSED:
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
        if (h[2] > ratio * h[3] + 32) if packed else (h[2] != h[3]):
            return 1
        if out.npages == out.cap and _grow(out):
            return 1
        row = out.pages + out.npages * PAGE_FIELDS
        memcpy(row, h, 12 * sizeof(int64_t))
        row[12] = need if packed else -1
        if packed:
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
        if codec == CODEC_LZ4_RAW:  # the block must fill the page exactly
            if lz4_block(src + row[0], row[3], out.decoded + row[12], row[2], &start) != LZ4_OK:
                return 1
            continue
        if codec == CODEC_ZSTD:  # so must the frames
            if zstd_page(src + row[0], row[3], out.decoded + row[12], row[2]) != 0:
                return 1
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


cdef const uint8_t* _page_bytes(const SplitOut* out, const uint8_t* src, const int64_t* row,
                                Py_ssize_t* size) noexcept nogil:
    """A walked page's body: decoded (row[12] its offset), or in place in the chunk."""
    if row[12] < 0:
        size[0] = row[3]
        return src + row[0]
    size[0] = row[2]
    return out.decoded + row[12]


ctypedef fused signed_int:
    int32_t
    int64_t


cdef Py_ssize_t _search(const signed_int* known, Py_ssize_t n, signed_int v) noexcept nogil:
    """The index of v in the sorted known[:n], or -1."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if known[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < n and known[lo] == v else -1


cdef Py_ssize_t _find(const void* known, Py_ssize_t n, int width, const uint8_t* value) noexcept nogil:
    """The index of `value` (`width` bytes, little-endian, as a signed integer) in the sorted
    `known` (int32 or int64), or -1."""
    cdef int32_t v4
    cdef int64_t v8
    if width == 4:
        memcpy(&v4, value, 4)
        return _search(<const int32_t*>known, n, v4)
    memcpy(&v8, value, 8)
    return _search(<const int64_t*>known, n, v8)


cdef int lookup_split_c(const SplitOut* out, const uint8_t* src, int ptype, int max_def, int width,
                        const void* known, Py_ssize_t nknown, const uint8_t* answers, uint8_t* keep,
                        Py_ssize_t nrows) noexcept nogil:
    """keep[row] &= the answer a Decider's memo gives the row's value, over a chunk walked into
    `out` (src: its bytes): the filter pass `pages.lookup_and` makes with the memo's LUT
    (`decider.Decider.lookup`), without the GIL. `known`: the memo's values, sorted, as signed
    integers of `width` bytes, the width of the chunk's physical type `ptype` (INT32, FLOAT: 4;
    INT64, DOUBLE: 8); `answers`: theirs. 0 when done; 1 where the Python
    filter pass decides, `keep` then to be thrown away: a page not dictionary-encoded, a null
    row, a value the memo has not decided, a malformed run or any other shape."""
    cdef const int64_t* row
    cdef const uint8_t* data
    cdef Py_ssize_t size, dn, i, k, r0 = 0, pos, n
    cdef uint8_t* lut
    cdef uint32_t ln
    cdef uint64_t bad
    cdef Runs r
    cdef int code = 0
    if width != (4 if ptype == PT_INT32 or ptype == PT_FLOAT else 8 if ptype == PT_INT64 or ptype == PT_DOUBLE else 0) \
            or nknown <= 0 or out.npages < 2 or max_def < 0 or max_def > 1:
        return 1
    row = out.pages
    if row[1] != PAGE_DICTIONARY or (row[5] != ENC_PLAIN and row[5] != ENC_PLAIN_DICTIONARY) or row[4] < 0:
        return 1
    data = _page_bytes(out, src, row, &size)
    dn = row[4]
    if dn > size // width:
        return 1
    lut = <uint8_t*>malloc(dn + 1)
    if lut == NULL:
        return 1
    for i in range(dn):
        k = _find(known, nknown, width, data + i * width)
        if k < 0:
            free(lut)
            return 1
        lut[i] = answers[k]
    for k in range(1, out.npages):
        row = out.pages + k * PAGE_FIELDS
        n = row[4]
        if row[1] != PAGE_DATA or (row[5] != ENC_PLAIN_DICTIONARY and row[5] != ENC_RLE_DICTIONARY) \
                or n <= 0 or n > nrows - r0:
            code = 1
            break
        data = _page_bytes(out, src, row, &size)
        pos = 0
        if max_def:  # every row present (one run of level 1), as pages._levels finds it
            if row[6] != ENC_RLE or size < 4:
                code = 1
                break
            memcpy(&ln, data, 4)
            if ln > size - 4 or init_runs(&r, data, size, 4, 4 + ln, 1, n, n) != 0 or not all_equal(&r, 1):
                code = 1
                break
            pos = 4 + ln
        if pos >= size or init_runs(&r, data, size, pos + 1, size, data[pos], n, n) != 0 \
                or lookup_runs(&r, lut, dn, keep + r0, &bad) != RUN_OK:
            code = 1
            break
        r0 += n
    free(lut)
    return 1 if code or r0 != nrows else 0


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


cdef int _walked(const uint8_t[::1] blob, int64_t num_values, int codec, SplitOut* out):
    """split_chunk_c on `blob` with the GIL released (`out` zeroed here; split_free frees it)."""
    cdef object parser = page_parser()
    cdef void* p = <void*>parser
    cdef const uint8_t* src = &blob[0] if blob.shape[0] else NULL
    cdef Py_ssize_t n = blob.shape[0]
    cdef int code
    out.pages, out.decoded, out.npages, out.cap, out.decoded_size, out.used = NULL, NULL, 0, 0, 0, 0
    with nogil:
        code = split_chunk_c(p, src, n, num_values, codec, out)
    return code


def split_table(const uint8_t[::1] blob, int64_t num_values, int codec):
    """The kernel on `blob` (a chunk's bytes) with the GIL released: `split_result`'s answer, or
    None where the Python walk decides (tests hold it to `pages._split_pages`)."""
    cdef SplitOut out
    cdef int code = _walked(blob, num_values, codec, &out)
    try:
        return split_result(&out) if code == 0 else None
    finally:
        split_free(&out)


def lookup_table(const uint8_t[::1] blob, int64_t num_values, int codec, int ptype, int max_def, known,
                 const uint8_t[::1] answers):
    """The chunk walk then `lookup_split_c` on `blob` with the GIL released (a test hook, as
    `split_table`): the keep mask (uint8 per row, 1 where the memo's answer is), or None where
    the Python filter pass decides. `known`: a sorted int32 or int64 array, `answers` theirs."""
    cdef SplitOut out
    cdef const uint8_t[::1] bits = known.view("u1")
    cdef int width = known.dtype.itemsize
    cdef Py_ssize_t nknown = known.shape[0]
    if answers.shape[0] < nknown or num_values < 0:
        raise ValueError("lookup_table: fewer answers than values")
    keep = bytearray(b"\x01" * num_values)
    cdef uint8_t[::1] k = keep
    cdef uint8_t* kp = &k[0] if num_values else NULL
    cdef const void* kn = &bits[0] if bits.shape[0] else NULL
    cdef const uint8_t* ans = &answers[0] if answers.shape[0] else NULL
    cdef const uint8_t* src = &blob[0] if blob.shape[0] else NULL
    cdef int code = _walked(blob, num_values, codec, &out)
    if code == 0:
        with nogil:
            code = lookup_split_c(&out, src, ptype, max_def, width, kn, nknown, ans, kp, num_values)
    split_free(&out)
    return None if code else keep
