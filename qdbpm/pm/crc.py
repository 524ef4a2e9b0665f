"""CRC-32 over `_pm` bytes, on a zero-copy view of the (usually mmapped) buffer.

Standard CRC-32 as zlib computes it (reflected 0xEDB88320, init/xorout 0xFFFFFFFF). ISA-L's
carry-less-multiply CRC (package `isal`) runs 5-12x faster than zlib 1.2's table CRC
(benchmarks/compare_bloom.py prints both); both release the GIL on large buffers. zlib is the fallback when isal
is not installed.
"""

try:
    from isal.isal_zlib import crc32 as _crc32

    BACKEND = "isal"
except ImportError:  # pragma: no cover - exercised only where isal is missing
    from zlib import crc32 as _crc32

    BACKEND = "zlib"


def crc32(buf, start: int, end: int, init: int = 0) -> int:
    """CRC of buf[start:end] (any buffer object), resumed from `init` (a previous CRC)."""
    with memoryview(buf) as mv, mv.cast("B") as flat, flat[start:end] as part:
        return _crc32(part, init) & 0xFFFFFFFF


# CRC of a whole contiguous buffer: the backend's own function, with no Python frame around it
# (kernels call it once per file: at 10,000 files a wrapper cost ~2.5 ms). Its result may need
# `& 0xFFFFFFFF` (old zlibs returned a signed int); the kernels apply it.
crc32_of = _crc32
