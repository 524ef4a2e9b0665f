"""The coalescing kernel (qdbpm/table/_coalesce.pyx) against its reference
(`ranges.coalesce_reference`, the rule one span at a time in Python), on seeded random spans
that overlap, touch, hold zero lengths and cross barriers, and `plan` on a real file against the
plan built the way it was before the kernel (sorted items through the reference)."""

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qdbpm import generate, open as open_pm
from qdbpm.table import _coalesce
from qdbpm.table.ranges import all_null_mask, coalesce, coalesce_reference, plan

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
