# cython: language_level=3
"""Kernel: Parquet's LZ4_RAW pages, an LZ4 block without framing, decoded whole (`codecs` and the
chunk walk `_split` are its callers; pyarrow's "lz4_raw" codec is its reference in the tests).

QuestDB writes its Parquet partitions with LZ4_RAW. The chunk walk that runs without the GIL on
the offload worker (table/_offload.pyx) takes Snappy pages through `_snappy`; this is the same for
LZ4, so a QuestDB partition's chunks are split ahead of a scan as a Snappy file's are, not left to
the Python walk and pyarrow's codec one page at a time.

The format (github.com/lz4/lz4, doc/lz4_Block_format.md): sequences of a token (high nibble the
literal length, low nibble the match length - 4; 15 means more length bytes follow, each added,
until one is not 255), the literals, a 2-byte little-endian offset back into the output and the
match copied from there (it may overlap what it writes). The last sequence has literals only and
ends the block. Every length is checked against the bytes left on both sides before anything is
copied, an offset must be 1 .. bytes written, and the block must fill its page exactly: a malformed
one gives an error code, never a read or write outside either buffer (tests/test_kernel_bounds.py).
The fast paths copy 16 / 8 bytes at a time only where both buffers have that room left: the
common sequence (both lengths under 15, an offset of 8 or more) takes no check per copy while the
input holds 32 more bytes and the output 48.
"""

cimport cython
from libc.stdint cimport uint8_t
from libc.string cimport memcpy

from ..errors import ParquetFormatError

MAX_RATIO = LZ4_MAX_RATIO  # the most a page may claim, times its size (_lz4.pxd): callers refuse more

_MESSAGES = {LZ4_TRUNCATED: "a sequence is cut short", LZ4_LITERAL_OVER: "literals run past the input",
             LZ4_OUTPUT_OVER: "a sequence runs past the page's size", LZ4_OFFSET_BAD: "a match reaches before the output's start",
             LZ4_SHORT: "the block ends before the page's size"}


cdef inline Py_ssize_t _longer(const uint8_t* src, Py_ssize_t n, Py_ssize_t* ip, Py_ssize_t length,
                              Py_ssize_t most) noexcept nogil:
    """A length nibble of 15 and the length bytes from src[ip[0]]: each added, until one is not
    255. -1 when the input ends first, -2 once past `most` (so the sum cannot overflow)."""
    cdef unsigned int b
    while True:
        if ip[0] >= n:
            return -1
        b = src[ip[0]]
        ip[0] += 1
        length += b
        if length > most:
            return -2
        if b != 255:
            return length


@cython.boundscheck(False)
@cython.wraparound(False)
cdef int decode_block(const uint8_t* src, Py_ssize_t n, uint8_t* dst, Py_ssize_t cap,
                      Py_ssize_t* at) noexcept nogil:
    """The block src[:n] into dst[:cap], which it must fill exactly: LZ4_OK, or what is wrong
    (`at`: the input byte of the sequence at fault)."""
    cdef Py_ssize_t ip = 0, op = 0, lit, mlen, off, i, seq
    cdef unsigned int token
    if n == 0:
        at[0] = 0
        return LZ4_OK if cap == 0 else LZ4_TRUNCATED
    while True:
        # The common sequence (literals and match both under 15, offset 8 or more) without a
        # check per copy: while the input holds 32 more bytes (a token, 14 literals, an offset)
        # and the output 48 (16 of literals, 24 of match), copies overshoot inside that room.
        while n - ip >= 32 and cap - op >= 48:
            token = src[ip]
            lit = token >> 4
            mlen = token & 15
            if lit == 15 or mlen == 15:
                break
            off = src[ip + 1 + lit] | (<Py_ssize_t>src[ip + 2 + lit] << 8)
            if off < 8 or off > op + lit:
                break
            memcpy(dst + op, src + ip + 1, 16)
            op += lit
            ip += 3 + lit
            # at most 18 bytes from 8 or more back: three 8-byte moves, each reading bytes written
            memcpy(dst + op, dst + op - off, 8)
            memcpy(dst + op + 8, dst + op - off + 8, 8)
            memcpy(dst + op + 16, dst + op - off + 16, 8)
            op += mlen + 4
        seq = ip
        at[0] = seq
        if ip >= n:
            return LZ4_TRUNCATED
        token = src[ip]
        ip += 1
        lit = token >> 4
        if lit == 15:
            lit = _longer(src, n, &ip, lit, n)  # no literal run is longer than the input
            if lit < 0:
                return LZ4_TRUNCATED if lit == -1 else LZ4_LITERAL_OVER
        if lit > n - ip:
            return LZ4_LITERAL_OVER
        if lit > cap - op:
            return LZ4_OUTPUT_OVER
        if lit <= 16 and n - ip >= 16 and cap - op >= 16:
            memcpy(dst + op, src + ip, 16)  # room for 16 on both sides: one wide copy
        else:
            memcpy(dst + op, src + ip, lit)
        ip += lit
        op += lit
        if ip == n:  # the last sequence: literals only
            return LZ4_OK if op == cap else LZ4_SHORT
        if n - ip < 2:
            return LZ4_TRUNCATED
        off = src[ip] | (<Py_ssize_t>src[ip + 1] << 8)
        ip += 2
        if off == 0 or off > op:
            return LZ4_OFFSET_BAD
        mlen = token & 15
        if mlen == 15:
            mlen = _longer(src, n, &ip, mlen, cap)  # no match is longer than the page
            if mlen < 0:
                return LZ4_TRUNCATED if mlen == -1 else LZ4_OUTPUT_OVER
        mlen += 4
        if mlen > cap - op:
            return LZ4_OUTPUT_OVER
        if off >= 16 and cap - op >= mlen + 16:
            # 16 bytes at a time: each read lies wholly in bytes written before it (offset >= 16),
            # the last write's overshoot inside the room checked
            i = 0
            while i < mlen:
                memcpy(dst + op + i, dst + op - off + i, 16)
                i += 16
        elif off >= 8 and cap - op >= mlen + 8:
            i = 0
            while i < mlen:
                memcpy(dst + op + i, dst + op - off + i, 8)
                i += 8
        else:  # a short period (a run of one value), or at the page's end: byte by byte
            for i in range(mlen):
                dst[op + i] = dst[op - off + i]
        op += mlen


def decode(const uint8_t[::1] src, uint8_t[::1] dst):
    """Decode the LZ4 block `src` into `dst` (exactly the page's size); raises ParquetFormatError
    for a malformed block or one that does not fill `dst` exactly."""
    cdef Py_ssize_t at = 0
    cdef int code
    with nogil:
        code = decode_block(&src[0] if src.shape[0] else NULL, src.shape[0],
                            &dst[0] if dst.shape[0] else NULL, dst.shape[0], &at)
    if code != LZ4_OK:
        raise ParquetFormatError(f"lz4 block: {_MESSAGES[code]} (input byte {at}, page of {dst.shape[0]} bytes)")
