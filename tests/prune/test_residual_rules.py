"""Residual predicates (prune.residual): the pruning rules, each checked against the plain
predicate it stands for (a LIKE prefix as its byte range, year() and date_trunc() as date ranges,
substring prefixes as starts_with) or against the statistics themselves (column pairs), with
truncated statistics and null-holding row groups.
"""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.pm import layout as L
from qdbpm.pm.description import Column, Description
from qdbpm.prune import expr as E
from qdbpm.prune.approx import next_prefix
from qdbpm.sync.generate import generate

from support.residual_cases import stats_of, write_table


@pytest.fixture(scope="module")
def table_files(tmp_path_factory):
    return write_table(tmp_path_factory.mktemp("residual"))


def test_like_prefix_prunes_as_the_byte_range(table_files):
    root, _ = table_files
    with qdbpm.open_table(root) as table:
        total = n_always = 0
        for pre in ("ap", "b", "dat", "pe", "zz", "lime_"):
            nxt = pre[:-1] + chr(ord(pre[-1]) + 1)
            rng_sql = f"s >= '{pre}' AND s < '{nxt}'"
            like = pre.replace("_", "!_")  # '_' is a wildcard unless escaped
            for sql in (f"s LIKE '{like}%' ESCAPE '!'", f"starts_with(s, '{pre}')", f"s LIKE '{like}%%' ESCAPE '!'"):
                assert {p: m.tolist() for p, m in table.prune_masks(sql).items()} == \
                    {p: m.tolist() for p, m in table.prune_masks(rng_sql).items()}, sql
                got = table.classify_masks(sql)
                want = table.classify_masks(rng_sql)
                for p in got:
                    assert np.array_equal(got[p][1], want[p][1]), sql  # ALWAYS as the range's
            # a wildcard after the prefix keeps the range for MAYBE, never ALWAYS
            for p, (maybe, always) in table.classify_masks(f"s LIKE '{pre}_%'").items():
                assert not always.any() and not (maybe & ~table.prune_masks(rng_sql)[p]).any()
            total += sum(int((~m).sum()) for m in table.prune_masks(f"starts_with(s, '{pre}')").values())
            n_always += sum(int(a.sum()) for _, a in table.classify_masks(f"starts_with(s, '{pre}')").values())
        assert total > 50 and n_always > 3
        # no prefix, or ILIKE: nothing to prune on
        for sql in ("s LIKE '%an%'", "s ILIKE 'AP%'"):
            assert all(m.all() for m in table.prune_masks(sql).values())


def test_column_pair_prunes_where_bounds_cannot_cross(table_files):
    root, files = table_files
    a, b = stats_of(files, "a"), stats_of(files, "b")
    with qdbpm.open_table(root) as table:
        for op, keep in (("<", lambda x, y: x[0] < y[1]), ("<=", lambda x, y: x[0] <= y[1]),
                         (">", lambda x, y: x[1] > y[0]), (">=", lambda x, y: x[1] >= y[0]),
                         ("=", lambda x, y: x[0] <= y[1] and x[1] >= y[0])):
            for sql in (f"a {op} b", f"b {E.FLIP_OP.get(op, op) if op != '=' else '='} a"):
                masks = table.prune_masks(sql)
                swap = sql.startswith("b")
                for (p, r), sa in a.items():
                    sb = b[(p, r)]
                    want = keep(sa, sb)
                    assert masks[p][r] == want, (sql, p, r, sa, sb, swap)
        pruned = sum(int((~m).sum()) for m in table.prune_masks("a > b + 0").values())
        assert pruned == 0  # a value on one side is not a column: no pair rule
        assert sum(int((~m).sum()) for m in table.prune_masks("b < a").values()) > 5


def test_year_and_date_trunc_prune_as_ranges(table_files):
    root, _ = table_files
    with qdbpm.open_table(root) as table:
        def same(sql, rng_sql):
            assert {p: m.tolist() for p, m in table.prune_masks(sql).items()} == \
                {p: m.tolist() for p, m in table.prune_masks(rng_sql).items()}, sql

        same("year(d) = 2024", "d >= DATE '2024-01-01' AND d < DATE '2025-01-01'")
        same("year(d) < 2024", "d < DATE '2024-01-01'")
        same("year(d) >= 2024", "d >= DATE '2024-01-01'")
        same("date_trunc('month', d) = DATE '2024-02-01'", "d >= DATE '2024-02-01' AND d < DATE '2024-03-01'")
        same("NOT date_trunc('month', d) = DATE '2024-02-01'", "NOT (d >= DATE '2024-02-01' AND d < DATE '2024-03-01')")
        # a TIMESTAMP's fields depend on its zone: a day of slack either way
        same("year(ts) = 2024", "ts >= TIMESTAMP '2023-12-31' AND ts < TIMESTAMP '2025-01-02'")
        same("date_trunc('day', ts) = TIMESTAMP '2024-01-05 00:00:00'",
             "ts >= TIMESTAMP '2024-01-04' AND ts < TIMESTAMP '2024-01-07'")
        feb = table.prune_masks("date_trunc('month', d) = DATE '2024-02-01'")
        assert sum(int((~m).sum()) for m in feb.values()) > 10
        # not on a unit boundary: never equal, but left to the exact filter
        assert all(m.all() for m in table.prune_masks("date_trunc('month', d) = DATE '2024-02-03'").values())


EXACT = L.STAT_MIN_EXACT | L.STAT_MAX_EXACT | L.STAT_NULL_COUNT_PRESENT


def test_like_prefix_with_truncated_statistics(tmp_path):
    """A truncated min is still a lower bound and a truncated max an upper one: a row group whose
    bounds were cut to 'ab' .. 'abd' may hold 'abc...' and is kept, but proves nothing ALWAYS."""
    rgs = []
    cases = [(b"ab", b"abd", L.STAT_NULL_COUNT_PRESENT, True, False),  # truncated both ways
             (b"abc", b"abcz", EXACT, True, True),
             (b"abd", b"abz", EXACT, False, False),
             (b"aa", b"abb", EXACT, False, False),
             (b"abc", b"abd", L.STAT_NULL_COUNT_PRESENT | L.STAT_MIN_EXACT, True, False),  # max rounded up
             (b"abc\xff", b"abc\xff\xff", EXACT, True, True)]
    for mn, mx, flags, _, _ in cases:
        ch = np.zeros(1, L.CHUNK_DTYPE)
        ch["num_values"], ch["null_count"], ch["stat_flags"] = 10, 0, flags
        rgs.append({"num_rows": 10, "chunks": ch, "mins": [mn], "maxs": [mx]})
    path = str(tmp_path / "_pm")
    qdbpm.write_new(path, Description.from_row_groups([Column("x", type=L.QDB_VARCHAR,
                                                              physical_type=L.PT_BYTE_ARRAY)], rgs,
                                                      parquet_footer_offset=100))
    pm = qdbpm.open(path)
    for sql in ("x LIKE 'abc%'", "starts_with(x, 'abc')"):
        maybe, always = pm.classify(sql)
        assert maybe.tolist() == [c[3] for c in cases], sql
        assert always.tolist() == [c[4] for c in cases], sql
    assert next_prefix(b"abc") == b"abd" and next_prefix(b"a\xff\xff") == b"b" and next_prefix(b"\xff") is None


def test_substring_prefix_prunes_as_the_byte_range(table_files):
    root, _ = table_files
    with qdbpm.open_table(root) as table:
        def masks(sql):
            return {p: m.tolist() for p, m in table.prune_masks(sql).items()}

        def classes(sql):
            return {p: (m.tolist(), a.tolist()) for p, (m, a) in table.classify_masks(sql).items()}

        pruned = 0
        for pre in ("ap", "ban", "d", "lime_", "zz"):
            n = len(pre)
            like = f"starts_with(s, '{pre}')"
            for sql in (f"substring(s, 1, {n}) = '{pre}'", f"'{pre}' = substring(s FROM 0 FOR {n + 1})",
                        f"substring(s, 1, {n}) IN ('{pre}')"):
                assert classes(sql) == classes(like), sql
            assert classes(f"substring(s, 1, {n}) <> '{pre}'") == classes(f"NOT {like}")
            pruned += sum(int((~m).sum()) for m in table.prune_masks(f"substring(s, 1, {n}) = '{pre}'").values())
        assert pruned > 50
        # fewer characters than the window: the whole value; more: never equal, left to the filter
        assert classes("substring(s, 1, 9) = 'apple_1'") == classes("s = 'apple_1'")
        assert masks("substring(s, 1, 3) IN ('app', 'ch', 'berries')") == masks("starts_with(s, 'app') OR s = 'ch'")
        # NOT IN is TRUE for a null s: row groups with nulls stay
        assert masks("substring(s, 1, 3) NOT IN ('app', 'ban')") == \
            masks("NOT (starts_with(s, 'app') OR starts_with(s, 'ban')) OR s IS NULL")
        # not a prefix of the value: nothing to prune on
        for sql in ("substring(s, 2, 3) = 'ppl'", "substring(s, -1) = '1'", "substring(s, 1, 2) IN ('ab', NULL)"):
            assert all(m.all() for m in table.prune_masks(sql).values()), sql


def test_substring_not_in_keeps_row_groups_of_nulls(tmp_path):
    """NOT IN is TRUE for a null (IN never yields null): a row group whose other values all match
    the list is kept for its nulls, and one without nulls is pruned."""
    s = ["apple", None, "apricot", None] + ["apple", "apricot"] * 2 + ["banana", "apple", None, "kiwi"]
    pq.write_table(pa.table({"id": list(range(12)), "s": s}), str(tmp_path / "data.parquet"), row_group_size=4)
    generate(str(tmp_path / "data.parquet"))
    with qdbpm.open_table(tmp_path) as table:
        for sql, maybe, always, rows in (
                ("substring(s, 1, 2) NOT IN ('ap', 'zz')", [True, False, True], [False] * 3, [1, 3, 8, 10, 11]),
                ("substring(s, 1, 2) IN ('ap', 'zz')", [True] * 3, [False, True, False], [0, 2, 4, 5, 6, 7, 9])):
            (m, a), = table.classify_masks(sql).values()
            assert (m.tolist(), a.tolist()) == (maybe, always), sql
            assert sorted(table.scan(sql, ["id"]).to_table()["id"].to_pylist()) == rows, sql
