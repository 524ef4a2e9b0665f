"""The LZ4_RAW kernel (`parquet/_lz4.pyx`) against its reference, pyarrow's "lz4_raw" codec (the
LZ4 library): every block the library writes decodes to the same bytes, length bytes of 15 and 255
included; a block the library decodes to a page's exact size, ours decodes to the same bytes; a
malformed block is a ParquetFormatError naming the byte, never a different value. Out-of-bounds
safety against guard pages: tests/test_kernel_bounds.py."""

import numpy as np
import pyarrow as pa
import pytest

from qdbpm.errors import ParquetFormatError
from qdbpm.parquet import _lz4, codecs
from qdbpm.pm import layout as L
from support.parquet_oracle import arrow_decompressed

CODEC = pa.Codec("lz4_raw")


def _data(rng, kind, n):
    if kind == 0:
        d = rng.integers(0, 256, n, dtype=np.uint8)  # incompressible: long literal runs
    elif kind == 1:
        d = np.zeros(n, np.uint8)  # one match as long as the page: 255-byte length runs
    elif kind == 2:  # short periods: overlapping matches of offset 1 .. 19
        d = np.tile(rng.integers(0, 256, int(rng.integers(1, 20)), dtype=np.uint8), n + 1)[:n]
    elif kind == 3:  # int64 values (a price column)
        d = (np.arange(n // 8 + 1, dtype=np.int64) * int(rng.integers(1, 999))).view(np.uint8)[:n]
    elif kind == 4:
        d = rng.integers(0, 3, n, dtype=np.uint8)
    else:  # runs of 300: matches beside literals of every length
        d = np.repeat(rng.integers(0, 256, n // 300 + 1, dtype=np.uint8), 300)[:n]
    return np.ascontiguousarray(d)


def _block(d):
    return np.frombuffer(CODEC.compress(d, asbytes=True), np.uint8)


def _ours(b, size):
    out = np.empty(size, np.uint8)
    _lz4.decode(b, out)
    return bytes(out)


def test_every_block_the_library_writes_decodes_to_the_same_bytes():
    rng = np.random.default_rng(4)
    for case in range(1200):
        n = int(rng.integers(0, 40000)) if case % 10 else int(rng.integers(0, 40))
        d = _data(rng, case % 6, n)
        assert _ours(_block(d), n) == d.tobytes(), case


@pytest.mark.parametrize("n", [0, 1, 14, 15, 16, 17, 19, 270, 271, 4 + 15 + 255, 65536, 65537, 300000])
def test_length_boundaries(n):
    rng = np.random.default_rng(n)
    for kind in range(6):
        d = _data(rng, kind, n)
        assert _ours(_block(d), n) == d.tobytes()


def test_a_block_that_does_not_fill_its_page_exactly_is_an_error():
    d = _data(np.random.default_rng(1), 3, 5000)
    b = _block(d)
    for size in (4999, 5001, 0, 10000):
        with pytest.raises(ParquetFormatError, match="lz4 block"):
            _ours(b, size)


@pytest.mark.parametrize("block, what", [
    (b"", "cut short"),                          # nothing, for a page of bytes
    (b"\xf0", "cut short"),                      # 15 literals announced, their length byte missing
    (b"\x50abc", "past the input"),              # 5 literals, 3 there
    (b"\x10a\x00\x00", "before the output's start"),   # offset 0
    (b"\x10a\x05\x00", "before the output's start"),   # offset 5 with 1 byte written
    (b"\x10a\x01", "cut short"),                 # a 1-byte offset
    (b"\x1fa\x01\x00", "cut short"),             # match length 15 announced, its length byte missing
    (b"\x10a\x01\x00\x10b", "past the page's size"),  # 1 + 4 + 1 bytes for a page of 3
])
def test_malformed_blocks_name_what_is_wrong(block, what):
    with pytest.raises(ParquetFormatError, match=what):
        _ours(np.frombuffer(block, np.uint8), 3)


def test_mutated_blocks_decode_as_the_library_or_raise():
    """Never a different value: where a mutated block decodes here, the library decodes it to the
    same bytes; where it does not, the library fails too or gives another size."""
    rng = np.random.default_rng(9)
    checked = agreed = 0
    for case in range(400):
        n = int(rng.integers(1, 6000))
        b = bytearray(_block(_data(rng, case % 6, n)).tobytes())
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        if rng.random() < 0.3:
            b = b[:int(rng.integers(0, len(b) + 1))]
        b = np.frombuffer(bytes(b), np.uint8)
        theirs = arrow_decompressed("lz4_raw", b, n)
        try:
            ours = _ours(b, n)
        except ParquetFormatError:
            ours = None
        checked += 1
        if ours is not None:
            assert ours == theirs, case
            agreed += 1
    assert checked == 400 and agreed > 0


def test_the_python_walk_refuses_a_page_claiming_more_than_lz4_can_decode():
    with pytest.raises(ParquetFormatError, match="says it decodes to"):
        codecs.decompress(L.CODEC_LZ4_RAW, np.frombuffer(b"\x10a", np.uint8), 2**31 - 1)
