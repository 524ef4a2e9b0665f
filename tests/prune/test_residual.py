"""Residual predicates (prune.residual): the broad SQL WHERE grammar, evaluated exactly and pruned
where a rule can prove something.

A seeded generator mixes residual leaves (column pairs, arithmetic, LIKE, functions, CAST, CASE,
IS DISTINCT FROM, INTERVAL literals) with plain ones under AND / OR / NOT over pyarrow-written
files with nulls, NaN, strings, dates, timestamps and decimals, and DuckDB answers the same
clause over the same files. Where qdbpm's documented semantics differ from DuckDB's (NaN compares
FALSE except with !=; IN never yields null) the DuckDB text spells qdbpm's meaning out.
"""

import datetime as dt
import decimal
import pickle
import random
import struct

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import col, parse
from qdbpm.errors import PredicateError
from qdbpm.pm import layout as L
from qdbpm.pm.description import Column, Description
from qdbpm.prune import expr as E
from qdbpm.prune import residual as R
from qdbpm.prune.approx import next_prefix
from qdbpm.prune.arrow import filter_table
from qdbpm.sync.generate import generate

RG_ROWS = 30
N_RGS = 16
N_PREDICATES = 250
N_LEAVES = 200
WORDS = ["apple", "apricot", "banana", "berry", "cherry", "citrus", "date", "dates", "fig", "grape", "kiwi",
         "lemon", "lime", "mango", "melon", "olive", "peach", "pear", "plum"]


def _partition(path, part):
    """Clustered columns (row group r holds values near r), so that pruning has something to do."""
    rng = np.random.default_rng(100 + part)
    n = N_RGS * RG_ROWS
    rg = np.arange(n) // RG_ROWS
    ids = np.arange(n) + part * 10_000
    f = rg * 2.0 + rng.normal(0, 1, n).round(2)
    f[rng.random(n) < 0.05] = np.nan
    # even row groups: one word and no null (LIKE 'prefix%' can be ALWAYS there); odd: a mix
    words = [WORDS[min(len(WORDS) - 1, r + int(rng.integers(0, 3)) * (r % 2))] for r in rg]
    t = pa.table({
        "id": pa.array(ids, pa.int64()),
        "a": pa.array(rg * 10 + rng.integers(0, 15, n), pa.int32()),
        "b": pa.array(rg * 10 + (rg % 3 - 1) * 25 + rng.integers(-5, 20, n), pa.int64(), mask=rng.random(n) < 0.1),
        "f": pa.array(f, mask=rng.random(n) < 0.1),
        "s": pa.array([w + "_" + str(i % 5) if k % 11 or r % 2 == 0 else None
                       for k, (i, w, r) in enumerate(zip(ids, words, rg))]),
        "d": pa.array([dt.date(2023, 12, 20) + dt.timedelta(days=int(r * 5 + x))
                       for r, x in zip(rg, rng.integers(0, 7, n))], pa.date32()),
        "ts": pa.array([dt.datetime(2023, 12, 30) + dt.timedelta(hours=int(r * 20 + x))
                        for r, x in zip(rg, rng.integers(0, 30, n))], pa.timestamp("us", "UTC"),
                       mask=rng.random(n) < 0.05),
        "dec": pa.array([decimal.Decimal(int(r * 100 + x)).scaleb(-2) for r, x in zip(rg, rng.integers(-50, 150, n))],
                        pa.decimal128(9, 2)),
        "flag": pa.array([bool(x) if x < 2 else None for x in rng.integers(0, 3, n)], pa.bool_()),
    })
    pq.write_table(t, path, row_group_size=RG_ROWS)


@pytest.fixture(scope="module")
def table_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("residual")
    files = []
    for p in (0, 1):
        d = root / f"p{p}"
        d.mkdir()
        f = str(d / "data.parquet")
        _partition(f, p)
        generate(f)
        files.append(f)
    return str(root), files


# --- the generator: (qdbpm text, DuckDB text) ------------------------------------------------

OPS = ["=", "<>", "<", "<=", ">", ">="]


def _nan_cmp(left, op, right):
    """qdbpm's comparison of values that may be NaN, in DuckDB (whose NaN equals NaN and is largest)."""
    return (f"(CASE WHEN ({left}) IS NULL OR ({right}) IS NULL THEN NULL "
            f"WHEN isnan(({left})::DOUBLE) OR isnan(({right})::DOUBLE) THEN {'TRUE' if op == '<>' else 'FALSE'} "
            f"ELSE ({left}) {op} ({right}) END)")


def _in(left, values):
    """qdbpm's IN (never null) in DuckDB."""
    return f"coalesce({left} IN ({values}), FALSE)"


def _same(text):
    return text, text


def _leaf(rng):
    op = rng.choice(OPS)
    k = rng.randint(-5, 170)
    x = round(rng.uniform(-3, 35), 1)
    w, w2 = rng.choice(WORDS), rng.choice(WORDS)
    pre = w[:rng.randint(1, 4)]
    day = dt.date(2023, 12, 20) + dt.timedelta(days=rng.randint(-3, 85))
    hour = dt.datetime(2023, 12, 30) + dt.timedelta(hours=rng.randint(-5, 330))
    forms = [
        # plain leaves
        lambda: _same(f"a {op} {k}"),
        lambda: _same(f"b {op} {k}"),
        lambda: (f"f {op} {x}", _nan_cmp("f", op, x)),
        lambda: _same(f"s {op} '{w}'"),
        lambda: _same(f"d {op} DATE '{day}'"),
        lambda: _same(f"b IS {rng.choice(['', 'NOT '])}NULL"),
        lambda: _same("flag"),
        lambda: (f"s IN ('{w}_1', '{w2}_2')", _in("s", f"'{w}_1', '{w2}_2'")),
        # column pairs and arithmetic
        lambda: _same(f"a {op} b"),
        lambda: _same(f"b {op} a"),
        lambda: _same(f"a {op} b + {rng.randint(-10, 10)}"),
        lambda: _same(f"a + b {op} {2 * k}"),
        lambda: _same(f"a * 2 - b {op} {k}"),
        lambda: _same(f"-a {op} {-k}"),
        lambda: _same(f"b / 4 {op} {x}"),
        lambda: (f"f * 2 {op} {x}", _nan_cmp("f * 2", op, x)),
        lambda: _same(f"dec * 2 {op} {k // 10}"),
        lambda: _same(f"dec + 1.5 {op} a / 10"),
        lambda: _same(f"d {op} ts"),
        # LIKE and friends
        lambda: _same(f"s LIKE '{pre}%'"),
        lambda: _same(f"s NOT LIKE '{pre}%'"),
        lambda: _same(f"s LIKE '%{w[1:3]}%'"),
        lambda: _same(f"s LIKE '{w}!_{rng.randint(0, 4)}' ESCAPE '!'"),
        lambda: _same(f"s LIKE '{pre}_%'"),
        lambda: _same(f"s LIKE '{pre}%_{rng.randint(0, 6)}'"),
        lambda: _same(f"s ILIKE '{pre.upper()}%'"),
        lambda: _same(f"starts_with(s, '{pre}')"),
        lambda: _same(f"NOT starts_with(s, '{pre}')"),
        # functions
        lambda: _same(f"year(d) {op} {rng.choice([2023, 2024])}"),
        lambda: _same(f"year(ts) {op} {rng.choice([2023, 2024])}"),
        lambda: _same(f"month(d) = {rng.randint(1, 3)}"),
        lambda: _same(f"day(ts) {op} {rng.randint(1, 31)}"),
        lambda: _same(f"date_trunc('month', d) {op} DATE '{day.replace(day=1)}'"),
        lambda: _same(f"date_trunc('day', ts) {op} TIMESTAMP '{hour.date()} 00:00:00'"),
        lambda: _same(f"date_trunc('week', d) = DATE '{day - dt.timedelta(days=day.weekday())}'"),
        lambda: _same(f"lower(s) = '{w}_1'"),
        lambda: (f"upper(s) IN ('{w.upper()}_1', '{w.upper()}_3')",
                 _in("upper(s)", f"'{w.upper()}_1', '{w.upper()}_3'")),
        lambda: _same(f"length(s) {op} {rng.randint(4, 9)}"),
        lambda: _same(f"abs(b - 80) {op} {k // 2}"),
        lambda: _same(f"coalesce(b, a) {op} {k}"),
        lambda: (f"coalesce(f, 0) {op} {x}", _nan_cmp("coalesce(f, 0)", op, x)),
        # IS DISTINCT FROM, CASE, CAST, INTERVAL
        lambda: _same(f"a IS {rng.choice(['', 'NOT '])}DISTINCT FROM b"),
        lambda: _same(f"s IS {rng.choice(['', 'NOT '])}DISTINCT FROM '{w}_1'"),
        lambda: _same(f"CASE WHEN a > {k} THEN b ELSE a END {op} {k}"),
        lambda: _same(f"CASE WHEN flag THEN 'x' ELSE s END = 'x'"),
        lambda: _same(f"CASE b WHEN {k} THEN TRUE WHEN {k + 1} THEN NULL ELSE a < {k} END"),
        lambda: _same(f"CAST(a AS DOUBLE) / 3 {op} {x}"),
        lambda: _same(f"CAST(ts AS DATE) {op} DATE '{day}'"),
        lambda: _same(f"CAST(dec AS DOUBLE) {op} {x}"),
        lambda: _same(f"d {op} DATE '2024-02-01' - INTERVAL '{rng.randint(0, 60)}' DAY"),
        lambda: _same(f"ts {op} TIMESTAMP '{hour}' + INTERVAL '{rng.randint(-30, 30)}' HOUR"),
        lambda: _same(f"d BETWEEN DATE '{day}' - INTERVAL '1' MONTH AND DATE '{day}'"),
        lambda: _same(f"a + 1 BETWEEN {k} AND {k + 20}"),
        lambda: _same(f"(a + b) IS {rng.choice(['', 'NOT '])}NULL"),
    ]
    return rng.choice(forms)()


def _predicate(rng, depth=3):
    r = rng.random()
    if depth == 0 or r < 0.35:
        return _leaf(rng)
    if r < 0.5:
        q, d = _predicate(rng, depth - 1)
        return f"NOT ({q})", f"NOT ({d})"
    op = " AND " if r < 0.75 else " OR "
    kids = [_predicate(rng, depth - 1) for _ in range(rng.randint(2, 3))]
    return "(" + op.join(q for q, _ in kids) + ")", "(" + op.join(d for _, d in kids) + ")"


def _predicates():
    """Leaves alone and negated (each rule on its own), then deeper trees."""
    rng = random.Random("qdbpm-residual")
    leaves = [_leaf(rng) for _ in range(N_LEAVES)]
    negated = [(f"NOT ({q})", f"NOT ({d})") for q, d in leaves[:N_LEAVES // 2]]
    return leaves + negated + [_predicate(rng) for _ in range(N_PREDICATES)]


def _has_residual(e):
    if isinstance(e, (E.And, E.Or)):
        return any(_has_residual(c) for c in e.children)
    if isinstance(e, E.Not):
        return _has_residual(e.child)
    return isinstance(e, R.Residual)


def _duck(files):
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    return con, "read_parquet([" + ", ".join(f"'{f}'" for f in files) + "])"


def _layout(files):
    """id -> (partition, row group), and every row group's ids."""
    where, groups = {}, {}
    for k, f in enumerate(files):
        pf = pq.ParquetFile(f)
        for r in range(pf.num_row_groups):
            ids = pf.read_row_group(r, columns=["id"]).column(0).to_pylist()
            groups[(f"p{k}", r)] = set(ids)
            for i in ids:
                where[i] = (f"p{k}", r)
    return where, groups


def test_random_residual_predicates_match_duckdb_and_prune_soundly(table_files):
    root, files = table_files
    con, src = _duck(files)
    where, groups = _layout(files)
    seen = {"residual": 0, "rows": 0, "empty": 0, "pruned": 0, "residual_pruned": 0, "always": 0}
    with qdbpm.open_table(root) as table:
        for q, d in _predicates():
            want = {r[0] for r in con.execute(f"select id from {src} where {d}").fetchall()}
            got = table.scan(q, columns=["id"]).to_table()["id"].to_pylist()
            assert len(got) == len(set(got)) and set(got) == want, f"{q!r}: {len(got)} rows, DuckDB {len(want)}"
            classes = table.classify_masks(q)
            masks = table.prune_masks(q)
            pruned = 0
            for part, (maybe, always) in classes.items():
                assert np.array_equal(maybe, masks[part])
                for r in range(len(maybe)):
                    ids = groups[(part, r)]
                    if ids & want:
                        assert maybe[r], f"{q!r}: pruned {part} row group {r} holding a matching row"
                    if always[r]:
                        assert ids <= want, f"{q!r}: {part} row group {r} ALWAYS with a non-matching row"
                pruned += int((~maybe).sum())
                seen["always"] += int(always.sum())
            residual = _has_residual(parse(q))
            seen["residual"] += residual
            seen["residual_pruned"] += residual and pruned > 0
            seen["pruned"] += pruned
            seen["rows"] += bool(want)
            seen["empty"] += not want
    # Not vacuous: residuals are common, clauses select and reject rows, residual clauses prune.
    assert seen["residual"] > N_PREDICATES // 2, seen
    assert seen["rows"] > N_PREDICATES // 3 and seen["empty"] > 10, seen
    assert seen["residual_pruned"] > N_PREDICATES // 5 and seen["always"] > 100, seen


def test_residual_in_a_conjunction_never_weakens_pruning(table_files):
    """masks(P AND Q) is within masks(P) for a residual Q: what P prunes stays pruned."""
    root, _ = table_files
    rng = random.Random("qdbpm-residual-and")
    n = 0
    with qdbpm.open_table(root) as table:
        for _ in range(120):
            p, _ = _predicate(rng, 2)
            r, _ = _leaf(rng)
            if not _has_residual(parse(r)):
                continue
            base = table.prune_masks(p)
            for both in (f"({p}) AND ({r})", f"({r}) AND ({p})"):
                masks = table.prune_masks(both)
                for part, m in masks.items():
                    assert not (m & ~base[part]).any(), (both, part)
            n += 1
    assert n > 50


# --- the pruning rules ----------------------------------------------------------------------


def _stats_of(files, column):
    """Per (partition, row group): (min, max, null count) of `column` from the Parquet footers."""
    out = {}
    for k, f in enumerate(files):
        md = pq.ParquetFile(f).metadata
        i = md.schema.names.index(column)
        for r in range(md.num_row_groups):
            st = md.row_group(r).column(i).statistics
            out[(f"p{k}", r)] = (st.min, st.max, st.null_count, md.row_group(r).num_rows)
    return out


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
    a, b = _stats_of(files, "a"), _stats_of(files, "b")
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


# --- parsing, errors, the node protocol -----------------------------------------------------


@pytest.mark.parametrize("text,want", [
    ("a = 1", E.Cmp("a", "==", 1)),
    ("1 < a", E.Cmp("a", ">", 1)),
    ("a > -2.5", E.Cmp("a", ">", -2.5)),
    ("a = 1 + 2", E.Cmp("a", "==", 3)),
    ("d < DATE '1998-12-01' - INTERVAL '90' DAY", E.Cmp("d", "<", dt.date(1998, 9, 2))),
    ("d >= DATE '2024-01-31' + INTERVAL '1' MONTH", E.Cmp("d", ">=", dt.date(2024, 2, 29))),
    ("ts < TIMESTAMP '2024-01-01 00:00:00' - INTERVAL 3 HOUR", E.Cmp("ts", "<", dt.datetime(2023, 12, 31, 21))),
    ("d < DATE '2024-01-01' + INTERVAL '1 year'", E.Cmp("d", "<", dt.date(2025, 1, 1))),
    ("d = CAST('2024-03-01' AS DATE)", E.Cmp("d", "==", dt.date(2024, 3, 1))),
    ("a < b", R.Compare(R.Ref("a"), "<", R.Ref("b"))),
    ("s LIKE 'a%'", R.Like(R.Ref("s"), "a%")),
    ("s NOT ILIKE 'a%'", E.Not(R.Like(R.Ref("s"), "a%", True))),
    ("year(d) = 1995", R.Compare(R.Func("year", (R.Ref("d"),)), "==", R.Const(1995))),
    ("a IS NOT DISTINCT FROM b", E.Not(R.Distinct(R.Ref("a"), R.Ref("b")))),
    ("CASE WHEN flag THEN a ELSE 0 END > 1",
     R.Compare(R.Case(((E.Cmp("flag", "==", True), R.Ref("a")),), R.Const(0)), ">", R.Const(1))),
    ("coalesce(flag, FALSE)", R.Truth(R.Func("coalesce", (R.Ref("flag"), R.Const(False))))),
])
def test_parse_forms(text, want):
    assert parse(text) == want


def test_simple_clauses_keep_plain_nodes():
    e = parse("a = 1 AND b BETWEEN 1 AND 2 AND c IN (1, 2) AND d IS NULL AND NOT flag")
    assert not _has_residual(e)
    assert parse("(a + 1) * 2 > b") == R.Compare(R.Arith("*", R.Arith("+", R.Ref("a"), R.Const(1)), R.Const(2)), ">",
                                                 R.Ref("b"))


def test_simple_comparison_takes_the_fast_path(monkeypatch):
    """`column op literal` never enters the value grammar (the parse-time fast path)."""
    from qdbpm.prune import sql

    def refuse(self):
        raise AssertionError("value grammar used")

    monkeypatch.setattr(sql._Parser, "additive", refuse)
    assert parse("a = 1 AND \"B\" >= 'x' OR c < 2.5") == E.Or((E.And((E.Cmp("a", "==", 1), E.Cmp("B", ">=", "x"))),
                                                              E.Cmp("c", "<", 2.5)))
    with pytest.raises(AssertionError):
        parse("a = -1")


@pytest.mark.parametrize("bad", ["foo(a) = 1", "a LIKE b", "a LIKE 'x!' ESCAPE '!'", "a + INTERVAL '1' DAY > 1",
                                 "CAST(a AS REAL) > 1", "date_trunc('fortnight', d) = DATE '2024-01-01'",
                                 "a = NULL", "a + 1", "1", "year(d", "CASE WHEN a THEN 1", "a LIKE 'x' ESCAPE 'ab'",
                                 "a IS DISTINCT b", "starts_with(s, t)"])
def test_parse_errors(bad):
    with pytest.raises(PredicateError):
        parse(bad)


@pytest.mark.parametrize("bad,match", [("year(s) = 2024", "year"), ("s LIKE 'a%' AND a LIKE 'b%'", "LIKE takes"),
                                       ("a + s > 1", "arithmetic"), ("CAST(f AS VARCHAR) = '1'", "CAST of FLOAT"),
                                       ("a < s", "cannot compare"), ("zz + 1 > a", "no column"),
                                       ("CASE WHEN a THEN 1 ELSE 0 END = 1", "not BOOLEAN"),
                                       ("lower(a) = 'x'", "lower")])
def test_unsupported_is_one_predicate_error_before_io(table_files, bad, match):
    root, files = table_files
    with qdbpm.open_table(root) as table:
        with pytest.raises(PredicateError, match=match):
            table.prune_masks(bad)
        with pytest.raises(PredicateError, match=match):
            table.scan(bad)  # planning binds every partition's schema: no data read yet
    with pytest.raises(PredicateError, match=match):
        filter_table(pq.read_table(files[0]), parse(bad))


def test_residual_nodes_are_immutable_hashable_picklable_and_resolve():
    e = parse("A + b > 1 AND s LIKE 'x%' AND CASE WHEN Flag THEN year(d) ELSE 0 END = 2024 OR "
              "coalesce(b, 1) IS DISTINCT FROM 2 AND NOT starts_with(lower(s), 'a')")
    assert pickle.loads(pickle.dumps(e)) == e and hash(pickle.loads(pickle.dumps(e))) == hash(e)
    assert e.columns() == {"A", "b", "s", "Flag", "d"}
    r = e.resolve(["a", "B", "s", "flag", "d"])
    assert r.columns() == {"a", "B", "s", "flag", "d"}
    with pytest.raises(Exception):
        r.children[0].children[0].op = "<"
    n = E.nnf(~e)
    assert isinstance(n, E.And) and E.nnf(~n) == E.nnf(e)
    assert (col("a") > 1) & parse("a < b") == E.And((E.Cmp("a", ">", 1), R.Compare(R.Ref("a"), "<", R.Ref("b"))))


# --- substring ------------------------------------------------------------------------------

SUBSTRING_STRINGS = ["", "a", "ab", "abc", "abcdef", "abcdefghij", "éàü", "日本語テキスト", None]


def test_substring_slices_as_duckdb():
    """substring(s, start[, length]) over literal starts and lengths (negative, zero, past either
    end, DuckDB's extremes) gives DuckDB's strings (characters, not bytes) in the exact filter."""
    con = duckdb.connect()
    lo, hi = R.SUBSTRING_RANGE
    nonempty = 0
    for st in list(range(-12, 13)) + [lo, lo + 1, hi]:
        for ln in [None] + list(range(-12, 13)) + [lo, hi]:
            call = f"substring(s, {st})" if ln is None else f"substring(s, {st}, {ln})"
            want = [r[0] for r in con.execute(f"SELECT {call} FROM unnest(?) t(s)", [SUBSTRING_STRINGS]).fetchall()]
            t = pa.table({"s": pa.array(SUBSTRING_STRINGS, pa.string()), "want": pa.array(want, pa.string())})
            got = filter_table(t, parse(f"{call} IS NOT DISTINCT FROM want"))
            assert got.num_rows == t.num_rows, (call, [r for r in t.to_pylist() if r not in got.to_pylist()])
            nonempty += sum(w not in ("", None) for w in want)
    assert nonempty > 1000


def test_substring_forms_parse_alike():
    node = R.Func("substring", (R.Ref("s"), R.Const(2), R.Const(3)))
    assert parse("substring(s FROM 2 FOR 3) = 'x'") == parse("substr(s, 2, 3) = 'x'") == \
        parse("SUBSTRING(s, 1 + 1, 3) = 'x'") == R.Compare(node, "==", R.Const("x"))
    assert parse("substring(s FROM -2) = 'x'") == parse("substring(s, -2) = 'x'")
    assert pickle.loads(pickle.dumps(parse("substring(s, 1, 2) IN ('a', 'b')"))) == \
        R.InList(R.Func("substring", (R.Ref("s"), R.Const(1), R.Const(2))), ("a", "b"))


@pytest.mark.parametrize("bad", ["substring(s) = 'x'", "substring(s, 1, 2, 3) = 'x'", "substring(s, a) = 'x'",
                                 "substring(s, 1, a) = 'x'", "substring(s, 1.5) = 'x'", "substring(s, NULL) = 'x'",
                                 "substring(s, 4294967296) = 'x'", "substring(s, 1, -4294967297) = 'x'",
                                 "substring(s FROM 1, 2) = 'x'", "substring(s FOR 2) = 'x'"])
def test_substring_parse_errors(bad):
    with pytest.raises(PredicateError, match="substring|expected"):
        parse(bad)


def test_substring_of_a_non_string_is_one_predicate_error_before_io(table_files):
    root, files = table_files
    with qdbpm.open_table(root) as table:
        with pytest.raises(PredicateError, match="substring"):
            table.scan("substring(a, 1, 2) = '1'")
    node = R.Compare(R.Func("substring", (R.Ref("s"), R.Ref("a"))), "==", R.Const("x"))  # built, not parsed
    with pytest.raises(PredicateError, match="substring"):
        filter_table(pq.read_table(files[0]), node)


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


def test_substring_in_predicates_matches_duckdb_and_prunes_soundly(table_files):
    root, files = table_files
    con, src = _duck(files)
    _, groups = _layout(files)
    rng = random.Random("qdbpm-substring")
    seen = {"rows": 0, "empty": 0, "pruned": 0}
    with qdbpm.open_table(root) as table:
        for k in range(120):
            w, w2 = rng.choice(WORDS), rng.choice(WORDS)
            n, st = rng.randint(1, 6), rng.choice([-3, -1, 0, 1, 1, 1, 2])
            vals = f"'{w[:n]}', '{w2[:n - 1]}', '{w2}_{rng.randint(0, 4)}'"
            leaf = rng.choice([
                _same(f"substring(s, {st}, {n}) {rng.choice(['=', '<>', '<', '>='])} '{w[:n]}'"),
                _same(f"substring(s FROM {st}) = '{w}_{rng.randint(0, 4)}'"),
                (f"substring(s, {st}, {n}) IN ({vals})", _in(f"substring(s, {st}, {n})", vals)),
                (f"substring(s, 1, {n}) NOT IN ({vals})", f"NOT {_in(f'substring(s, 1, {n})', vals)}"),
            ])
            other = _predicate(rng, 2)
            q, d = rng.choice([leaf, (f"NOT ({leaf[0]})", f"NOT ({leaf[1]})"),
                               (f"({leaf[0]}) AND ({other[0]})", f"({leaf[1]}) AND ({other[1]})"),
                               (f"({leaf[0]}) OR ({other[0]})", f"({leaf[1]}) OR ({other[1]})")])
            want = {r[0] for r in con.execute(f"select id from {src} where {d}").fetchall()}
            got = table.scan(q, columns=["id"]).to_table()["id"].to_pylist()
            assert len(got) == len(set(got)) and set(got) == want, f"{q!r}: {len(got)} rows, DuckDB {len(want)}"
            for part, (maybe, always) in table.classify_masks(q).items():
                for r in range(len(maybe)):
                    ids = groups[(part, r)]
                    assert maybe[r] or not ids & want, f"{q!r}: pruned {part} row group {r} holding a matching row"
                    assert not always[r] or ids <= want, f"{q!r}: {part} row group {r} ALWAYS, a row does not match"
                seen["pruned"] += int((~maybe).sum())
            seen["rows"] += bool(want)
            seen["empty"] += not want
    assert seen["rows"] > 40 and seen["empty"] > 10 and seen["pruned"] > 100, seen


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
