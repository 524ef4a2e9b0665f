"""Three-valued pruning: `classify`'s ALWAYS mask (every row of the row group makes the predicate
TRUE), proved against brute force over real Parquet files, and `maybe` equal to `prune`.

The property test writes random pyarrow tables (tests/support/prune_cases.py: every type qdbpm
prunes, nulls, NaN, long strings, optionally truncated string stats), then checks random
predicates: every ALWAYS row group has rows and every one of them is TRUE under the exact filter;
`maybe` is `ParquetMeta.prune`'s mask; ALWAYS is a subset of it. It counts the ALWAYS row groups,
so that a rule that never fires cannot pass.
"""

import datetime as dt
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qdbpm
from qdbpm import col
from qdbpm.parquet.footer import read_footer
from qdbpm.pm.writer import write_new
from qdbpm.prune import expr as E
from qdbpm.prune import rules
from qdbpm.prune.bind import bind
from qdbpm.prune.arrow import filter_table
from qdbpm.sync.generate import describe_footer, generate
from qdbpm.table.table import open_table
from support.prune_cases import datasets, predicates, truncate_string_stats

DATASETS = 120
PREDICATES_PER_DATASET = 30  # 120 x 30 = 3,600 cases
COUNTS = {"cases": 0, "row_groups": 0, "maybe": 0, "always": 0, "all_true": 0, "conjuncts": 0, "proved": 0}
ROW = "__qdbpm_row__"


def true_rows(table, pred) -> np.ndarray:
    """bool per row: the predicate is TRUE for it (the exact filter, as the prune property test's oracle)."""
    t = table.append_column(ROW, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    out = np.zeros(table.num_rows, bool)
    out[filter_table(t, pred)[ROW].to_numpy()] = True
    return out


def write_case(d, table, rg_size, truncate=False) -> str:
    """data.parquet and its `_pm` (string stats truncated when asked); returns the `_pm` path."""
    path = os.path.join(d, "data.parquet")
    pq.write_table(table, path, row_group_size=rg_size)
    footer = read_footer(path)
    desc = describe_footer(footer)
    if truncate:
        desc = truncate_string_stats(desc, footer)
    write_new(os.path.join(d, "_pm"), desc)
    return os.path.join(d, "_pm")


def check(pm, table, pred):
    """classify's promises for one predicate; returns (maybe, always, all TRUE per row group)."""
    pred = qdbpm.parse(pred) if isinstance(pred, str) else pred
    maybe, always = pm.classify(pred)
    assert maybe.dtype == bool and always.dtype == bool
    assert np.array_equal(maybe, pm.prune(pred)), pred
    assert not (always & ~maybe).any(), pred
    rows = true_rows(table, pred)
    bounds = np.concatenate([[0], np.cumsum(np.asarray(pm.num_rows, np.int64))])
    all_true = np.array([bounds[r + 1] > bounds[r] and rows[bounds[r]:bounds[r + 1]].all()
                         for r in range(len(bounds) - 1)], bool)
    wrong = always & ~all_true
    assert not wrong.any(), f"ALWAYS on row groups {np.nonzero(wrong)[0].tolist()} for {pred!r}"
    if isinstance(pred, E.And):  # `prove` of each conjunct where the AND may match: classify's ALWAYS
        need, stats = maybe & ~always, (lambda c, need: pm.column_stats(c))
        for k in pred.children:
            b = bind(k, pm.schema)
            got = rules.prove(b, len(maybe), stats, need)
            assert np.array_equal(got, rules.classify(b, len(maybe), stats, None, need)[1]), (pred, k)
            COUNTS["conjuncts"] += int(need.any())
            COUNTS["proved"] += int(got.sum())
    return maybe, always, all_true


@settings(max_examples=DATASETS, suppress_health_check=list(HealthCheck))
@given(data=st.data(), ds=datasets())
def test_always_rows_are_all_true(tmp_path_factory, data, ds):
    table, rg_size, pools, truncate = ds
    pm_path = write_case(str(tmp_path_factory.mktemp("c")), table, rg_size, truncate)
    with qdbpm.open(pm_path) as pm:
        for _ in range(PREDICATES_PER_DATASET):
            pred = data.draw(predicates(table.column_names, pools))
            maybe, always, all_true = check(pm, table, pred)
            COUNTS["cases"] += 1
            COUNTS["row_groups"] += len(maybe)
            COUNTS["maybe"] += int(maybe.sum())
            COUNTS["always"] += int(always.sum())
            COUNTS["all_true"] += int(all_true.sum())


def test_zz_always_fired():
    """Runs after the property test (file order): enough cases, and ALWAYS found a real share of
    the row groups whose every row matches."""
    if COUNTS["cases"] == 0:
        pytest.skip("property test not run in this session")
    print(f"\nclassify property: {COUNTS['cases']} cases over {COUNTS['row_groups']} row groups; maybe "
          f"{COUNTS['maybe']}, always {COUNTS['always']}, every row TRUE {COUNTS['all_true']}; prove: "
          f"{COUNTS['conjuncts']} conjuncts, {COUNTS['proved']} row groups proved")
    assert COUNTS["cases"] >= 3_000
    assert COUNTS["always"] > 0
    assert COUNTS["always"] >= COUNTS["all_true"] // 2  # a real share (floats, where NaN may hide, never are)
    # `prove` met conjuncts with row groups left to prove, and proved some
    assert COUNTS["conjuncts"] >= 100 and COUNTS["proved"] > 0, COUNTS


# --- rule by rule -----------------------------------------------------------------------------


def open_case(tmp_path, table, rg_size, truncate=False):
    return qdbpm.open(write_case(str(tmp_path), table, rg_size, truncate))


def always_of(pm, table, pred):
    return check(pm, table, pred)[1].tolist()


def test_comparisons_need_a_null_count_of_zero(tmp_path):
    t = pa.table({"x": pa.array([1, 2, 3, None, 5, 6], pa.int64())})
    with open_case(tmp_path, t, 3) as pm:  # row groups [1, 2, 3], [null, 5, 6]
        assert always_of(pm, t, col("x") > 0) == [True, False]  # null > 0 is NULL
        assert always_of(pm, t, ~(col("x") > 10)) == [True, False]  # NOT NULL is NULL too
        assert always_of(pm, t, col("x") != 4) == [True, False]  # 4 outside [1, 3]
        assert always_of(pm, t, col("x") != 2) == [False, False]
        assert always_of(pm, t, col("x").between(1, 3)) == [True, False]
        assert always_of(pm, t, col("x").is_not_null()) == [True, False]
        assert always_of(pm, t, (col("x") > 0) | col("x").is_null()) == [True, False]  # leaf by leaf
        assert always_of(pm, t, col("x") > 0.5) == [True, False]  # exact literal against integers
        assert always_of(pm, t, col("x") == 2.5) == [False, False]


def test_equality_and_in_need_exact_equal_bounds(tmp_path):
    t = pa.table({"x": pa.array([7, 7, 7, 1, 9, None], pa.int32())})
    with open_case(tmp_path, t, 3) as pm:  # [7, 7, 7], [1, 9, null]
        assert always_of(pm, t, col("x") == 7) == [True, False]
        assert always_of(pm, t, col("x").isin([1, 7])) == [True, False]
        assert always_of(pm, t, ~col("x").isin([7])) == [False, False]
        assert always_of(pm, t, ~col("x").isin([3, 4])) == [True, False]  # 3 within [1, 9]
        assert always_of(pm, t, ~col("x").isin([10, 11])) == [True, True]  # a null row is TRUE for NOT IN...
        assert always_of(pm, t, ~col("x").isin([10, None])) == [True, False]  # ...unless None is listed
        assert always_of(pm, t, ~(col("x") == 10)) == [True, False]  # NOT (null == 10) is NULL


def test_null_rules(tmp_path):
    t = pa.table({"x": pa.array([None, None, 1, None], pa.int64())})
    with open_case(tmp_path, t, 2) as pm:  # [null, null], [1, null]
        assert always_of(pm, t, col("x").is_null()) == [True, False]
        assert always_of(pm, t, col("x").isin([None, 1])) == [True, True]
        assert always_of(pm, t, col("x").isin([None])) == [True, False]
        assert always_of(pm, t, ~col("x").isin([5])) == [True, True]  # NOT IN is TRUE for null, and 1 is not 5
        assert always_of(pm, t, ~col("x").isin([1])) == [True, False]
        assert always_of(pm, t, col("x") > 0) == [False, False]


def test_not_in_on_a_chunk_of_values_and_nulls(tmp_path):
    t = pa.table({"x": pa.array([2, None, 3, 3], pa.int64())})
    with open_case(tmp_path, t, 2) as pm:  # [2, null], [3, 3]
        # [2, null]: 2 is not 5 (TRUE) and null is TRUE for NOT IN without None
        assert always_of(pm, t, ~col("x").isin([5])) == [True, True]
        assert always_of(pm, t, ~col("x").isin([5, None])) == [False, True]


def test_constants_and_connectives(tmp_path):
    t = pa.table({"x": pa.array([1, 2, 3, 4], pa.int64())})
    with open_case(tmp_path, t, 2) as pm:
        assert always_of(pm, t, qdbpm.parse("TRUE")) == [True, True]
        assert always_of(pm, t, qdbpm.parse("FALSE")) == [False, False]
        assert always_of(pm, t, (col("x") >= 1) & (col("x") <= 2)) == [True, False]
        assert always_of(pm, t, (col("x") <= 2) | (col("x") >= 3)) == [True, True]
        assert always_of(pm, t, ~((col("x") < 1) | (col("x") > 2))) == [True, False]
        assert always_of(pm, t, "x < 3 AND NOT x = 0") == [True, False]


def test_floats_never_always_from_bounds_alone(tmp_path):
    t = pa.table({"f": pa.array([1.0, 2.0, 1.0, math.nan], pa.float64()),
                  "g": pa.array([1.0, 2.0, 3.0, 4.0], pa.float32())})
    with open_case(tmp_path, t, 2) as pm:  # f: [1, 2], [1, NaN] (the stats never count NaN)
        assert always_of(pm, t, col("f") >= 1.0) == [False, False]
        assert always_of(pm, t, col("f") == 1.0) == [False, False]
        assert always_of(pm, t, col("f").isin([1.0, 2.0])) == [False, False]
        # NaN makes these TRUE: the bounds of the other values prove them
        assert always_of(pm, t, col("f") != 5.0) == [True, True]
        assert always_of(pm, t, ~(col("f") > 3.0)) == [True, True]
        assert always_of(pm, t, ~col("f").isin([7.0])) == [True, True]
        assert always_of(pm, t, ~(col("f") != 1.0)) == [False, False]  # NOT (NaN != 1) is FALSE
        assert always_of(pm, t, ~(col("g") >= 2.5)) == [True, False]
        assert always_of(pm, t, ~(col("g") == 16777217)) == [True, True]  # not a float32: bounds widened


def test_nan_literal(tmp_path):
    t = pa.table({"i": pa.array([1, 2, 3, None], pa.int64()), "f": pa.array([1.0, math.nan, 2.0, None])})
    nan = float("nan")
    with open_case(tmp_path, t, 2) as pm:
        for c in ("i", "f"):
            assert always_of(pm, t, col(c) != nan) == [True, False]
            assert always_of(pm, t, col(c) < nan) == [False, False]
            assert always_of(pm, t, ~(col(c) < nan)) == [True, False]
            assert always_of(pm, t, ~(col(c) != nan)) == [False, False]
            assert always_of(pm, t, ~col(c).between(nan, 5)) == [True, False]
        # NOT (x < NaN) is TRUE for every integer: prune keeps the row groups holding one
        assert pm.prune(~(col("i") < nan)).tolist() == [True, True]


def test_truncated_string_stats(tmp_path):
    long_a, long_b = "a" * 30, "b" * 12 + "x" * 20
    t = pa.table({"s": [long_a] * 3 + [long_b] * 3 + ["c", "d", None]})
    with open_case(tmp_path, t, 3, truncate=True) as pm:  # min cut to 8 bytes, max cut and incremented
        st_ = pm.column_stats("s")
        assert not st_.exact_eq[:2].any()  # min == max in the data, but the bounds are inexact
        assert always_of(pm, t, col("s") == long_a) == [False, False, False]  # never from inexact bounds
        assert always_of(pm, t, col("s").isin([long_a, long_b])) == [False, False, False]
        assert always_of(pm, t, col("s") > "a") == [True, True, False]  # lower bound "aaaaaaaa" > "a"
        assert always_of(pm, t, col("s") >= "aaaaaaaa") == [True, True, False]
        assert always_of(pm, t, col("s") < "b") == [True, False, False]  # upper bound "aaaaaaab" < "b"
        assert always_of(pm, t, col("s") < "c") == [True, True, False]
        assert always_of(pm, t, col("s") != "zz") == [True, True, False]
        assert always_of(pm, t, col("s") != long_a) == [False, True, False]
    (tmp_path / "exact").mkdir()
    with open_case(tmp_path / "exact", t, 3) as pm:  # the same, stats exact
        assert always_of(pm, t, col("s") == long_a) == [True, False, False]
        assert always_of(pm, t, col("s").isin([long_a, long_b])) == [True, True, False]


def test_typeless_integers_hold_under_every_possible_reading(tmp_path):
    big = (1 << 63) + 5  # uint64: no QuestDB type, read signed and unsigned (KIND_ANYSIGN)
    t = pa.table({"u": pa.array([big, big, 1, (1 << 64) - 1, 3, 4], pa.uint64())})
    with open_case(tmp_path, t, 2) as pm:  # [big, big], [1, 2^64-1], [3, 4]
        # [big, big] reads as 2^63+5 or as a negative number: neither leaf holds in both readings,
        # the OR holds in each; [1, 2^64-1] is ordered unsigned only (signed: 1 > -1)
        assert always_of(pm, t, col("u") >= 1 << 63) == [False, False, False]
        assert always_of(pm, t, (col("u") >= 1 << 63) | (col("u") < 0)) == [True, False, False]
        assert always_of(pm, t, col("u") >= 1) == [False, True, True]
        assert always_of(pm, t, col("u") == big) == [False, False, False]  # big's bits read as another value signed
        assert always_of(pm, t, col("u").between(3, 4)) == [False, False, True]
        # beyond three typeless columns each leaf reads both ways on its own
        wide = pa.table({f"u{k}": t["u"] for k in range(4)})
    (tmp_path / "wide").mkdir()
    with open_case(tmp_path / "wide", wide, 2) as pm:
        pred = (col("u0") >= 1) & (col("u1") >= 1) & (col("u2") >= 1) & (col("u3") <= 4)
        assert always_of(pm, wide, pred) == [False, False, True]


def test_empty_row_groups_are_never_always(tmp_path):
    t = pa.table({"x": pa.array([], pa.int64())})
    with open_case(tmp_path, t, 10) as pm:
        for pred in (qdbpm.parse("TRUE"), ~col("x").isin([]), col("x").is_null(), col("x") > 0):
            maybe, always = pm.classify(pred)
            assert np.array_equal(maybe, pm.prune(pred)) and not always.any()


def test_blooms_never_prove_always(tmp_path):
    t = pa.table({"s": ["a", "a", "b", "b"]})
    path = str(tmp_path / "data.parquet")
    pq.write_table(t, path, row_group_size=2, write_statistics=False)
    generate(path, bloom_columns=["s"])  # filters built from the data, no min / max
    with qdbpm.open(str(tmp_path / "_pm")) as pm:
        assert pm.prune(col("s") == "a").tolist() == [True, False]  # the filter rules "a" out of [b, b]
        assert always_of(pm, t, col("s") == "a") == [False, False]


# --- tables -----------------------------------------------------------------------------------


def make_partitions(root):
    """Partitions in three schema groups, with nulls, typeless integers (uint64) and an empty file."""
    rng = np.random.default_rng(7)
    truth = {}
    for d in range(7):
        part = os.path.join(root, f"2024-01-{d + 1:02d}")
        os.makedirs(part)
        n = 0 if d == 5 else 120
        base = np.datetime64("2024-01-01", "us") + np.timedelta64(d * 86_400_000_000, "us")
        high = (1 << 63) if d % 2 else 0  # values read differently signed and unsigned
        cols = {"ts": pa.array(base + np.arange(n).astype("timedelta64[s]") * 600, pa.timestamp("us")),
                "sym": pa.array([None if i % 37 == 5 else f"S{(i // 40 + d) % 3}" for i in range(n)], pa.string()),
                "px": pa.array(rng.integers(0, 50, n) + d * 10, pa.int64()),
                "big": pa.array([high + i // 40 for i in range(n)], pa.uint64())}
        if d % 3 == 1:
            cols["qty"] = pa.array([None if i % 50 == 0 else i // 40 for i in range(n)], pa.int32())
        if d % 3 == 2:
            cols["note"] = pa.array(["n"] * n, pa.string())
        t = pa.table(cols)
        path = os.path.join(part, "data.parquet")
        pq.write_table(t, path, row_group_size=40)
        generate(path)
        truth[os.path.basename(part)] = t
    return truth


TABLE_PREDICATES = [
    col("ts") >= dt.datetime(2024, 1, 2),
    (col("ts") >= dt.datetime(2024, 1, 3)) & (col("ts") < dt.datetime(2024, 1, 4)),
    col("sym") == "S1",
    col("sym").isin(["S0", "S2", None]),
    ~col("sym").isin(["S1"]),
    col("px") < 40,
    ~(col("px") >= 30) | col("sym").is_null(),
    col("px").between(10, 59),
    col("big") <= 1,
    (col("big") >= 1 << 63) | (col("big") < 2),
    "ts < '2024-01-05' AND px >= 0",
    "TRUE",
    "FALSE",
]


def test_table_classify_masks_equal_per_partition_classify(tmp_path):
    truth = make_partitions(str(tmp_path))
    fired = 0
    with open_table(str(tmp_path)) as table:
        assert len({tuple(table.meta(p).column_names) for p in table.partitions}) == 3  # schema groups
        for pred in TABLE_PREDICATES:
            masks = table.classify_masks(pred)
            prune = table.prune_masks(pred)
            assert sorted(masks) == table.partitions
            for p in table.partitions:
                maybe, always = masks[p]
                want_maybe, want_always = table.meta(p).classify(pred)
                assert np.array_equal(maybe, want_maybe) and np.array_equal(always, want_always), (p, pred)
                assert np.array_equal(maybe, prune[p])
                check(table.meta(p), truth[p], pred)
                fired += int(always.sum())
    assert fired > 0
