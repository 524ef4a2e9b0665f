# cython: language_level=3
"""Kernel: Snappy's raw block format decoded, all of it or only a prefix (`pages` is the wrapper).

Arrow's codec decodes a page whole. A filtered read of sorted data (a time range of a QuestDB
partition) keeps rows from one stretch of the page: every value before the last kept one is
needed, none after it. `decode` stops once `want` bytes of output exist, so a query for the
first days of a month decompresses those days' share of each page, not the page.

The format (github.com/google/snappy, format_description.txt): a varint of the decoded length,
then elements, each a literal (bytes copied from the input) or a copy (bytes repeated from
`offset` back in the output). Every element is checked against both buffers before it is
written; a malformed one raises ParquetFormatError naming the byte, never reads or writes past
(tests/test_kernel_bounds.py). The fast paths copy 16 / 8 bytes at a time only where both
buffers have that much room left, so the checked lengths alone bound every access.

The GIL is released only for a fill of NOGIL_BYTES or more. A scan's pool thread splits the next
units while the calling thread filters the current one: each time it takes the GIL back after a
small page (a dictionary page, a 40 KB page of indexes), the calling thread waits for it and is
woken again. The calling thread of a TPC-H Q6 one shot blocked ~105 times (strace: futex waits, of
every cause), ~66 with small pages decoded holding the GIL.
"""

cimport cython
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memmove

from ..errors import ParquetFormatError


cdef enum:
    SN_OK, SN_TAG_SHORT, SN_LITERAL_OVER, SN_OUTPUT_OVER, SN_OFFSET_BAD, SN_LENGTH_BAD


def decoded_length(const uint8_t[::1] src):
    """(the decoded length the block's preamble says, the preamble's size in bytes)."""
    cdef Py_ssize_t start = 0
    cdef int64_t v = block_length(&src[0] if src.shape[0] else NULL, src.shape[0], &start)
    if v == -1:
        raise ParquetFormatError("snappy block: its length preamble is cut short or over 32 bits")
    if v < 0:
        raise ParquetFormatError(f"snappy block: decoded length {-v - 2} over 32 bits")
    return v, start


cdef int64_t block_length(const uint8_t* src, Py_ssize_t n, Py_ssize_t* start) noexcept nogil:
    """The decoded length a block's preamble says (its size in bytes into `start`); -1 when the
    preamble is cut short or longer than 5 bytes, -2 - the value when it passes 32 bits."""
    cdef Py_ssize_t i = 0
    cdef uint64_t v = 0, shift = 0
    while True:
        if i >= n or i >= 5:
            return -1
        v |= (<uint64_t>(src[i] & 0x7F)) << shift
        shift += 7
        i += 1
        if not (src[i - 1] & 0x80):
            break
    start[0] = i
    if v >> 32:
        return -2 - <int64_t>v
    return <int64_t>v


@cython.boundscheck(False)
@cython.wraparound(False)
cdef int decode_block(const uint8_t* src, Py_ssize_t ip, Py_ssize_t n, uint8_t* dst, Py_ssize_t cap,
                 Py_ssize_t want, Py_ssize_t op, Py_ssize_t* out_op, Py_ssize_t* out_ip) noexcept nogil:
    """Elements of src[ip:n] into dst[op:cap] (dst[:op] decoded before) until `want` bytes are
    out (or the input ends)."""
    cdef Py_ssize_t length, offset, i, extra, period
    cdef uint32_t tag
    cdef int code = SN_OK
    # The fast loop runs while the input has room for any short element's header and a 16-byte
    # literal load (21 bytes) and the output room for any 16-byte store (64 bytes): there, the
    # common elements (literals of at most 16 bytes, copies of at most 16 bytes from at least 8
    # back) need no check but the copy's offset against the output written. Anything else
    # leaves it, unread, for the checked code below (one element), which then comes back.
    cdef Py_ssize_t in_safe = n - 21, out_safe = cap - 64
    if want < out_safe:
        out_safe = want
    while ip < n and op < want:
        while ip < in_safe and op < out_safe:
            tag = src[ip]
            if (tag & 3) == 0:
                length = (tag >> 2) + 1
                if length > 16:
                    break
                memcpy(dst + op, src + ip + 1, 16)
                ip += 1 + length
                op += length
                continue
            if (tag & 3) == 1:
                length = 4 + ((tag >> 2) & 7)
                offset = ((tag >> 5) << 8) | src[ip + 1]
                if offset < 8 or offset > op:
                    break
                ip += 2
            elif (tag & 3) == 2:
                length = (tag >> 2) + 1
                offset = src[ip + 1] | (<Py_ssize_t>src[ip + 2] << 8)
                if length > 16 or offset < 8 or offset > op:
                    break
                ip += 3
            else:
                break
            # at most 16 bytes from >= 8 back: two 8-byte moves, the second reading what the
            # first wrote where offset < 16 (the pattern repeats)
            memcpy(dst + op, dst + op - offset, 8)
            memcpy(dst + op + 8, dst + op - offset + 8, 8)
            op += length
        if ip >= n or op >= want:
            break
        tag = src[ip]
        if (tag & 3) == 0:  # literal
            length = (tag >> 2) + 1
            ip += 1
            if length <= 16 and n - ip >= 16 and cap - op >= 16:
                memcpy(dst + op, src + ip, 16)  # room for 16 on both sides: one wide copy
                ip += length
                op += length
                continue
            if length > 60:  # 1-4 bytes of length follow
                extra = length - 60
                if n - ip < extra:
                    code = SN_TAG_SHORT
                    break
                length = 0
                for i in range(extra):
                    length |= (<Py_ssize_t>src[ip + i]) << (8 * i)
                length += 1
                ip += extra
            if length > n - ip:
                code = SN_LITERAL_OVER
                break
            if length > cap - op:
                code = SN_OUTPUT_OVER
                break
            memcpy(dst + op, src + ip, length)
            ip += length
            op += length
            continue
        if (tag & 3) == 1:  # copy, 1-byte offset
            if n - ip < 2:
                code = SN_TAG_SHORT
                break
            length = 4 + ((tag >> 2) & 7)
            offset = ((tag >> 5) << 8) | src[ip + 1]
            ip += 2
        elif (tag & 3) == 2:  # copy, 2-byte offset
            if n - ip < 3:
                code = SN_TAG_SHORT
                break
            length = (tag >> 2) + 1
            offset = src[ip + 1] | (<Py_ssize_t>src[ip + 2] << 8)
            ip += 3
        else:  # copy, 4-byte offset
            if n - ip < 5:
                code = SN_TAG_SHORT
                break
            length = (tag >> 2) + 1
            offset = (src[ip + 1] | (<Py_ssize_t>src[ip + 2] << 8) | (<Py_ssize_t>src[ip + 3] << 16)
                      | (<Py_ssize_t>src[ip + 4] << 24))
            ip += 5
        if offset == 0 or offset > op:
            code = SN_OFFSET_BAD
            break
        if length > cap - op:
            code = SN_OUTPUT_OVER
            break
        if length <= 16 and offset >= 8 and cap - op >= 16:
            # the common short copy: two 8-byte moves, the second reading what the first wrote
            memcpy(dst + op, dst + op - offset, 8)
            memcpy(dst + op + 8, dst + op - offset + 8, 8)
        elif offset >= 8 and cap - op >= length + 8:
            # 8 bytes at a time: each read lies wholly in bytes already written (offset >= 8),
            # the last write's overshoot inside the room checked
            i = 0
            while i < length:
                memcpy(dst + op + i, dst + op - offset + i, 8)
                i += 8
        elif offset >= length:
            memcpy(dst + op, dst + op - offset, length)
        elif cap - op >= length + 8:
            # overlapping, offset < 8: the pattern written byte by byte over its first `period`
            # (a multiple of offset >= 8), then 8-byte moves from one period back
            period = offset * ((8 + offset - 1) // offset)
            i = 0
            while i < length and i < period:
                dst[op + i] = dst[op - offset + i]
                i += 1
            while i < length:
                memcpy(dst + op + i, dst + op + i - period, 8)
                i += 8
        else:  # overlapping at the output's end: byte by byte
            for i in range(length):
                dst[op + i] = dst[op - offset + i]
        op += length
    out_op[0] = op
    out_ip[0] = ip
    return code


cdef class Block:
    """One Snappy block decoded into `dst` (exactly its decoded length) as far as asked:
    `fill(want)` decodes on from where the last call stopped until at least `want` bytes are
    out (all of them at the latest), and returns how many are."""

    cdef const uint8_t[::1] src
    cdef uint8_t[::1] dst
    cdef readonly Py_ssize_t ip, op

    def __init__(self, const uint8_t[::1] src, uint8_t[::1] dst):
        length, start = decoded_length(src)
        if length != dst.shape[0]:
            raise ParquetFormatError(f"snappy block decodes to {length} bytes, its page says {dst.shape[0]}")
        self.src, self.dst, self.ip, self.op = src, dst, start, 0

    def fill(self, Py_ssize_t want=-1):
        cdef Py_ssize_t cap = self.dst.shape[0], n = self.src.shape[0], op = self.op, ip = self.ip
        cdef int code
        if want < 0 or want > cap:
            want = cap
        if op >= want:
            return op
        if want - op >= NOGIL_BYTES:
            with nogil:
                code = decode_block(&self.src[0], ip, n, &self.dst[0], cap, want, op, &op, &ip)
        else:  # a small page: releasing the GIL would cost more than decoding it (another thread takes it)
            code = decode_block(&self.src[0], ip, n, &self.dst[0], cap, want, op, &op, &ip)
        self.op, self.ip = op, ip
        if code != SN_OK:
            what = {SN_TAG_SHORT: "an element's header is cut short",
                    SN_LITERAL_OVER: "a literal runs past the input",
                    SN_OUTPUT_OVER: "an element runs past the decoded length",
                    SN_OFFSET_BAD: "a copy reaches before the output's start"}[code]
            raise ParquetFormatError(f"snappy block: {what} (input byte {ip}, output byte {op})")
        if op < want:
            raise ParquetFormatError(f"snappy block ends after {op} of its {cap} decoded bytes")
        if op == cap and ip != n:
            raise ParquetFormatError(f"snappy block: {n - ip} bytes after its last element")
        return op


NOGIL_BYTES = 64 * 1024  # output bytes: smaller fills keep the GIL (module docstring); read at each fill


def decode(const uint8_t[::1] src, uint8_t[::1] dst, Py_ssize_t want=-1):
    """Decode the Snappy block `src` into `dst` (exactly its decoded length), stopping once at
    least `want` bytes are out (-1: all of them); how many bytes were written. Raises
    ParquetFormatError for a malformed block, a length other than len(dst), or an input that ends
    before the output does."""
    return Block(src, dst).fill(want)
