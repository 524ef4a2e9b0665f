"""The block kernels (qdbpm/pm/_encode.pyx) against the numpy passes they replace, and
its bounds checks; the encoder's bytes themselves are held by the golden files (test_golden.py)."""

import numpy as np
import pytest

from qdbpm.errors import PmError
from qdbpm.pm import _encode
from qdbpm.pm import layout as L


def fill_reference(out, at, rows, num_rows, chunks, flags, sizes, mins, maxs):
    """The numpy passes fill_blocks replaces: copy the records, overwrite the derived fields."""
    C = chunks.shape[1] // 64
    recs = np.array(chunks[rows]).view(L.CHUNK_DTYPE).reshape(len(rows), C)
    recs["stat_flags"], recs["stat_sizes"] = flags, sizes
    recs["reserved"] = 0
    recs["min_stat"], recs["max_stat"] = mins, maxs
    for i, a in enumerate(at.tolist()):
        out[a : a + 8] = np.frombuffer(np.uint64(num_rows[rows[i]]).astype("<u8").tobytes(), np.uint8)
        out[a + 8 : a + 8 + 64 * C] = recs[i].view(np.uint8)


def _fill_case(rng):
    R, C, n = int(rng.integers(1, 30)), int(rng.integers(0, 6)), int(rng.integers(0, 40))
    chunks = rng.integers(0, 256, (R, 64 * C), dtype=np.uint8)
    rows = rng.integers(0, R, n).astype(np.int64)
    w = 8 + 64 * C
    size = w * n + int(rng.integers(0, 100))
    at = np.sort(rng.choice(np.arange(0, size - w + 1, 8), n, replace=n > (size - w) // 8))
    num_rows = rng.integers(0, 1 << 63, R, dtype=np.uint64)
    flags = rng.integers(0, 256, (n, C), dtype=np.uint8)
    sizes = rng.integers(0, 256, (n, C), dtype=np.uint8)
    slots = rng.integers(0, 1 << 63, (n, C, 2), dtype=np.uint64)  # strided views, as the encoder passes
    return size, (at.astype(np.int64), rows, num_rows, chunks, flags, sizes, slots[..., 0], slots[..., 1])


@pytest.mark.parametrize("seed", range(30))
def test_fill_blocks_equals_the_numpy_passes(seed):
    rng = np.random.default_rng(seed)
    size, args = _fill_case(rng)
    got, want = np.zeros(size, np.uint8), np.zeros(size, np.uint8)
    _encode.fill_blocks(got, *args)
    fill_reference(want, *args)
    assert np.array_equal(got, want)


def test_fill_blocks_refuses_what_does_not_fit_before_writing():
    rng = np.random.default_rng(7)
    while True:
        size, args = _fill_case(rng)
        if len(args[0]) >= 2 and args[3].shape[1]:
            break
    at, rows = args[0], args[1]
    for bad_at, bad_rows, match in (
        (np.r_[at[:-1], size - 7], rows, "does not fit"),
        (np.r_[at[:-1], -8], rows, "does not fit"),
        (at, np.r_[rows[:-1], args[3].shape[0]], "row group"),
        (at, np.r_[rows[:-1], -1], "row group"),
        (at[:-1], rows, "row groups for"),
    ):
        out = np.zeros(size, np.uint8)
        with pytest.raises(PmError, match=match):
            _encode.fill_blocks(out, bad_at.astype(np.int64), bad_rows.astype(np.int64), *args[2:])
        assert not out.any()
    with pytest.raises(PmError, match="stat fields"):
        _encode.fill_blocks(np.zeros(size, np.uint8), at, rows, args[2], args[3], args[4][:-1], *args[5:])
    with pytest.raises(PmError, match="row counts"):
        _encode.fill_blocks(np.zeros(size, np.uint8), at, rows, args[2][:-1], *args[3:])


@pytest.mark.parametrize("seed", range(20))
def test_copy_ranges_equals_slices_and_checks_bounds(seed):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 256, int(rng.integers(1, 300)), dtype=np.uint8)
    n = int(rng.integers(0, 20))
    lens = rng.integers(-2, 20, n).astype(np.int64)
    s = np.array([int(rng.integers(0, max(1, len(src) - max(int(k), 0) + 1))) for k in lens], np.int64)
    size = 400
    d = np.array([int(rng.integers(0, size - max(int(k), 0) + 1)) for k in lens], np.int64)
    got, want = np.zeros(size, np.uint8), np.zeros(size, np.uint8)
    _encode.copy_ranges(got, d, src, s, lens)
    for k in range(n):
        if lens[k] > 0:
            want[d[k] : d[k] + lens[k]] = src[s[k] : s[k] + lens[k]]
    assert np.array_equal(got, want)
    if n and (lens > 0).any():
        k = int(np.argmax(lens > 0))
        for field, value in ((d, size - lens[k] + 1), (s, len(src) - lens[k] + 1), (d, -1), (s, -1)):
            old = field[k]
            field[k] = value
            out = np.zeros(size, np.uint8)
            with pytest.raises(PmError, match="outside its buffers"):
                _encode.copy_ranges(out, d, src, s, lens)
            assert not out.any()
            field[k] = old


def _stats_description(rng):
    """A Description-like object with random stat references into one buffer: absent (-1, 0),
    inline (1..8), out of line (9..300), some past OOL_MAX_LENGTH (dropped)."""
    from types import SimpleNamespace

    R, C = int(rng.integers(1, 40)), int(rng.integers(1, 6))
    data = rng.integers(0, 256, 5000, dtype=np.uint8)
    length = rng.choice(np.array([-1, 0, 1, 2, 7, 8, 9, 16, 300, L.OOL_MAX_LENGTH + 1], np.int64), (R, C, 2))
    start = np.array([rng.integers(0, 5000 - min(max(int(n), 0), 5000) + 1) for n in length.reshape(-1)], np.int64)
    chunks = np.zeros((R, C), L.CHUNK_DTYPE)
    chunks["stat_flags"] = rng.integers(0, 256, (R, C), dtype=np.uint8)
    from qdbpm.pm.description import ByteRefs

    stats = ByteRefs(data=data, start=start.reshape(R, C, 2), length=length)
    return SimpleNamespace(chunks=chunks, stats=stats, columns=[None] * C)


@pytest.mark.parametrize("seed", range(40))
def test_stat_slots_kernel_equals_the_numpy_block(seed):
    from qdbpm.pm.stat_slots import StatSlots

    rng = np.random.default_rng(seed)
    d = _stats_description(rng)
    s = StatSlots(d)
    R = d.chunks.shape[0]
    rows = None if seed % 2 else np.sort(rng.choice(R, int(rng.integers(0, R + 1)), replace=False))
    f, ool = s.all(rows)
    sel = np.arange(R) if rows is None else rows
    flags, sizes, slots, want_ool = s.block(sel)
    assert np.array_equal(f["stat_flags"], flags) and np.array_equal(f["stat_sizes"], sizes)
    assert np.array_equal(f["min_stat"], slots[..., 0]) and np.array_equal(f["max_stat"], slots[..., 1])
    assert np.array_equal(ool, np.zeros_like(ool) if want_ool is None else want_ool)


def test_stat_slots_kernel_refuses_a_reference_past_its_buffer():
    from qdbpm.pm.stat_slots import StatSlots

    d = _stats_description(np.random.default_rng(3))
    d.stats.length[0, 0, 0], d.stats.start[0, 0, 0] = 9, 4995
    with pytest.raises(PmError, match="outside their buffer"):
        StatSlots(d).all()
    with pytest.raises(PmError, match="outside their buffer"):
        StatSlots(d).block(slice(0, 1))  # the reference says the same
