"""qdbpm.crc: standard CRC-32 over a zero-copy slice, resumable, ISA-L with a zlib fallback."""

import importlib
import mmap
import sys
import zlib

import numpy as np
import pytest

from qdbpm.pm import crc

# docs/format.md#example-files: A, and B (A after one update).
from support.golden_cases import EXAMPLE_A, EXAMPLE_B  # noqa: E402


def test_example_files_from_the_notes():
    assert len(EXAMPLE_A) == 196 and len(EXAMPLE_B) == 328
    assert crc.crc32(EXAMPLE_A, 8, 188) == 0x4D402CF8 == int.from_bytes(EXAMPLE_A[188:192], "little")
    stored_b = int.from_bytes(EXAMPLE_B[320:324], "little")
    assert crc.crc32(EXAMPLE_B, 8, 320) == stored_b
    assert crc.crc32(EXAMPLE_B, 188, 320, 0x4D402CF8) == stored_b  # resumed from A's stored CRC


@pytest.mark.parametrize("size", [0, 1, 15, 4096, 5 * 1024 + 1, 1 << 20, (4 << 20) + 3])
def test_equals_zlib_on_random_slices(size):
    buf = np.random.default_rng(size).integers(0, 256, size + 64, dtype=np.uint8).tobytes()
    for start in (0, 1, 7):
        end = start + size
        assert crc.crc32(buf, start, end) == zlib.crc32(buf[start:end])
        assert crc.crc32(buf, start, end, 0xDEADBEEF) == zlib.crc32(buf[start:end], 0xDEADBEEF)


def test_resume_and_buffer_kinds(tmp_path):
    data = np.random.default_rng(1).integers(0, 256, 300_000, dtype=np.uint8)
    whole = zlib.crc32(data.tobytes()[8:])
    for buf in (data, data.tobytes(), bytearray(data.tobytes()), memoryview(data.tobytes()),
                data.view(np.uint32)):  # a multi-byte view is read as its bytes
        assert crc.crc32(buf, 8, len(data)) == whole
        mid = crc.crc32(buf, 8, 123_457)
        assert crc.crc32(buf, 123_457, len(data), mid) == whole
    path = tmp_path / "f"
    path.write_bytes(data.tobytes())
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert crc.crc32(mm, 8, len(data)) == whole
    assert crc.crc32(b"abc", 2, 2, 1234) == 1234  # empty range: the init value back


def test_backend_is_isal_when_installed_and_zlib_otherwise(monkeypatch):
    try:
        importlib.import_module("isal.isal_zlib")
        assert crc.BACKEND == "isal"
    except ImportError:
        assert crc.BACKEND == "zlib"
    monkeypatch.setitem(sys.modules, "isal", None)  # makes `import isal...` raise ImportError
    monkeypatch.setitem(sys.modules, "isal.isal_zlib", None)
    fallback = importlib.reload(crc)
    try:
        assert fallback.BACKEND == "zlib"
        assert fallback.crc32(EXAMPLE_A, 8, 188) == 0x4D402CF8
    finally:
        monkeypatch.undo()
        importlib.reload(crc)
    assert crc.BACKEND in ("isal", "zlib")


def test_the_kernels_crc_is_isal_called_from_c_and_equals_zlib():
    # pm/_crc.pyx: ISA-L's crc32_gzip_refl taken from isal's extension, which pm/_batch calls
    # once per file without Python; zlib.crc32 is its reference.
    from qdbpm.pm import _crc

    assert crc.BACKEND == "isal" and _crc.READY  # isal is a dependency: README's install has it
    rng = np.random.default_rng(20261130)
    data = rng.integers(0, 256, 70_000, dtype=np.uint8).tobytes()
    for n in list(range(0, 260)) + [4095, 4096, 6000, 65_537]:
        start = int(rng.integers(0, 64))
        part = data[start:start + n]
        init = int(rng.integers(0, 1 << 32))
        assert _crc.crc32(part) == zlib.crc32(part)
        assert _crc.crc32(part, init) == zlib.crc32(part, init)
    assert _crc.crc32(EXAMPLE_A[8:188]) == 0x4D402CF8
