"""The coalescing kernel (qdbpm/table/_coalesce.pyx) against its reference
(`ranges.coalesce_reference`, the rule one span at a time in Python), on seeded random spans
that overlap, touch, hold zero lengths and cross barriers, `plan` on a real file against the
plan built the way it was before the kernel (sorted items through the reference), and
`plan_many` (many units in one pass) against each unit planned alone."""

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qdbpm import generate, open as open_pm
from qdbpm.table import _coalesce
from qdbpm.errors import CorruptFileError
from qdbpm.table.ranges import all_null_mask, coalesce, coalesce_reference, plan, plan_many, plan_records

CASES = 400


def _shape(ranges):
    return [(r.start, r.length, r.useful, list(r.chunks)) for r in ranges]


def _spans(rng):
    n = rng.randint(0, 40)
    at, out = rng.randint(0, 50), []
    for i in range(n):
        at += rng.choice([0, 0, 1, 7, 100, 5000, 70_000, -rng.randint(0, 30)])  # overlaps too
        at = max(at, 0)
        out.append((at, rng.choice([0, 1, 3, 64, 900, 65_536, 1_000_000]), ("item", i)))
    out.sort(key=lambda s: s[0])
    return out


@pytest.mark.parametrize("seed", range(4))
def test_kernel_is_the_reference_rule(seed):
    rng = random.Random(seed)
    for _ in range(CASES // 4):
        spans = _spans(rng)
        top = (spans[-1][0] + spans[-1][1] + 2) if spans else 10
        barriers = sorted(rng.randint(0, top) for _ in range(rng.randint(0, 6)))
        kw = dict(max_gap=rng.choice([0, 1, 64, 65_536, float("inf")]),
                  max_range=rng.choice([1, 1000, 2_000_000, 64 * 1024 * 1024, float("inf")]),
                  max_waste=rng.choice([0.0, 0.05, 1.0, float("inf")]), barriers=barriers)
        assert _shape(coalesce(spans, **kw)) == _shape(coalesce_reference(spans, **kw)), (spans, kw)


def test_the_rule_case_by_case():
    # a hole within max_gap merges; one past it does not; a barrier inside the hole splits
    spans = [(10, 10, "a"), (25, 10, "b"), (100, 5, "c")]
    assert _shape(coalesce(spans, max_gap=5, max_waste=1.0)) == [(10, 25, 20, ["a", "b"]), (100, 5, 5, ["c"])]
    assert _shape(coalesce(spans, max_gap=5, max_waste=1.0, barriers=[22])) == \
        [(10, 10, 10, ["a"]), (25, 10, 10, ["b"]), (100, 5, 5, ["c"])]
    # a barrier at the range's end counts (end <= b < start), one at the next start does not
    assert len(coalesce(spans[:2], max_gap=5, max_waste=1.0, barriers=[20])) == 2
    assert len(coalesce(spans[:2], max_gap=5, max_waste=1.0, barriers=[25])) == 1
    # waste: 5 unrequested bytes against 20 requested is 25 %
    assert len(coalesce(spans[:2], max_gap=5, max_waste=0.25)) == 1
    assert len(coalesce(spans[:2], max_gap=5, max_waste=0.24)) == 2
    # max_range bounds the merged length; a span inside the range does not lengthen it
    assert len(coalesce(spans[:2], max_gap=5, max_waste=1.0, max_range=24)) == 2
    assert _shape(coalesce([(0, 100, "x"), (10, 5, "y")], max_gap=0, max_waste=0.0)) == [(0, 100, 105, ["x", "y"])]
    assert coalesce([]) == []


def test_a_range_that_ends_earlier_than_the_last_still_sees_its_barriers():
    # range 1 ends at 1000; range 2 starts inside it and ends at 60 (max_range refused the merge):
    # the barrier at 70 lies between range 2's end and the next span, so the next span stands alone
    spans = [(0, 1000, "a"), (50, 10, "b"), (80, 5, "c")]
    kw = dict(max_gap=100, max_range=999, max_waste=float("inf"), barriers=[70])
    assert _shape(coalesce(spans, **kw)) == _shape(coalesce_reference(spans, **kw))
    assert [r.chunks for r in coalesce(spans, **kw)] == [["a"], ["b"], ["c"]]


def test_kernel_refuses_arrays_of_different_lengths():
    with pytest.raises(ValueError):
        _coalesce.runs(np.zeros(2, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), 0.0, 1.0, 0.0)


def _plan_before(pm, rgs, cols, avoid=(), **kw):
    """plan as it was built before the kernel: sorted Python items through the reference rule."""
    rgs, cols = np.asarray(rgs, np.int64), np.asarray(cols, np.int64)
    sub = pm.chunks[rgs[:, None], cols[None, :]]
    nulls = all_null_mask(sub, pm.columns["max_def_level"][cols][None, :])
    starts, lengths = sub["byte_range_start"].astype(np.int64), sub["total_compressed"].astype(np.int64)
    take = np.nonzero(~nulls)
    items = sorted(zip(starts[take].tolist(), lengths[take].tolist(), rgs[take[0]].tolist(), cols[take[1]].tolist()))
    barriers = starts[nulls].tolist()
    if len(avoid):
        barriers += pm.chunks[rgs[:, None], np.asarray(avoid, np.int64)[None, :]]["byte_range_start"].ravel().tolist()
    return coalesce_reference([(s, n, (r, c, s, n)) for s, n, r, c in items], barriers=sorted(barriers), **kw)


def test_plan_on_a_real_file_is_the_plan_before_the_kernel(tmp_path):
    rng = np.random.default_rng(7)
    n = 4000
    t = pa.table({"a": pa.array(rng.integers(0, 100, n)),
                  "b": pa.array([None if i % 3 else f"s{i}" for i in range(n)]),
                  "c": pa.array([None] * n, pa.float64()),  # all null: never fetched, a barrier
                  "d": pa.array(rng.random(n)),
                  "e": pa.array(rng.integers(0, 5, n), pa.int8())})
    path = tmp_path / "data.parquet"
    pq.write_table(t, path, row_group_size=500)
    generate(str(path), str(tmp_path / "_pm"))
    pm = open_pm(str(tmp_path / "_pm"))
    pick = random.Random(3)
    for _ in range(60):
        rgs = sorted(pick.sample(range(pm.row_group_count), pick.randint(1, pm.row_group_count)))
        cols = sorted(pick.sample(range(pm.column_count), pick.randint(1, pm.column_count)))
        avoid = [c for c in range(pm.column_count) if c not in cols and pick.random() < 0.5]
        kw = dict(max_gap=pick.choice([0, 100, 64 * 1024]), max_waste=pick.choice([0.0, 0.05, 10.0]))
        got = plan(pm, rgs, cols, avoid=avoid, **kw)
        assert _shape(got.ranges) == _shape(_plan_before(pm, rgs, cols, avoid, **kw))
        assert got.chunk_bytes == sum(r.useful for r in got.ranges)


def _files(tmp_path, k):
    """k real files of different shapes (nulls, an all-null column, strings), each with its _pm."""
    pms = []
    for f in range(k):
        rng = np.random.default_rng(f)
        n = 1500 + 700 * f
        t = pa.table({"a": pa.array(rng.integers(0, 100, n)),
                      "b": pa.array([None if i % (f + 2) else f"s{i}" for i in range(n)]),
                      "c": pa.array([None] * n, pa.float64()),
                      "d": pa.array(rng.random(n))})
        d = tmp_path / f"p{f}"
        d.mkdir()
        pq.write_table(t, d / "data.parquet", row_group_size=300 + 100 * f)
        generate(str(d / "data.parquet"), str(d / "_pm"))
        pms.append(open_pm(str(d / "_pm")))
    return pms


def _units(pick, pms, width):
    """Random units of `width` columns: (pm, rgs, cols, avoid)."""
    out = []
    for _ in range(pick.randint(1, 12)):
        pm = pick.choice(pms)
        a = pick.randrange(pm.row_group_count)
        rgs = np.arange(a, pick.randint(a + 1, pm.row_group_count), dtype=np.int64)
        cols = np.asarray(sorted(pick.sample(range(pm.column_count), width)), np.int64)
        avoid = [c for c in range(pm.column_count) if c not in cols and pick.random() < 0.5]
        out.append((pm, rgs, cols, avoid))
    return out


def _many(units, **kw):
    subs = [pm.chunks[rgs[:, None], cols[None, :]] for pm, rgs, cols, _ in units]
    sub = np.concatenate(subs)
    cols = np.concatenate([np.broadcast_to(cols, (len(rgs), len(cols))) for _, rgs, cols, _ in units])
    meta = np.concatenate([np.broadcast_to(pm.columns[c], (len(r), len(c))) for pm, r, c, _ in units])
    nulls = all_null_mask(sub, meta["max_def_level"])
    return sub, cols, nulls, plan_many([u[0] for u in units], [len(u[1]) for u in units],
                                       np.concatenate([u[1] for u in units]), cols, sub, nulls,
                                       [u[3] for u in units], **kw)


def _full(p):
    return (_shape(p.ranges), p.all_null, p.chunk_bytes)


@pytest.mark.parametrize("max_gap", [-70_000, -1, 0, 100, 64 * 1024, 1e300, float("inf")])  # 1e300, inf: each unit alone
def test_plan_many_is_each_unit_planned_alone(tmp_path, max_gap):
    pms = _files(tmp_path, 3)
    pick = random.Random(11)
    for _ in range(25):
        units = _units(pick, pms, pick.randint(1, 4))
        kw = dict(max_gap=max_gap, max_waste=pick.choice([0.0, 0.05, 10.0]))
        _, _, _, plans = _many(units, **kw)
        assert len(plans) == len(units)
        for (pm, rgs, cols, avoid), got in zip(units, plans):
            assert _full(got) == _full(plan(pm, rgs, cols, avoid=avoid, **kw))


def test_plan_many_refuses_a_chunk_outside_the_data_naming_its_file(tmp_path):
    pms = _files(tmp_path, 2)
    units = [(pms[0], np.arange(2, dtype=np.int64), np.array([0, 3]), []),
             (pms[1], np.arange(1, 3, dtype=np.int64), np.array([0, 3]), [])]
    sub, cols, nulls, _ = _many(units)
    # (1 << 63) - 1: start + length would wrap past int64 to below the limit
    for field, value in (("total_compressed", (1 << 63) - 1), ("total_compressed", 1 << 63),
                         ("total_compressed", (1 << 64) - 1),
                         ("byte_range_start", (1 << 64) - 8), ("total_compressed", pms[1].parquet_footer_offset)):
        bad = sub.copy()
        bad[field][3, 1] = value  # unit 2's second row: row group 2, column 3
        with pytest.raises(CorruptFileError, match=r"p1/_pm: row group 2 column 3 chunk"):
            plan_many(pms, [2, 2], np.array([0, 1, 1, 2]), cols, bad, nulls, [[], []])
        with pytest.raises(CorruptFileError, match=r"p1/_pm: row group 2 column 3 chunk"):
            plan_records(pms[1], np.array([1, 2]), np.array([0, 3]), bad[2:], nulls[2:])


@pytest.mark.parametrize("cells", [1, 7, 1 << 16])  # each job its own batch, a few jobs, all at once
def test_a_scans_units_are_planned_alike_in_batches_of_any_size(tmp_path, monkeypatch, cells):
    """units.plan_units in batches of BATCH_CELLS records: each unit's plan is plan() of its own
    row groups and columns, whichever batch it fell in (memory_budget small: runs get cut)."""
    from qdbpm import open_table
    from qdbpm.table import units

    _files(tmp_path, 3)
    monkeypatch.setattr(units, "BATCH_CELLS", cells)
    with open_table(str(tmp_path)) as t:
        for where, cols, budget in (("a < 50", ["d"], 256 << 20), (None, None, 1 << 16), ("b = 's4'", ["a", "b"], 1 << 18)):
            s = t.scan(where, cols, memory_budget=budget)
            got = s._units_for_read()
            assert got and sum(len(u.row_groups) for u in got) == len(s.row_groups())
            for u in got:
                avoid = [c for c in s._by_name[u.partition].extra] if u.full else []
                assert _full(u.plan) == _full(plan(u.pm, u.row_groups, u.columns, avoid=avoid)), (where, u)
