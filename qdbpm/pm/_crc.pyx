# cython: language_level=3
"""Kernel: CRC-32 (zlib's) called from C, through ISA-L's `crc32_gzip_refl` in the `isal` package.

pm/crc.py computes the same CRC through isal's Python function; a kernel that checks a thousand
`_pm` files called it once per file, paying a memoryview, a call and a Python int each (5-15 %
of the walk that opens 1,000 partitions, measured with alternating builds). isal's extension
exports ISA-L's function, so this loads that file with dlopen (it is already mapped: pm/crc.py imported it) and calls the function
directly, without the GIL. It is the very code the Python function runs, so no answer changes;
where the symbol is not there, `crc_ready()` is false and callers keep the Python function.
"""

from libc.stdint cimport uint8_t, uint32_t, uint64_t

from .._dl cimport RTLD_LOCAL, RTLD_NOW, dlopen, dlsym, module_file
from .crc import BACKEND

# ISA-L: zlib's crc32(buf, init) == crc32_gzip_refl(init, buf, len) (it applies the inversions)
ctypedef uint32_t (*crc_t)(uint32_t init, const uint8_t* buf, uint64_t n) noexcept nogil

cdef crc_t _fn = NULL


def _load():
    """Resolve the function from isal's extension (found, not imported again); False when absent."""
    global _fn
    cdef void* h
    path = module_file("isal.isal_zlib") if BACKEND == "isal" else None
    if path is None:
        return False
    h = dlopen(<bytes>path, RTLD_NOW | RTLD_LOCAL)  # kept open: the module stays loaded
    if h == NULL:
        return False
    _fn = <crc_t>dlsym(h, b"crc32_gzip_refl")
    return _fn != NULL


READY = _load()


cdef bint crc_ready() noexcept nogil:
    return _fn != NULL


cdef uint32_t crc32_raw(uint32_t init, const uint8_t* p, size_t n) noexcept nogil:
    """zlib.crc32(p[:n], init); callers check crc_ready() first."""
    return _fn(init, p, <uint64_t>n)


def crc32(const uint8_t[::1] buf, uint32_t init=0):
    """crc32_raw over a buffer (tests hold it to zlib.crc32); raises where the function is absent."""
    if _fn == NULL:
        raise RuntimeError("isal's crc32_gzip_refl is not available")
    return crc32_raw(init, &buf[0] if buf.shape[0] else NULL, <size_t>buf.shape[0])
