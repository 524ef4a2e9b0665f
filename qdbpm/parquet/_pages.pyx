# cython: language_level=3
"""Kernel: the bodies of decompressed Parquet data pages to flat arrays (`pages` is the wrapper).

Three loops numpy cannot vectorise: the RLE / bit-packed hybrid (definition levels and dictionary
indices), the index of a PLAIN BYTE_ARRAY run (4-byte little-endian lengths between the values),
and the take of chosen byte strings into Arrow's offsets and data buffers. Every read is checked against
the end of its buffer; a malformed run raises ParquetFormatError naming the byte, never reads past.
"""

cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

import numpy as np

from ..errors import ParquetFormatError
from .. import buffers


cdef inline uint64_t load8(const uint8_t* p) noexcept nogil:
    """8 bytes at p, little-endian (the caller knows all 8 lie inside the buffer)."""
    cdef uint64_t v
    memcpy(&v, p, 8)
    return v


cdef inline uint64_t load_le(const uint8_t* p, Py_ssize_t avail) noexcept nogil:
    """Up to 8 bytes at p, little-endian; bytes at or past `avail` read as 0."""
    cdef uint64_t v = 0
    cdef Py_ssize_t i
    if avail >= 8:
        memcpy(&v, p, 8)  # x86-64 / aarch64 are little-endian, as the setup.py targets are
        return v
    for i in range(avail):
        v |= (<uint64_t>p[i]) << (8 * i)
    return v


def rle_hybrid(const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t end, int bit_width, Py_ssize_t count,
               int32_t[::1] out, int64_t limit):
    """Decode `count` values of the RLE / bit-packed hybrid in buf[pos:end] into out[:count]; each
    must be < `limit` (the dictionary size, or max level + 1). Returns the end of the last run read."""
    cdef Py_ssize_t n = 0, k, take, start, need, fast, room
    cdef uint64_t header, shift, v, mask, bits, top
    cdef int width = (bit_width + 7) // 8
    cdef const uint8_t* p
    if bit_width < 0 or bit_width > 32:
        raise ParquetFormatError(f"RLE/bit-packed run at byte {pos}: bit width {bit_width} is over 32")
    if end > buf.shape[0] or pos < 0 or pos > end or count > out.shape[0]:
        raise ParquetFormatError("RLE/bit-packed run: bounds outside the page")
    mask = (<uint64_t>1 << bit_width) - 1
    p = &buf[0] if buf.shape[0] else NULL
    with nogil:
        while n < count:
            start = pos
            header = 0
            shift = 0
            while True:  # ULEB128 run header, at most 5 bytes (a uint32)
                if pos >= end or shift > 28:
                    with gil:
                        raise ParquetFormatError(f"RLE/bit-packed run header at byte {start} is truncated or "
                                                 f"over 5 bytes ({n} of {count} values read)")
                bits = p[pos]
                header |= (bits & 0x7F) << shift
                pos += 1
                shift += 7
                if bits < 0x80:
                    break
            if header & 1:  # bit-packed: (header >> 1) groups of 8 values
                take = <Py_ssize_t>(header >> 1) * 8
                if take > count - n:
                    take = count - n
                need = (take * bit_width + 7) // 8  # bytes the values used here occupy
                if need > end - pos:
                    with gil:
                        raise ParquetFormatError(f"bit-packed run at byte {start} needs {need} bytes, "
                                                 f"{end - pos} left")
                # Values whose 8-byte load ends inside the buffer take the plain loop (no length
                # test, the limit checked once on the run's largest value); the rest load_le.
                fast = take
                if bit_width:
                    room = end - pos - 8
                    fast = 0 if room < 0 else min(take, (room * 8 + 7) // bit_width + 1)
                top = 0
                for k in range(fast):
                    bits = <uint64_t>k * bit_width
                    v = (load8(p + pos + (bits >> 3)) >> (bits & 7)) & mask
                    out[n + k] = <int32_t>v
                    top = v if v > top else top
                for k in range(fast, take):
                    bits = <uint64_t>k * bit_width
                    v = (load_le(p + pos + (bits >> 3), end - pos - <Py_ssize_t>(bits >> 3)) >> (bits & 7)) & mask
                    out[n + k] = <int32_t>v
                    top = v if v > top else top
                if top >= <uint64_t>limit:
                    for k in range(take):  # name the first value over the limit
                        v = <uint32_t>out[n + k]
                        if v >= <uint64_t>limit:
                            with gil:
                                raise ParquetFormatError(f"bit-packed run at byte {start}: value {v} is not below "
                                                         f"{limit}")
                pos += (<Py_ssize_t>(header >> 1)) * bit_width if (<Py_ssize_t>(header >> 1)) * bit_width <= end - pos \
                    else need
                n += take
            else:  # RLE: one value repeated (header >> 1) times
                if width > end - pos:
                    with gil:
                        raise ParquetFormatError(f"RLE run at byte {start}: value truncated")
                v = load_le(p + pos, width) & mask if width else 0
                pos += width
                if v >= <uint64_t>limit:
                    with gil:
                        raise ParquetFormatError(f"RLE run at byte {start}: value {v} is not below {limit}")
                take = <Py_ssize_t>(header >> 1)
                if take > count - n:
                    take = count - n
                for k in range(take):
                    out[n + k] = <int32_t>v
                n += take
    return pos


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


def rle_lookup_and(const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t end, int bit_width, Py_ssize_t count,
                   const uint8_t[::1] lut, uint8_t[::1] out, int64_t limit):
    """out[k] &= lut[v_k] for the `count` values v_k of the RLE / bit-packed hybrid in
    buf[pos:end]: `rle_hybrid` and a lookup in one pass, no index array. Every run is checked
    as `rle_hybrid` checks it, each value against `limit` (the dictionary's size, at most
    len(lut)). Returns the end of the last run read."""
    cdef Py_ssize_t n = 0, k, take, start, need
    cdef uint64_t header, shift, v, mask, bits
    cdef int width = (bit_width + 7) // 8
    cdef const uint8_t* p
    cdef uint8_t t
    if bit_width < 0 or bit_width > 32:
        raise ParquetFormatError(f"RLE/bit-packed run at byte {pos}: bit width {bit_width} is over 32")
    if end > buf.shape[0] or pos < 0 or pos > end or count > out.shape[0] or limit > lut.shape[0] or limit < 0:
        raise ParquetFormatError("RLE/bit-packed run: bounds outside the page")
    mask = (<uint64_t>1 << bit_width) - 1
    p = &buf[0] if buf.shape[0] else NULL
    with nogil:
        while n < count:
            start = pos
            header = 0
            shift = 0
            while True:
                if pos >= end or shift > 28:
                    with gil:
                        raise ParquetFormatError(f"RLE/bit-packed run header at byte {start} is truncated or "
                                                 f"over 5 bytes ({n} of {count} values read)")
                bits = p[pos]
                header |= (bits & 0x7F) << shift
                pos += 1
                shift += 7
                if bits < 0x80:
                    break
            if header & 1:
                take = <Py_ssize_t>(header >> 1) * 8
                if take > count - n:
                    take = count - n
                need = (take * bit_width + 7) // 8
                if need > end - pos:
                    with gil:
                        raise ParquetFormatError(f"bit-packed run at byte {start} needs {need} bytes, "
                                                 f"{end - pos} left")
                for k in range(take):
                    bits = <uint64_t>k * bit_width
                    if end - pos - <Py_ssize_t>(bits >> 3) >= 8:
                        v = (load8(p + pos + (bits >> 3)) >> (bits & 7)) & mask
                    else:
                        v = (load_le(p + pos + (bits >> 3), end - pos - <Py_ssize_t>(bits >> 3)) >> (bits & 7)) & mask
                    if v >= <uint64_t>limit:
                        with gil:
                            raise ParquetFormatError(f"bit-packed run at byte {start}: value {v} is not below "
                                                     f"{limit}")
                    out[n + k] &= lut[v]
                pos += (<Py_ssize_t>(header >> 1)) * bit_width if (<Py_ssize_t>(header >> 1)) * bit_width <= end - pos \
                    else need
                n += take
            else:
                if width > end - pos:
                    with gil:
                        raise ParquetFormatError(f"RLE run at byte {start}: value truncated")
                v = load_le(p + pos, width) & mask if width else 0
                pos += width
                if v >= <uint64_t>limit:
                    with gil:
                        raise ParquetFormatError(f"RLE run at byte {start}: value {v} is not below {limit}")
                take = <Py_ssize_t>(header >> 1)
                if take > count - n:
                    take = count - n
                t = lut[v]
                if not t:
                    for k in range(take):
                        out[n + k] = 0
                n += take
    return pos
