"""The block kernel (qdbpm/pm/_encode.pyx) against an obviously correct per-row Python encoder,
and its bounds checks; the encoder's bytes themselves are held by the golden files
(test_golden.py)."""

import numpy as np
import pytest

from qdbpm.errors import PmError
from qdbpm.pm import _encode
from qdbpm.pm import layout as L
from qdbpm.pm.stat_slots import KIND_KEEP, KIND_SET


def region_reference(r, i, lengths, starts, data, bl_len, bl_start, bl_data, C):
    """(OOL region bytes, [(min slot, max slot, kinds)] per column, {c: bitset entry offset})."""
    region, slots, brel = bytearray(), [], {}
    for c in range(C):
        vals, kinds = [], []
        for k in range(2):
            m, s = int(lengths[r, c, k]), int(starts[r, c, k])
            if 1 <= m <= L.INLINE_STAT_MAX:
                vals.append(int.from_bytes(bytes(data[s : s + m]), "little"))
                kinds.append(2)
            elif 1 <= m <= L.OOL_MAX_LENGTH:
                vals.append((len(region) << L.OOL_LENGTH_BITS) | m)
                kinds.append(1)
                region += bytes(data[s : s + m])
            else:
                vals.append(0)
                kinds.append(0)
        slots.append((vals[0], vals[1], kinds))
        if bl_len is not None and bl_len[i, c] >= 0:
            region += bytes(-len(region) % 8)
            brel[c] = len(region)
            n = int(bl_len[i, c])
            region += n.to_bytes(4, "little") + bytes(bl_data[int(bl_start[r, c]) : int(bl_start[r, c]) + n])
    return bytes(region), slots, brel


def stat_flags_reference(src, kinds):
    """docs/format.md#statistics: counts' presence kept; EXACT kept only with its stat; PRESENT
    and INLINED set from where the stat went."""
    keep = L.STAT_NULL_COUNT_PRESENT | L.STAT_DISTINCT_COUNT_PRESENT
    put = 0
    for kind, exact, present, inlined in ((kinds[0], L.STAT_MIN_EXACT, L.STAT_MIN_PRESENT, L.STAT_MIN_INLINED),
                                         (kinds[1], L.STAT_MAX_EXACT, L.STAT_MAX_PRESENT, L.STAT_MAX_INLINED)):
        if kind:
            keep |= exact
            put |= present | (inlined if kind == 2 else 0)
    return (int(src) & keep) | put


def blocks_reference(size, at, rows, num_rows, chunks, starts, lengths, data, bl_len, bl_start, bl_data):
    R, C = chunks.shape
    out = bytearray(size)
    for i, r in enumerate(rows.tolist()):
        region, slots, _ = region_reference(r, i, lengths, starts, data, bl_len, bl_start, bl_data, C)
        recs = chunks[r].copy()
        for c, (mn, mx, kinds) in enumerate(slots):
            recs[c]["stat_flags"] = stat_flags_reference(recs[c]["stat_flags"], kinds)
            recs[c]["stat_sizes"] = ((int(lengths[r, c, 0]) if kinds[0] == 2 else 0)
                                     | ((int(lengths[r, c, 1]) if kinds[1] == 2 else 0) << 4))
            recs[c]["reserved"] = 0
            recs[c]["min_stat"], recs[c]["max_stat"] = mn, mx
        block = int(num_rows[r]).to_bytes(8, "little") + recs.astype(L.CHUNK_DTYPE).tobytes() + region
        out[at[i] : at[i] + len(block)] = block
    return bytes(out)


def _case(rng, blooms):
    R, C = int(rng.integers(1, 12)), int(rng.integers(0, 5))
    data = rng.integers(0, 256, 3000, dtype=np.uint8)
    length = rng.choice(np.array([-1, 0, 1, 2, 7, 8, 9, 16, 300, L.OOL_MAX_LENGTH + 1], np.int64), (R, C, 2))
    start = np.array([rng.integers(0, 3000 - min(max(int(n), 0), 3000) + 1) for n in length.reshape(-1)],
                     np.int64).reshape(R, C, 2)
    chunks = np.zeros((R, C), L.CHUNK_DTYPE)
    raw = chunks.view(np.uint8)
    raw[:] = rng.integers(0, 256, raw.shape, dtype=np.uint8)
    rows = rng.integers(0, R, int(rng.integers(0, 10))).astype(np.int64)
    num_rows = rng.integers(0, 1 << 63, R, dtype=np.uint64)
    n = len(rows)
    if blooms:
        bl_data = rng.integers(0, 256, 1000, dtype=np.uint8)
        bl_len = np.where(rng.random((n, C)) < 0.4, rng.choice([0, 32, 64], (n, C)), -1).astype(np.int64)
        bl_start = rng.integers(0, 900, (R, C)).astype(np.int64)
    else:
        bl_data, bl_len, bl_start = np.zeros(0, np.uint8), np.zeros((0, 0), np.int64), np.zeros((0, 0), np.int64)
    return data, length, start, chunks, rows, num_rows, bl_len, bl_start, bl_data


@pytest.mark.parametrize("seed", range(60))
def test_fill_blocks_equals_the_per_row_reference(seed):
    rng = np.random.default_rng(seed)
    blooms = seed % 2 == 1
    data, length, start, chunks, rows, num_rows, bl_len, bl_start, bl_data = _case(rng, blooms)
    n, C = len(rows), chunks.shape[1]
    size = np.empty(n, np.int64)
    rel = np.full((n, C), -1, np.int64) if blooms else np.zeros((0, 0), np.int64)
    _encode.ool_layout(length, rows, bl_len, L.INLINE_STAT_MAX, L.OOL_MAX_LENGTH, size, rel)
    fixed = L.block_size(C)
    for i in range(n):  # sizes and bitset offsets as the reference lays them out
        region, _, brel = region_reference(rows[i], i, length, start, data, bl_len if blooms else None,
                                           bl_start, bl_data, C)
        assert size[i] == len(region)
        if blooms:
            assert {c: int(rel[i, c]) for c in range(C) if rel[i, c] >= 0} == brel
    # 8-aligned blocks with random gaps between them, and slack at the end
    gaps = rng.integers(0, 3, n) * 8
    ends = np.cumsum(gaps + ((fixed + size + 7) & ~7))
    at = (ends - ((fixed + size + 7) & ~7)).astype(np.int64)
    total = int(ends[-1]) + int(rng.integers(0, 20)) if n else int(rng.integers(0, 20))
    recs = chunks.view(np.uint8).reshape(chunks.shape[0], 64 * C)
    got = np.full(total, 0xAA, np.uint8)  # every byte must be written, zeros included
    _encode.fill_blocks(got, at, rows, num_rows, recs, start, length, data, KIND_KEEP, KIND_SET,
                        L.INLINE_STAT_MAX, L.OOL_MAX_LENGTH, bl_len, bl_start, bl_data)
    want = blocks_reference(total, at, rows, num_rows, chunks, start, length, data,
                            bl_len if blooms else None, bl_start, bl_data)
    assert got.tobytes() == want


def test_fill_blocks_refuses_what_does_not_fit_before_writing():
    rng = np.random.default_rng(11)
    while True:
        data, length, start, chunks, rows, num_rows, bl_len, bl_start, bl_data = _case(rng, True)
        C = chunks.shape[1]
        if len(rows) >= 2 and C and ((length >= 1) & (length <= L.OOL_MAX_LENGTH)).any() and (bl_len >= 0).any():
            break
    n = len(rows)
    size = np.empty(n, np.int64)
    _encode.ool_layout(length, rows, bl_len, L.INLINE_STAT_MAX, L.OOL_MAX_LENGTH, size, np.full((n, C), -1, np.int64))
    step = (L.block_size(C) + size + 7) & ~7
    at = (np.cumsum(step) - step).astype(np.int64)
    total = int(at[-1] + L.block_size(C) + size[-1])  # the last block ends unpadded
    recs = chunks.view(np.uint8).reshape(chunks.shape[0], 64 * C)

    def call(at=at, rows=rows, num_rows=num_rows, start=start, bl_start=bl_start, total=total):
        out = np.zeros(total, np.uint8)
        try:
            _encode.fill_blocks(out, at, rows, num_rows, recs, start, length, data, KIND_KEEP, KIND_SET,
                                L.INLINE_STAT_MAX, L.OOL_MAX_LENGTH, bl_len, bl_start, bl_data)
        finally:
            assert not out.any()  # nothing written before the refusal

    r, c, k = np.argwhere((length >= 1) & (length <= L.OOL_MAX_LENGTH))[0]
    bad_start = start.copy()
    bad_start[r, c, k] = len(data) - length[r, c, k] + 1
    i, bc = np.argwhere(bl_len >= 0)[0]
    bad_bl = bl_start.copy()
    bad_bl[rows[i], bc] = len(bl_data) - bl_len[i, bc] + 1
    for kwargs, match in (
        ({"total": total - 1}, "does not fit"),
        ({"at": np.r_[at[:-1], at[-1] + 1].astype(np.int64)}, "does not fit"),  # not 8-aligned
        ({"at": np.r_[at[:-1], at[-2]].astype(np.int64)}, "does not fit"),  # overlaps the previous
        ({"rows": np.r_[rows[:-1], chunks.shape[0]].astype(np.int64)}, "row group"),
        ({"rows": np.r_[rows[:-1], -1].astype(np.int64)}, "row group"),
        ({"at": at[:-1]}, "row groups for"),
        ({"num_rows": num_rows[:-1]}, "row counts"),
        ({"start": bad_start}, "outside their buffer"),
        ({"bl_start": bad_bl}, "outside its buffer"),
    ):
        with pytest.raises(PmError, match=match):
            call(**kwargs)


def _stats_description(rng, dense):
    """A Description-like object with random stat references into one buffer: absent (-1, 0),
    inline (1..8), dropped (past OOL_MAX_LENGTH) and, unless `dense`, out of line (9..300)."""
    from types import SimpleNamespace

    from qdbpm.pm.description import ByteRefs

    R, C = int(rng.integers(1, 40)), int(rng.integers(1, 6))
    data = rng.integers(0, 256, 5000, dtype=np.uint8)
    kinds = [-1, 0, 1, 2, 7, 8, L.OOL_MAX_LENGTH + 1] + ([] if dense else [9, 16, 300])
    length = rng.choice(np.array(kinds, np.int64), (R, C, 2))
    start = np.array([rng.integers(0, 5000 - min(max(int(n), 0), 5000) + 1) for n in length.reshape(-1)], np.int64)
    chunks = np.zeros((R, C), L.CHUNK_DTYPE)
    raw = chunks.view(np.uint8)
    raw[:] = rng.integers(0, 256, raw.shape, dtype=np.uint8)
    stats = ByteRefs(data=data, start=start.reshape(R, C, 2), length=length)
    return SimpleNamespace(chunks=chunks, stats=stats, columns=[None] * C, blooms=None, bloom_external=False,
                           bloom_columns=None, num_rows=rng.integers(0, 1 << 40, R).astype(np.uint64))


@pytest.mark.parametrize("seed", range(40))
def test_block_plan_writes_the_reference_bytes_in_pieces(seed):
    """BlockPlan, the encoder's layout, on the plain grid (no out-of-line bytes: `dense`) and
    otherwise, for any selection of row groups, written in two pieces as the writer streams it."""
    from qdbpm.pm.encoder import BlockPlan

    rng = np.random.default_rng(seed)
    d = _stats_description(rng, dense=seed % 2 == 0)
    R, C = d.chunks.shape
    rows = np.arange(R) if seed % 4 < 2 else np.sort(rng.choice(R, int(rng.integers(0, R + 1)), replace=False))
    base = int(rng.integers(0, 16))
    plan = BlockPlan(d, rows, base)
    assert plan.dense == (seed % 2 == 0 or not len(rows) or not bool(
        ((d.stats.length[rows] > L.INLINE_STAT_MAX) & (d.stats.length[rows] <= L.OOL_MAX_LENGTH)).any()))
    out = np.full(plan.nbytes, 0xAA, np.uint8)
    plan.fill(out)
    st = d.stats
    want = blocks_reference(plan.nbytes - plan.pad, plan.offsets - L.align8(base), rows, d.num_rows, d.chunks,
                            st.start, st.length, st.data, None, None, None)
    assert out[:plan.pad].tobytes() == bytes(plan.pad) and out[plan.pad:].tobytes() == want
    k = int(rng.integers(0, len(rows) + 1))
    pieces = []
    for i0, i1 in ((0, k), (k, len(rows))):
        s0, s1 = plan.span(i0, i1)
        piece = np.full(s1 - s0, 0xAA, np.uint8)
        plan.fill_rows(piece, i0, i1)
        pieces.append(piece.tobytes())
    assert b"".join(pieces) == want


def test_block_plan_refuses_a_stat_reference_past_its_buffer():
    from qdbpm.pm.encoder import BlockPlan

    d = _stats_description(np.random.default_rng(3), dense=True)
    d.stats.length[0, 0, 0], d.stats.start[0, 0, 0] = 8, 4995
    plan = BlockPlan(d, np.arange(d.chunks.shape[0]), 0)
    with pytest.raises(PmError, match="outside their buffer"):
        plan.fill(np.empty(plan.nbytes, np.uint8))
