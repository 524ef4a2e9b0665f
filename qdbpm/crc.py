"""CRC-32 over `_pm` bytes: zlib's C crc32 on a zero-copy view (the GIL is released for large
buffers). Standard CRC-32 as zlib computes it (reflected 0xEDB88320, init/xorout 0xFFFFFFFF)."""

import zlib


def crc32(buf, start: int, end: int, init: int = 0) -> int:
    """CRC of buf[start:end] (any buffer object), resumed from `init` (a previous CRC)."""
    with memoryview(buf) as mv, mv.cast("B") as flat, flat[start:end] as part:
        return zlib.crc32(part, init) & 0xFFFFFFFF
