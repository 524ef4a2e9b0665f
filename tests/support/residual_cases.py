"""The residual-predicate test table and a seeded generator of WHERE clauses over it, shared by
tests/prune/test_residual_*.py.

Two pyarrow-written partitions of clustered row groups (row group r holds values near r) with
nulls, NaN, strings, dates, timestamps and decimals. The generator mixes residual leaves (column
pairs, arithmetic, LIKE, functions, CAST, CASE, IS DISTINCT FROM, INTERVAL literals) with plain ones
under AND / OR / NOT and renders each clause twice: for qdbpm, and for DuckDB over the same files.
Where qdbpm's documented semantics differ from DuckDB's (NaN compares FALSE except with !=; IN
never yields null) the DuckDB text spells qdbpm's meaning out.
"""

import datetime as dt
import decimal
import random

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from qdbpm.prune import expr as E
from qdbpm.prune import residual as R
from qdbpm.sync.generate import generate

RG_ROWS = 30
N_RGS = 16
N_PREDICATES = 250
N_LEAVES = 200
WORDS = ["apple", "apricot", "banana", "berry", "cherry", "citrus", "date", "dates", "fig", "grape", "kiwi",
         "lemon", "lime", "mango", "melon", "olive", "peach", "pear", "plum"]


def write_partition(path, part):
    """Clustered columns (row group r holds values near r), so that pruning has something to do."""
    pq.write_table(partition_table(part), path, row_group_size=RG_ROWS)


def partition_table(part, rgs=N_RGS):
    """write_partition's rows: `rgs` clusters of RG_ROWS rows (a different draw per `part`)."""
    rng = np.random.default_rng(100 + part)
    n = rgs * RG_ROWS
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
    return t


def write_table(root):
    """Partitions p0 and p1 under `root` (a pathlib.Path), each with its `_pm`: (root, files)."""
    files = []
    for p in (0, 1):
        d = root / f"p{p}"
        d.mkdir()
        f = str(d / "data.parquet")
        write_partition(f, p)
        generate(f)
        files.append(f)
    return str(root), files


# --- the generator: (qdbpm text, DuckDB text) ------------------------------------------------

OPS = ["=", "<>", "<", "<=", ">", ">="]


def nan_cmp(left, op, right):
    """qdbpm's comparison of values that may be NaN, in DuckDB (whose NaN equals NaN and is largest)."""
    return (f"(CASE WHEN ({left}) IS NULL OR ({right}) IS NULL THEN NULL "
            f"WHEN isnan(({left})::DOUBLE) OR isnan(({right})::DOUBLE) THEN {'TRUE' if op == '<>' else 'FALSE'} "
            f"ELSE ({left}) {op} ({right}) END)")


def duck_in(left, values):
    """qdbpm's IN (never null) in DuckDB."""
    return f"coalesce({left} IN ({values}), FALSE)"


def same_text(text):
    return text, text


def random_leaf(rng):
    op = rng.choice(OPS)
    k = rng.randint(-5, 170)
    x = round(rng.uniform(-3, 35), 1)
    w, w2 = rng.choice(WORDS), rng.choice(WORDS)
    pre = w[:rng.randint(1, 4)]
    day = dt.date(2023, 12, 20) + dt.timedelta(days=rng.randint(-3, 85))
    hour = dt.datetime(2023, 12, 30) + dt.timedelta(hours=rng.randint(-5, 330))
    forms = [
        # plain leaves
        lambda: same_text(f"a {op} {k}"),
        lambda: same_text(f"b {op} {k}"),
        lambda: (f"f {op} {x}", nan_cmp("f", op, x)),
        lambda: same_text(f"s {op} '{w}'"),
        lambda: same_text(f"d {op} DATE '{day}'"),
        lambda: same_text(f"b IS {rng.choice(['', 'NOT '])}NULL"),
        lambda: same_text("flag"),
        lambda: (f"s IN ('{w}_1', '{w2}_2')", duck_in("s", f"'{w}_1', '{w2}_2'")),
        # column pairs and arithmetic
        lambda: same_text(f"a {op} b"),
        lambda: same_text(f"b {op} a"),
        lambda: same_text(f"a {op} b + {rng.randint(-10, 10)}"),
        lambda: same_text(f"a + b {op} {2 * k}"),
        lambda: same_text(f"a * 2 - b {op} {k}"),
        lambda: same_text(f"-a {op} {-k}"),
        lambda: same_text(f"b / 4 {op} {x}"),
        lambda: (f"f * 2 {op} {x}", nan_cmp("f * 2", op, x)),
        lambda: same_text(f"dec * 2 {op} {k // 10}"),
        lambda: same_text(f"dec + 1.5 {op} a / 10"),
        lambda: same_text(f"d {op} ts"),
        # LIKE and friends
        lambda: same_text(f"s LIKE '{pre}%'"),
        lambda: same_text(f"s NOT LIKE '{pre}%'"),
        lambda: same_text(f"s LIKE '%{w[1:3]}%'"),
        lambda: same_text(f"s LIKE '{w}!_{rng.randint(0, 4)}' ESCAPE '!'"),
        lambda: same_text(f"s LIKE '{pre}_%'"),
        lambda: same_text(f"s LIKE '{pre}%_{rng.randint(0, 6)}'"),
        lambda: same_text(f"s ILIKE '{pre.upper()}%'"),
        lambda: same_text(f"starts_with(s, '{pre}')"),
        lambda: same_text(f"NOT starts_with(s, '{pre}')"),
        # functions
        lambda: same_text(f"year(d) {op} {rng.choice([2023, 2024])}"),
        lambda: same_text(f"year(ts) {op} {rng.choice([2023, 2024])}"),
        lambda: same_text(f"month(d) = {rng.randint(1, 3)}"),
        lambda: same_text(f"day(ts) {op} {rng.randint(1, 31)}"),
        lambda: same_text(f"date_trunc('month', d) {op} DATE '{day.replace(day=1)}'"),
        lambda: same_text(f"date_trunc('day', ts) {op} TIMESTAMP '{hour.date()} 00:00:00'"),
        lambda: same_text(f"date_trunc('week', d) = DATE '{day - dt.timedelta(days=day.weekday())}'"),
        lambda: same_text(f"lower(s) = '{w}_1'"),
        lambda: (f"upper(s) IN ('{w.upper()}_1', '{w.upper()}_3')",
                 duck_in("upper(s)", f"'{w.upper()}_1', '{w.upper()}_3'")),
        lambda: same_text(f"length(s) {op} {rng.randint(4, 9)}"),
        lambda: same_text(f"abs(b - 80) {op} {k // 2}"),
        lambda: same_text(f"coalesce(b, a) {op} {k}"),
        lambda: (f"coalesce(f, 0) {op} {x}", nan_cmp("coalesce(f, 0)", op, x)),
        # IS DISTINCT FROM, CASE, CAST, INTERVAL
        lambda: same_text(f"a IS {rng.choice(['', 'NOT '])}DISTINCT FROM b"),
        lambda: same_text(f"s IS {rng.choice(['', 'NOT '])}DISTINCT FROM '{w}_1'"),
        lambda: same_text(f"CASE WHEN a > {k} THEN b ELSE a END {op} {k}"),
        lambda: same_text(f"CASE WHEN flag THEN 'x' ELSE s END = 'x'"),
        lambda: same_text(f"CASE b WHEN {k} THEN TRUE WHEN {k + 1} THEN NULL ELSE a < {k} END"),
        lambda: same_text(f"CAST(a AS DOUBLE) / 3 {op} {x}"),
        lambda: same_text(f"CAST(ts AS DATE) {op} DATE '{day}'"),
        lambda: same_text(f"CAST(dec AS DOUBLE) {op} {x}"),
        lambda: same_text(f"d {op} DATE '2024-02-01' - INTERVAL '{rng.randint(0, 60)}' DAY"),
        lambda: same_text(f"ts {op} TIMESTAMP '{hour}' + INTERVAL '{rng.randint(-30, 30)}' HOUR"),
        lambda: same_text(f"d BETWEEN DATE '{day}' - INTERVAL '1' MONTH AND DATE '{day}'"),
        lambda: same_text(f"a + 1 BETWEEN {k} AND {k + 20}"),
        lambda: same_text(f"(a + b) IS {rng.choice(['', 'NOT '])}NULL"),
    ]
    return rng.choice(forms)()


def random_predicate(rng, depth=3):
    r = rng.random()
    if depth == 0 or r < 0.35:
        return random_leaf(rng)
    if r < 0.5:
        q, d = random_predicate(rng, depth - 1)
        return f"NOT ({q})", f"NOT ({d})"
    op = " AND " if r < 0.75 else " OR "
    kids = [random_predicate(rng, depth - 1) for _ in range(rng.randint(2, 3))]
    return "(" + op.join(q for q, _ in kids) + ")", "(" + op.join(d for _, d in kids) + ")"


def seeded_predicates():
    """Leaves alone and negated (each rule on its own), then deeper trees."""
    rng = random.Random("qdbpm-residual")
    leaves = [random_leaf(rng) for _ in range(N_LEAVES)]
    negated = [(f"NOT ({q})", f"NOT ({d})") for q, d in leaves[:N_LEAVES // 2]]
    return leaves + negated + [random_predicate(rng) for _ in range(N_PREDICATES)]


def has_residual(e):
    """Whether a parsed clause holds a residual node anywhere."""
    if isinstance(e, (E.And, E.Or)):
        return any(has_residual(c) for c in e.children)
    if isinstance(e, E.Not):
        return has_residual(e.child)
    return isinstance(e, R.Residual)


# --- DuckDB over the same files, and where each row sits -------------------------------------


def duckdb_source(files):
    """A DuckDB connection (time zone UTC) and its read_parquet() of `files`."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    return con, "read_parquet([" + ", ".join(f"'{f}'" for f in files) + "])"


def one_partition(root, table, **write_options):
    """`table` written as the one partition p0 under `root` (a pathlib.Path), with its `_pm`:
    (root as text, the Parquet file's path)."""
    (root / "p0").mkdir()
    path = str(root / "p0" / "data.parquet")
    pq.write_table(table, path, **write_options)
    generate(path)
    return str(root), path


def duckdb_ids(src, clause):
    """DuckDB's ids where `clause` holds over `src` (UTC), sorted; its error raised as it is."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    return sorted(r[0] for r in con.execute(f"select id from {src} where {clause}").fetchall())


def ids_both_ways(root, src, clause):
    """(qdbpm's ids where `clause` holds over the table at `root`, DuckDB's over `src`), sorted."""
    import qdbpm

    want = duckdb_ids(src, clause)
    with qdbpm.open_table(root) as t:
        got = sorted(t.scan(clause, columns=["id"]).to_table()["id"].to_pylist())
    return got, want


def partition_ids(part, clause):
    """ids_both_ways over `one_partition`'s (root, Parquet file)."""
    root, path = part
    return ids_both_ways(root, f"read_parquet('{path}')", clause)


def row_group_layout(files):
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


def stats_of(files, column):
    """Per (partition, row group): (min, max, null count) of `column` from the Parquet footers."""
    out = {}
    for k, f in enumerate(files):
        md = pq.ParquetFile(f).metadata
        i = md.schema.names.index(column)
        for r in range(md.num_row_groups):
            st = md.row_group(r).column(i).statistics
            out[(f"p{k}", r)] = (st.min, st.max, st.null_count, md.row_group(r).num_rows)
    return out
