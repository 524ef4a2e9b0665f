"""Each conservative pruning rule on hand-made `_pm` files, and the timestamp-search vectors."""

import struct

import numpy as np
import pytest

import qdbpm
from qdbpm import col
from qdbpm.pm import layout as L
from qdbpm.pm.description import Column, Description
from qdbpm.errors import PredicateError

EXACT = L.STAT_MIN_EXACT | L.STAT_MAX_EXACT | L.STAT_NULL_COUNT_PRESENT


def one_column_pm(path, column, row_groups):
    """row_groups: [(min_bytes, max_bytes, null_count, num_values, stat_flags)]"""
    rgs = []
    for mn, mx, nulls, nvals, flags in row_groups:
        ch = np.zeros(1, L.CHUNK_DTYPE)
        ch["num_values"], ch["null_count"], ch["stat_flags"] = nvals, nulls, flags
        rgs.append({"num_rows": nvals, "chunks": ch, "mins": [mn], "maxs": [mx]})
    qdbpm.write_new(path, Description.from_row_groups([column], rgs, parquet_footer_offset=100))
    return qdbpm.open(path)


I64 = Column("x", type=L.QDB_LONG, physical_type=L.PT_INT64)
F64 = Column("x", type=L.QDB_DOUBLE, physical_type=L.PT_DOUBLE)
STR = Column("x", type=L.QDB_VARCHAR, physical_type=L.PT_BYTE_ARRAY)


def q(v):
    return struct.pack("<q", v)


def d(v):
    return struct.pack("<d", v)


def test_int_comparisons(pm_path):
    with one_column_pm(pm_path, I64, [(q(-10), q(-1), 0, 10, EXACT), (q(0), q(9), 0, 10, EXACT),
                                      (q(5), q(5), 0, 10, EXACT)]) as pm:
        assert pm.prune(col("x") < 0).tolist() == [True, False, False]
        assert pm.prune(col("x") <= -0.5).tolist() == [True, False, False]
        assert pm.prune(col("x") > 4.5).tolist() == [False, True, True]
        assert pm.prune(col("x") == 5).tolist() == [False, True, True]
        assert pm.prune(col("x") == 5.5).tolist() == [False, False, False]  # no integer equals 5.5
        # != prunes only when min == max (exact) equals the literal
        assert pm.prune(col("x") != 5).tolist() == [True, True, False]
        assert pm.prune(col("x").isin([5, 100])).tolist() == [False, True, True]
        assert pm.prune(~col("x").isin([5, 100])).tolist() == [True, True, False]
        assert pm.prune(~col("x").isin([5, None])).tolist() == [True, True, False]
        assert pm.prune(col("x") < 2**70).tolist() == [True, True, True]
        assert pm.prune(col("x") > 2**70).tolist() == [False, False, False]
        assert pm.prune(col("x").between(3, -3)).tolist() == [True, True, False]  # swapped bounds
        assert pm.prune(~(col("x") < 0)).tolist() == [False, True, True]
        assert pm.prune("x >= 6 OR x = -10").tolist() == [True, True, False]


def test_missing_stats_might_match(pm_path):
    with one_column_pm(pm_path, I64, [(None, None, 0, 10, L.STAT_NULL_COUNT_PRESENT), (q(0), None, 0, 10, EXACT)]) as pm:
        assert pm.prune(col("x") > 100).tolist() == [True, True]


def test_null_count_rules(pm_path):
    rows = [(q(1), q(2), 0, 10, EXACT), (q(1), q(2), 3, 10, EXACT), (None, None, 10, 10, L.STAT_NULL_COUNT_PRESENT),
            (q(1), q(2), 0, 10, L.STAT_MIN_EXACT | L.STAT_MAX_EXACT)]  # last: null count unknown
    with one_column_pm(pm_path, I64, rows) as pm:
        assert pm.prune(col("x").is_null()).tolist() == [False, True, True, True]
        assert pm.prune(col("x").is_not_null()).tolist() == [True, True, False, True]
        # an all-null chunk satisfies no comparison, not even !=
        assert pm.prune(col("x") != 100).tolist() == [True, True, False, True]
        assert pm.prune(col("x").isin([1, None])).tolist() == [True, True, True, True]
        assert pm.prune(col("x").isin([7, None])).tolist() == [False, True, True, True]
        # NOT IN is TRUE for nulls (IN never yields null), unless None is listed
        assert pm.prune(~col("x").isin([1])).tolist() == [True, True, True, True]
        assert pm.prune(~col("x").isin([1, 2, None])).tolist() == [True, True, False, True]


def test_nan_rules(pm_path):
    nan = float("nan")
    rows = [(d(1.0), d(2.0), 0, 10, EXACT), (d(nan), d(2.0), 0, 10, EXACT), (d(-0.0), d(0.0), 0, 10, EXACT),
            (d(3.0), d(3.0), 0, 10, EXACT)]
    with one_column_pm(pm_path, F64, rows) as pm:
        assert pm.prune(col("x") > 2.5).tolist() == [False, True, False, True]  # NaN in stats: might match
        # x op NaN is FALSE for every row (pyarrow semantics), x != NaN TRUE for every non-null row
        assert pm.prune(col("x") == nan).tolist() == [False, False, False, False]
        assert pm.prune(col("x") < nan).tolist() == [False, False, False, False]
        assert pm.prune(col("x") != nan).tolist() == [True, True, True, True]
        assert pm.prune(col("x") == 0.0).tolist() == [False, True, True, False]
        assert pm.prune(col("x") == -0.0).tolist() == [False, True, True, False]
        # NOT (x > 2.5) and != are also true for NaN rows, which stats never count
        assert pm.prune(~(col("x") > 2.5)).tolist() == [True, True, True, True]
        assert pm.prune(col("x") != 3.0).tolist() == [True, True, True, True]


def test_inexact_string_bounds_still_prune(pm_path):
    flags = L.STAT_NULL_COUNT_PRESENT  # neither exact: truncated min, incremented max
    rows = [(b"abc", b"abd", 0, 10, flags), (b"b", b"c", 0, 10, EXACT), (b"abc", b"abc", 0, 10, flags)]
    with one_column_pm(pm_path, STR, rows) as pm:
        assert pm.prune(col("x") >= "abd").tolist() == [True, True, False]
        assert pm.prune(col("x") == "abcz").tolist() == [True, False, False]
        # min == max but inexact: != cannot prune
        assert pm.prune(col("x") != "abc").tolist() == [True, True, True]
        assert pm.prune(col("x") < "abc").tolist() == [False, False, False]


def test_unknown_columns_and_literals(pm_path):
    with one_column_pm(pm_path, I64, [(q(1), q(2), 0, 10, EXACT)]) as pm:
        with pytest.raises(PredicateError, match="no column 'y'"):
            pm.prune(col("y") > 1)
        with pytest.raises(PredicateError, match="does not fit column 'x'"):
            pm.prune(col("x") > "abc")
        # numpy's timedelta64/datetime64 are np.integer subclasses, but not plain numbers
        for lit in (np.timedelta64(2, "us"), np.datetime64(2, "us")):
            with pytest.raises(PredicateError, match="does not fit column 'x'"):
                pm.prune(col("x") > lit)


def test_bloom_filters_prune_equality(pm_path):
    from qdbpm.bloom.sbbf import SplitBlockBloomFilter

    blooms = []
    for vals in ([1, 2, 3], [10, 20, 30]):
        f = SplitBlockBloomFilter(32)
        f.insert(np.array(vals, np.int64))
        blooms.append(f.to_bytes())
    rgs = []
    for k, b in enumerate(blooms):
        ch = np.zeros(1, L.CHUNK_DTYPE)
        ch["num_values"], ch["stat_flags"] = 3, EXACT
        rgs.append({"num_rows": 3, "chunks": ch, "mins": [q(1)], "maxs": [q(30)], "blooms": {0: b}})
    qdbpm.write_new(pm_path, Description.from_row_groups([I64], rgs, parquet_footer_offset=100))
    with qdbpm.open(pm_path) as pm:
        assert pm.prune(col("x") == 20).tolist() == [False, True]
        assert pm.prune(col("x").isin([2, 30])).tolist() == [True, True]
        assert pm.prune(col("x").isin([2, 3])).tolist() == [True, False]
        assert pm.prune(col("x") > 25).tolist() == [True, True]  # blooms only answer = / IN


def ts_pm(path, ranges, num_rows=None):
    cols = [Column("ts", type=L.QDB_TIMESTAMP, physical_type=L.PT_INT64,
                   flags=L.column_flags(repetition=L.REPETITION_REQUIRED), max_def_level=0)]
    rgs = []
    for k, (lo, hi) in enumerate(ranges):
        ch = np.zeros(1, L.CHUNK_DTYPE)
        n = 10 if num_rows is None else num_rows[k]
        ch["num_values"], ch["stat_flags"] = n, EXACT
        rgs.append({"num_rows": n, "chunks": ch, "mins": [q(lo) if n else None], "maxs": [q(hi) if n else None]})
    qdbpm.write_new(path, Description.from_row_groups(cols, rgs, designated_timestamp=0, sorting_is_dts_asc=True,
                                                      parquet_footer_offset=100))
    return qdbpm.open(path)


def test_timestamp_search_vectors_of_the_notes(pm_path):
    with ts_pm(pm_path, [(1000, 2000)]) as pm:
        assert [pm.timestamp_find(t) for t in (500, 1500, 3000)] == [1, 2, 3]
    with ts_pm(pm_path, [(1000, 2000), (2000, 3000), (3000, 4000)]) as pm:
        assert [pm.timestamp_find(t) for t in (500, 2500, 3500, 5000)] == [1, 4, 6, 7]
        assert pm.timestamp_range(2500, 3000) == (1, 2)
        assert pm.timestamp_range(0, 1000) == (0, 0)
        assert pm.timestamp_range(3000, 9000) == (1, 3)
    with ts_pm(pm_path, [(0, 0), (1000, 2000)], num_rows=[0, 10]) as pm:
        assert pm.timestamp_find(1500) == 4


def test_timestamp_literals_in_column_units(pm_path):
    import datetime as dt

    day = 86_400_000_000
    with ts_pm(pm_path, [(0, day - 1), (day, 2 * day - 1)]) as pm:
        assert pm.prune(col("ts") >= dt.datetime(1970, 1, 2)).tolist() == [False, True]
        assert pm.prune(col("ts") >= "1970-01-02T00:00:00").tolist() == [False, True]
        assert pm.prune(col("ts") < np.datetime64("1970-01-01T00:00:00.000000001", "ns")).tolist() == [True, False]
        assert pm.prune(col("ts") > dt.datetime(1970, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=1)))).tolist() == [True, True]
        assert pm.prune(col("ts") == dt.date(1970, 1, 2)).tolist() == [False, True]


def test_typeless_int64_is_read_one_way_per_predicate(pm_path):
    """INT64 with no QuestDB type (unsigned 64-bit files) is pruned under each joint reading."""
    anysign = Column("x", type=-1, physical_type=L.PT_INT64)
    top = struct.pack("<Q", 1 << 63)  # 2^63 unsigned, -2^63 signed
    with one_column_pm(pm_path, anysign, [(top, top, 0, 10, EXACT), (q(0), q(5), 0, 10, EXACT)]) as pm:
        # each leaf alone may match under one reading or the other...
        assert pm.prune(col("x") >= 0).tolist() == [True, True]
        assert pm.prune(col("x") <= 0).tolist() == [True, True]
        # ...but no single reading puts 2^63 / -2^63 in [0, 0]
        assert pm.prune(col("x").between(0, 0)).tolist() == [False, True]
        assert pm.prune(col("x") == 1 << 63).tolist() == [True, False]
        assert pm.prune(col("x") == -(1 << 63)).tolist() == [True, False]
        assert pm.prune(col("x") != 1 << 63).tolist() == [True, True]  # equal in one reading only


def test_typeless_int64_reading_follows_each_row_groups_order(tmp_path):
    """uint64 has no QuestDB type, so `_pm` does not say its order; a row group whose min > max
    when read signed was written unsigned, whatever the rest of the predicate."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import qdbpm

    t = pa.table({"u": pa.array([1, 2**63, 0, 5, 2**63, 2**64 - 1], pa.uint64()), "b": [False] * 6})
    path = str(tmp_path / "data.parquet")
    pq.write_table(t, path, row_group_size=2)
    qdbpm.generate(path)
    with qdbpm.open(str(tmp_path / "_pm")) as pm:
        assert pm.prune(col("u") == 0).tolist() == [False, True, False]
        # joint readings (several leaves): the same answer
        assert pm.prune((col("b") == False) & (col("u") == 0)).tolist() == [False, True, False]  # noqa: E712
        assert pm.prune((col("u") >= 2**63) & (col("u") <= 2**63)).tolist() == [True, False, True]
