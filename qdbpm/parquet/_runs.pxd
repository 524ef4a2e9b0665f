# cython: language_level=3
"""The RLE / bit-packed hybrid's run walker, shared by the page kernels (`_pages`, and any other
kernel module that walks runs): `next_run` reads and checks one run's header; the kernels differ
only in what they do with a run's values. Errors raise ParquetFormatError naming the byte
(`_error`, on the error path only).
"""

from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcpy


cdef inline object _error(str message):
    from ..errors import ParquetFormatError  # a .pxd holds no module-level import
    return ParquetFormatError(message)


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


cdef struct Runs:
    # A walk over the runs of an RLE / bit-packed hybrid: `next_run` reads one run's header and
    # checks it; the kernels only differ in what they do with a run's values.
    const uint8_t* p
    Py_ssize_t pos, end, start, n, count, take, need, groups
    int bit_width, width
    uint64_t mask, value
    bint packed


cdef enum:
    RUN_OK, RUN_HEADER, RUN_PACKED_SHORT, RUN_VALUE_SHORT, RUN_VALUE_OVER


cdef inline int next_run(Runs* r, int64_t limit) noexcept nogil:
    """The next run from r.pos: r.packed, r.take values (those still wanted of r.count) from
    value r.n on; a bit-packed run's bytes start at r.p + r.pos (r.need of them read), an RLE
    run's value is r.value (checked < limit, r.pos past it). RUN_OK or the error's code."""
    cdef uint64_t header = 0, shift = 0, bits
    r.start = r.pos
    while True:  # ULEB128 run header, at most 5 bytes (a uint32)
        if r.pos >= r.end or shift > 28:
            return RUN_HEADER
        bits = r.p[r.pos]
        header |= (bits & 0x7F) << shift
        r.pos += 1
        shift += 7
        if bits < 0x80:
            break
    r.packed = header & 1
    if r.packed:  # (header >> 1) groups of 8 values
        r.groups = <Py_ssize_t>(header >> 1)
        r.take = r.groups * 8
        if r.take > r.count - r.n:
            r.take = r.count - r.n
        r.need = (r.take * r.bit_width + 7) // 8  # bytes the values used here occupy
        return RUN_PACKED_SHORT if r.need > r.end - r.pos else RUN_OK
    if r.width > r.end - r.pos:  # RLE: one value repeated (header >> 1) times
        return RUN_VALUE_SHORT
    r.value = load_le(r.p + r.pos, r.width) & r.mask if r.width else 0
    r.pos += r.width
    if r.value >= <uint64_t>limit:
        return RUN_VALUE_OVER
    r.take = <Py_ssize_t>(header >> 1)
    if r.take > r.count - r.n:
        r.take = r.count - r.n
    return RUN_OK


cdef inline void end_packed(Runs* r) noexcept nogil:
    """Past a bit-packed run: all its groups' bytes, or those read when the page ends sooner."""
    r.pos += r.groups * r.bit_width if r.groups * r.bit_width <= r.end - r.pos else r.need
    r.n += r.take


cdef inline int init_runs(Runs* r, const uint8_t* p, Py_ssize_t size, Py_ssize_t pos, Py_ssize_t end,
                          int bit_width, Py_ssize_t count, Py_ssize_t room) noexcept nogil:
    """Set up the walk over p[pos:end] (p holds `size` bytes; `room`: the output's length):
    0, or 1 for a width over 32, 2 for bounds outside the buffer (nothing set up then)."""
    if bit_width < 0 or bit_width > 32:
        return 1
    if end > size or pos < 0 or pos > end or count > room:
        return 2
    r.p = p
    r.pos, r.end, r.n, r.count = pos, end, 0, count
    r.bit_width, r.width = bit_width, (bit_width + 7) // 8
    r.mask = (<uint64_t>1 << bit_width) - 1
    return 0


cdef inline int start_runs(Runs* r, const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t end, int bit_width,
                    Py_ssize_t count, Py_ssize_t room) except -1:
    """init_runs over a buffer, raising what is wrong."""
    cdef int code = init_runs(r, &buf[0] if buf.shape[0] else NULL, buf.shape[0], pos, end, bit_width, count, room)
    if code == 1:
        raise _error(f"RLE/bit-packed run at byte {pos}: bit width {bit_width} is over 32")
    if code == 2:
        raise _error("RLE/bit-packed run: bounds outside the page")
    return 0


cdef inline int run_error(Runs* r, int code, int64_t limit) except -1 with gil:
    if code == RUN_HEADER:
        raise _error(f"RLE/bit-packed run header at byte {r.start} is truncated or over 5 bytes "
                                 f"({r.n} of {r.count} values read)")
    if code == RUN_PACKED_SHORT:
        raise _error(f"bit-packed run at byte {r.start} needs {r.need} bytes, {r.end - r.pos} left")
    if code == RUN_VALUE_SHORT:
        raise _error(f"RLE run at byte {r.start}: value truncated")
    raise _error(f"RLE run at byte {r.start}: value {r.value} is not below {limit}")


cdef inline int value_error(Runs* r, uint64_t v, int64_t limit) except -1 with gil:
    raise _error(f"bit-packed run at byte {r.start}: value {v} is not below {limit}")
