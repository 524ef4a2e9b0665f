"""Hypothesis strategies for random `_pm` descriptions, and `assert_matches`: an open `_pm`
shows exactly the description it was written from."""

import dataclasses

import numpy as np
from hypothesis import strategies as st

from qdbpm.pm import layout as L
from qdbpm.pm.description import ByteRefs, Column, Description

names = st.text(min_size=0, max_size=12)


@st.composite
def columns(draw, n):
    out = []
    for i in range(n):
        pt = draw(st.integers(0, 7))
        out.append(Column(
            name=draw(names) + f"_{i}",
            type=draw(st.integers(-1, 1 << 20)),
            id=draw(st.integers(-1, 1000)),
            flags=L.column_flags(repetition=draw(st.integers(0, 2)), descending=draw(st.booleans()),
                                 ascii=draw(st.booleans())),
            physical_type=pt,
            fixed_byte_len=draw(st.integers(1, 40)) if pt == L.PT_FIXED_LEN_BYTE_ARRAY else 0,
            max_rep_level=draw(st.integers(0, 3)),
            max_def_level=draw(st.integers(0, 3)),
        ))
    return out


stat_value = st.one_of(st.none(), st.binary(min_size=0, max_size=24))


@st.composite
def chunk_rows(draw, nrg, ncols):
    ch = np.zeros((nrg, ncols), L.CHUNK_DTYPE)
    u64 = st.integers(0, (1 << 64) - 1)
    for r in range(nrg):
        for c in range(ncols):
            ch[r, c] = (draw(st.integers(0, 7)), draw(st.integers(0, 63)), draw(st.integers(0, 255)), 0, 0,
                        draw(u64), draw(st.integers(0, 1 << 40)), draw(u64), draw(u64), draw(u64), 0, 0)
    return ch


@st.composite
def descriptions(draw, max_cols=5, max_rgs=6):
    ncols = draw(st.integers(0, max_cols))
    nrg = draw(st.integers(0, max_rgs))
    cols = draw(columns(ncols))
    chunks = draw(chunk_rows(nrg, ncols))
    stats = None
    if draw(st.booleans()):
        objs = np.empty((nrg, ncols, 2), object)
        for idx in np.ndindex(objs.shape):
            objs[idx] = draw(stat_value)
        stats = ByteRefs.from_objects(objs)
    pfo = draw(st.integers(1 << 12, 1 << 40))
    bloom_cols, blooms, external = None, None, False
    if ncols and draw(st.booleans()):
        bloom_cols = sorted(draw(st.sets(st.integers(0, ncols - 1), min_size=1, max_size=ncols)))
        external = draw(st.booleans())
        if external:
            start = np.zeros((nrg, ncols), np.int64)
            length = np.full((nrg, ncols), -1, np.int64)
            for r in range(nrg):
                for c in bloom_cols:
                    if draw(st.booleans()):
                        length[r, c] = 32 * draw(st.integers(1, 64))
                        start[r, c] = draw(st.integers(4, pfo - length[r, c]))
            blooms = ByteRefs(np.zeros(0, np.uint8), start, length)
        else:
            objs = np.empty((nrg, ncols), object)
            for r in range(nrg):
                for c in bloom_cols:
                    if draw(st.booleans()):
                        objs[r, c] = draw(st.binary(min_size=32, max_size=32)) * draw(st.integers(1, 3))
            blooms = ByteRefs.from_objects(objs)
    dts = draw(st.integers(-1, ncols - 1)) if ncols else -1
    dts_asc = dts >= 0 and draw(st.booleans())
    if dts_asc:
        c = cols[dts]
        cols[dts] = dataclasses.replace(c, flags=c.flags & ~L.COLUMN_FLAG_DESCENDING)
    sorting = [] if dts_asc or not ncols else draw(st.lists(st.integers(0, ncols - 1), max_size=3))
    return Description(
        columns=cols,
        num_rows=np.asarray(draw(st.lists(st.integers(0, (1 << 64) - 1), min_size=nrg, max_size=nrg)), np.uint64),
        chunks=chunks,
        stats=stats,
        blooms=blooms,
        designated_timestamp=dts,
        sorting_columns=sorting,
        sorting_is_dts_asc=dts_asc,
        parquet_footer_offset=pfo,
        parquet_footer_length=draw(st.integers(0, (1 << 32) - 1)),
        unused_bytes=draw(st.integers(0, (1 << 64) - 1)),
        bloom_columns=bloom_cols,
        bloom_external=external,
        squash_tracker=draw(st.one_of(st.none(), st.integers(-(1 << 63), (1 << 63) - 1))),
        seq_txn=draw(st.one_of(st.none(), st.integers(-(1 << 63), (1 << 63) - 1))),
        scratchpad=draw(st.one_of(st.none(), st.lists(st.tuples(st.integers(0, (1 << 32) - 1), st.binary(max_size=20)), max_size=3))),
    )


def expected_stats(d):
    """What a reader must give back for each (rg, col): empty stats count as absent."""
    out = {}
    for r in range(d.row_group_count):
        for c in range(len(d.columns)):
            pair = []
            for k in (0, 1):
                v = None if d.stats is None else d.stats.get((r, c, k))
                pair.append(v if v else None)
            out[(r, c)] = tuple(pair)
    return out


PASS_THROUGH = ("codec", "encodings", "num_values", "byte_range_start", "total_compressed", "null_count",
                "distinct_count")


def assert_matches(pm, d):
    assert pm.column_names == [c.name for c in d.columns]
    for i, c in enumerate(d.columns):
        got = pm.columns[i]
        assert (int(got["type"]), int(got["id"]), int(got["flags"]), int(got["physical_type"]),
                int(got["fixed_byte_len"]), int(got["max_rep_level"]), int(got["max_def_level"])) == \
            (c.type, c.id, c.flags, c.physical_type, c.fixed_byte_len, c.max_rep_level, c.max_def_level)
    assert pm.row_group_count == d.row_group_count
    assert pm.num_rows.tolist() == d.num_rows.tolist()
    for f in PASS_THROUGH:
        np.testing.assert_array_equal(pm.chunks[f], d.chunks[f])
    want = expected_stats(d)
    for (r, c), (mn, mx) in want.items():
        assert pm.stat_bytes(r, c) == (mn, mx)
        flags = int(pm.chunks[r, c]["stat_flags"])
        given_flags = int(d.chunks[r, c]["stat_flags"])
        assert bool(flags & L.STAT_MIN_EXACT) == (mn is not None and bool(given_flags & L.STAT_MIN_EXACT))
        assert bool(flags & L.STAT_MAX_EXACT) == (mx is not None and bool(given_flags & L.STAT_MAX_EXACT))
        assert flags & L.STAT_NULL_COUNT_PRESENT == given_flags & L.STAT_NULL_COUNT_PRESENT
    assert pm.designated_timestamp == d.designated_timestamp
    expect_sort = [(d.designated_timestamp, False)] if d.sorting_is_dts_asc else \
        [(s, bool(d.columns[s].flags & L.COLUMN_FLAG_DESCENDING)) for s in d.sorting_columns]
    assert pm.sorting_columns == expect_sort
    assert (pm.parquet_footer_offset, pm.parquet_footer_length, pm.unused_bytes) == \
        (d.parquet_footer_offset, d.parquet_footer_length, d.unused_bytes)
    assert (pm.squash_tracker, pm.seq_txn) == (d.squash_tracker, d.seq_txn)
    assert pm.scratchpad == (None if d.scratchpad is None else [(c, bytes(v)) for c, v in d.scratchpad])
    bc = d.bloom_columns or []
    assert pm.bloom_columns.tolist() == bc
    for r in range(d.row_group_count):
        for c in range(len(d.columns)):
            present = c in bc and d.blooms is not None and d.blooms.length[r, c] >= 0
            if d.bloom_external:
                want_ref = (int(d.blooms.start[r, c]), int(d.blooms.length[r, c])) if present else None
                assert pm.bloom_ref(r, c) == want_ref and pm.bloom_filter(r, c) is None
            else:
                assert pm.bloom_filter(r, c) == (d.blooms.get((r, c)) if present else None)
