"""The filter pass's last lookup fused with its keep mask's rows (`_pages.rle_lookup_rows`) against
its reference, np.flatnonzero(keep & lut[values]) + base: random RLE / bit-packed streams of every
width, the pair and group fast paths, RLE runs, an offset j into the output, nothing written past
its room, and the same errors as `rle_lookup_and` for a value over the limit or a truncated stream."""

import numpy as np
import pytest

from qdbpm.errors import ParquetFormatError
from qdbpm.parquet import _pages
from support.rle_runs import uleb, random_runs, rle_reference

SENTINEL = -7


def _rows(buf, bw, count, lut, keep, limit, base, j):
    """(the new j, the output) of rle_lookup_rows into an output of exactly its room, plus 16
    sentinels that must stay."""
    out = np.full(j + count + 8 + 16, SENTINEL, np.int64)
    out[:j] = np.arange(j)
    got = _pages.rle_lookup_rows(buf, 0, len(buf), bw, count, lut, keep, limit, base, out[:j + count + 8], j)
    assert (out[j + count + 8:] == SENTINEL).all()
    return got, out


@pytest.mark.parametrize("seed", range(60))
def test_rle_lookup_rows_equals_the_reference(seed):
    rng = np.random.default_rng(4100 + seed)
    bw = int(rng.integers(0, 11))
    buf, made = random_runs(rng, bw, int(rng.integers(1, 3000)))
    count = int(rng.integers(0, made + 1))
    size = 1 << bw
    lut = (rng.random(size) < [0.0, 0.3, 1.0][seed % 3]).astype(np.uint8)
    keep = (rng.random(count) < [0.125, 0.9, 1.0, 0.0][seed % 4]).astype(np.uint8)
    values = np.array(rle_reference(buf, 0, len(buf), bw, count), np.int64)
    base, j = int(rng.integers(0, 10**6)), int(rng.integers(0, 20))
    want = np.flatnonzero(keep & lut[values]) + base if count else np.zeros(0, np.int64)
    got, out = _rows(buf, bw, count, lut, keep, size, base, j)
    assert got == j + len(want)
    assert out[:j].tolist() == list(range(j))
    assert out[j:got].tolist() == want.tolist()
    # the same answers as rle_lookup_and's mask, and keep untouched
    mask = keep.copy()
    _pages.rle_lookup_and(buf, 0, len(buf), bw, count, lut, mask, size)
    assert (np.flatnonzero(mask) + base).tolist() == want.tolist()
    assert keep.tolist() == (rng.random(0).tolist() or keep.tolist())
    if count:  # a truncated stream: the same rows or a clear error
        cut = int(rng.integers(0, len(buf)))
        try:
            got, out = _rows(buf[:cut].copy(), bw, count, lut, keep, size, base, j)
        except ParquetFormatError:
            pass
        else:
            assert out[j:got].tolist() == want.tolist()


@pytest.mark.parametrize("bw", range(1, 9))
def test_rle_lookup_rows_fast_paths_and_the_limit(bw):
    """Pairs (widths 1-6 over many values) and groups of 8, an RLE run between bit-packed runs,
    and a value at or over the limit named as rle_lookup_and names it."""
    rng = np.random.default_rng(4300 + bw)
    limit = int(rng.integers(1, (1 << bw) + 1))
    sizes = [8 * int(rng.integers(1, 800)) for _ in range(3)]
    sizes[0] = max(sizes[0], 8 * ((2 << (2 * min(bw, 6))) // 8 + 1))
    runs = [rng.integers(0, limit, n) for n in sizes]
    rle_value, rle_count = int(rng.integers(0, limit)), int(rng.integers(1, 100))

    def encode(runs):
        body = b""
        for i, vals in enumerate(runs):
            bits = sum(int(v) << (bw * k) for k, v in enumerate(vals))
            body += uleb((len(vals) // 8) << 1 | 1) + bits.to_bytes(len(vals) * bw // 8, "little")
            if i == 0:
                body += uleb(rle_count << 1) + rle_value.to_bytes((bw + 7) // 8, "little")
        return np.frombuffer(body, np.uint8)

    vals = np.concatenate([runs[0], np.full(rle_count, rle_value), *runs[1:]])
    n = len(vals)
    for trial in range(3):
        lut = rng.integers(0, 2, limit).astype(np.uint8)
        lut[rle_value] = trial % 2  # the RLE run both kept and dropped
        keep = rng.integers(0, 2, n).astype(np.uint8)
        got, out = _rows(encode(runs), bw, n, lut, keep, limit, 5, 3)
        assert out[3:got].tolist() == (np.flatnonzero(keep & lut[vals]) + 5).tolist()
    if limit < 1 << bw:
        r = int(rng.integers(0, 3))
        at = int(rng.integers(0, len(runs[r])))
        bad = [v.copy() for v in runs]
        bad[r][at] = int(rng.integers(limit, 1 << bw))
        with pytest.raises(ParquetFormatError, match=f"value {bad[r][at]} is not below {limit}"):
            _rows(encode(bad), bw, n, np.ones(limit, np.uint8), np.ones(n, np.uint8), limit, 0, 0)


def test_rle_lookup_rows_refuses_a_room_too_small():
    buf = np.frombuffer(uleb(2 << 1 | 1) + bytes(2), np.uint8)  # 16 values of width 1
    for room, j in ((23, 0), (10, 0), (30, 8), (0, 0)):
        out = np.full(room + 16, SENTINEL, np.int64)
        with pytest.raises(ParquetFormatError):
            _pages.rle_lookup_rows(buf, 0, len(buf), 1, 16, np.ones(2, np.uint8), np.ones(16, np.uint8), 2, 0,
                                   out[:room], j)
        assert (out[room:] == SENTINEL).all()
    with pytest.raises(ParquetFormatError):  # more values than the keep mask
        _pages.rle_lookup_rows(buf, 0, len(buf), 1, 16, np.ones(2, np.uint8), np.ones(15, np.uint8), 2, 0,
                               np.empty(64, np.int64), 0)
