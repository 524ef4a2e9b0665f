"""Predicates as pyarrow users write them: DNF filter lists (`filters=`) and pyarrow.compute
expressions give exactly pyarrow.dataset's rows for the same filter.

A table of three pyarrow-written partitions (several row groups each; nulls, NaN, strings with
quotes, binary, naive and UTC timestamps, dates, decimals, booleans, a column with an odd name),
`_pm` from qdbpm.generate with blooms on some columns. For a fixed seeded set of DNF lists and of
pc.Expressions: `open_table(root).scan(filter).to_table()` holds the rows (by row id) that
`pyarrow.dataset.dataset(root).to_table(filter=...)` returns; pruning never drops a row group
holding one of them, and a row group classified full holds only such rows.
"""

import datetime as dt
import decimal
import json
import os
import pickle
import random
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import as_predicate, col, from_arrow, from_filters, parse
from qdbpm.errors import PredicateError
from qdbpm.prune.expr import And, Cmp, In, IsNotNull, IsNull, Literal, Not, Or
from qdbpm.sync.generate import generate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RG_ROWS, N_RGS, PARTS = 50, 6, (0, 1, 2)
N_DNF, N_EXPR = 300, 300
ODD = 'x y)"'  # a column name that pyarrow prints unescaped
T0 = dt.datetime(2024, 1, 1)
UTC = dt.timezone.utc
STRS = ["", "a", "a'b", 'q"x', "b", "ba", "c", "é", "zz"]
BINS = [b"", b"\x00", b"a", b"\xff", b"ab"]


def _partition(path, part):
    rng = np.random.default_rng(100 + part)
    n = RG_ROWS * N_RGS
    rg = np.arange(n) // RG_ROWS
    g = part * N_RGS + rg  # row groups cover increasing ranges, so stats prune

    def nulls(p):
        return rng.random(n) < p

    f = np.round((g * 2 + rng.random(n) * 6 - 10) * 4) / 4 + 0.0  # quarters; + 0.0 makes -0.0 0.0
    f[rng.random(n) < 0.05] = np.nan
    micros = rng.integers(0, 3_600_000_000, n)
    ts = np.array([np.datetime64(T0, "us") + np.timedelta64(int(h), "h") + np.timedelta64(int(u), "us")
                   for h, u in zip(g, micros)])
    tz = ts.astype("datetime64[ms]") + np.timedelta64(30, "m")
    days = g // 2 + rng.integers(0, 3, n)
    t = pa.table({
        "rid": pa.array(np.arange(n) + part * 10_000, pa.int64()),
        "i": pa.array(g * 10 + rng.integers(0, 15, n) - 40, pa.int32(), mask=nulls(0.1)),
        "f": pa.array(f, pa.float64(), mask=nulls(0.1)),
        "s": pa.array([STRS[(k + int(x)) % len(STRS)] for k, x in zip(g, rng.integers(0, 3, n))], mask=nulls(0.1)),
        "ts": pa.array(ts, pa.timestamp("us"), mask=nulls(0.1)),
        "tz": pa.array(tz.astype(np.int64), pa.timestamp("ms", tz="UTC"), mask=nulls(0.1)),
        "d": pa.array((np.datetime64("2024-01-01") + days).astype("datetime64[D]"), pa.date32(), mask=nulls(0.1)),
        "b": pa.array(rng.random(n) < (g % 3) / 2, pa.bool_(), mask=nulls(0.15)),
        "dec": pa.array([decimal.Decimal(int(v)).scaleb(-2) for v in g * 100 + rng.integers(-300, 300, n)],
                        pa.decimal128(9, 2), mask=nulls(0.1)),
        "bin": pa.array([BINS[(k + int(x)) % len(BINS)] for k, x in zip(g, rng.integers(0, 2, n))], pa.binary(),
                        mask=nulls(0.1)),
        ODD: pa.array(rng.integers(0, 5, n) + g, pa.int64()),
    })
    pq.write_table(t, path, row_group_size=RG_ROWS)


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("filters")
    where = {}  # rid -> (partition, row group)
    for p in PARTS:
        d = root / f"p{p}"
        d.mkdir()
        f = str(d / "data.parquet")
        _partition(f, p)
        generate(f, bloom_columns=["s", "i", "bin"])
        pf = pq.ParquetFile(f)
        for r in range(pf.num_row_groups):
            for rid in pf.read_row_group(r, columns=["rid"]).column(0).to_pylist():
                where[rid] = (f"p{p}", r)
    return str(root), where


# --- literals of each column, as Python values (DNF) and as typed Arrow scalars (expressions) --


def _lit(rng, column, typed=False):
    r = rng.random()
    if column in ("i", ODD):
        v = rng.randint(-45, 180)
        if r < 0.2:
            return v + 0.5 if not typed else pa.scalar(v + 0.5, pa.float32())
        if typed and r < 0.5:
            return pa.scalar(v, pa.int16())
        return v
    if column == "f":
        v = rng.randint(-40, 140) / 4
        if r < 0.1:
            return rng.choice([float("nan"), float("inf"), float("-inf")])
        if r < 0.2:
            return v + 0.1
        if r < 0.3:
            return int(v)
        return pa.scalar(v, pa.float32()) if typed and r < 0.6 else v
    if column == "s":
        v = rng.choice(STRS + ["aa", "d", "b'"])
        return pa.scalar(v, pa.large_string()) if typed and r < 0.3 else v
    if column == "bin":
        v = rng.choice(BINS + [b"\x00\x00", b"b"])
        return pa.scalar(v, pa.large_binary()) if typed and r < 0.3 else v
    if column == "ts":
        v = T0 + dt.timedelta(hours=rng.randint(-2, 20), minutes=rng.randint(0, 59), microseconds=rng.randint(0, 10**6))
        if r < 0.15:
            return v.date()
        if r < 0.3:  # a nanosecond instant, between two microsecond ticks
            ns = np.datetime64(v, "ns") + np.timedelta64(rng.randint(1, 999), "ns")
            return pa.scalar(int(ns.astype(np.int64)), pa.timestamp("ns")) if typed else ns
        return _cast(v, pa.timestamp(rng.choice(["s", "ms", "us"]))) if typed and r < 0.6 else v
    if column == "tz":
        v = dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(hours=rng.randint(-2, 20), minutes=rng.randint(0, 59),
                                                                milliseconds=rng.randint(0, 2000))
        return _cast(v, pa.timestamp(rng.choice(["s", "ms", "ns"]), tz="UTC")) if typed and r < 0.5 else v
    if column == "d":
        v = dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(-2, 12))
        if r < 0.2:
            return dt.datetime.combine(v, dt.time(12))
        return pa.scalar(v, pa.date32()) if typed and r < 0.4 else v
    if column == "b":
        return rng.random() < 0.5
    if column == "dec":
        v = decimal.Decimal(rng.randint(-500, 1900)).scaleb(-2)
        return v + decimal.Decimal("0.005") if r < 0.2 else v
    raise AssertionError(column)


def _cast(v, t):
    return pa.scalar(v).cast(t, safe=False)  # to a coarser unit: truncated


COLUMNS = ["i", "f", "s", "bin", "ts", "tz", "d", "b", "dec", ODD]


def _values(rng, column):
    vals = [_lit(rng, column) for _ in range(rng.randint(0, 4))]
    if column == "i" and vals and rng.random() < 0.3:
        vals = [float(v) if not isinstance(v, float) else v for v in vals]  # doubles on an int column
    if column == "f" and rng.random() < 0.4:
        vals.append(float("nan"))  # pyarrow's isin matches NaN (== does not)
    if rng.random() < 0.25:
        vals.append(None)
    if column == "s" and not any(vals):  # pyarrow: a string column refuses a null-typed value set
        vals.append(rng.choice(STRS))
    rng.shuffle(vals)
    if column == "dec":  # pyarrow's is_in casts the set to the column's type: a third decimal is an error
        vals = [v for v in vals if v is None or v.as_tuple().exponent >= -2]
    if column == "d":  # pyarrow's is_in truncates a datetime to a date32 column's day (== does not)
        vals = [v for v in vals if not isinstance(v, dt.datetime)]
    if column == "ts":  # one temporal type per value set: pa.array cannot mix date and datetime
        want = type(vals[0]) if vals and vals[0] is not None else None
        vals = [v for v in vals if v is None or type(v) is want]
    return vals if rng.random() < 0.8 else set(v for v in vals if v is None or not isinstance(v, float) or v == v)


def _term(rng):
    column = rng.choice(COLUMNS)
    r = rng.random()
    if r < 0.3:
        return (column, "in" if r < 0.18 else "not in", _values(rng, column))
    ops = ["=", "==", "!="] if column == "b" else ["=", "==", "!=", "<", "<=", ">", ">="]
    return (column, rng.choice(ops), _lit(rng, column))


def _dnf(rng):
    if rng.random() < 0.4:
        return [_term(rng) for _ in range(rng.randint(1, 3))]
    return [[_term(rng) for _ in range(rng.randint(1, 3))] for _ in range(rng.randint(1, 3))]


def _leaf(rng):
    column = rng.choice(COLUMNS)
    field = pc.field(column)
    r = rng.random()
    if r < 0.05:
        return pc.scalar(rng.random() < 0.5)
    if r < 0.12:
        return pc.field("b")
    if r < 0.2:
        return field.is_null() if r < 0.16 else field.is_valid()
    if r < 0.38:
        vals = _values(rng, column)
        return pc.is_in(field, value_set=pa.array(list(vals)), skip_nulls=rng.random() < 0.3)
    v = _lit(rng, column, typed=True)
    fn = rng.choice([pc.equal, pc.not_equal] if column == "b" else
                    [pc.equal, pc.not_equal, pc.less, pc.less_equal, pc.greater, pc.greater_equal])
    return fn(field, pc.scalar(v)) if rng.random() < 0.8 else fn(pc.scalar(v), field)


def _expression(rng, depth=3):
    r = rng.random()
    if depth == 0 or r < 0.35:
        return _leaf(rng)
    if r < 0.5:
        return ~_expression(rng, depth - 1)
    kids = [_expression(rng, depth - 1) for _ in range(rng.randint(2, 3))]
    out = kids[0]
    for k in kids[1:]:
        out = (out & k) if r < 0.75 else (out | k)
    return out


# --- against pyarrow.dataset ----------------------------------------------------------------


def _check(table, dataset, where, flt, arrow_filter):
    want = sorted(dataset.to_table(filter=arrow_filter, columns=["rid"]).column(0).to_pylist())
    got = table.scan(flt).to_table()
    assert got.column_names == dataset.schema.names
    assert sorted(got.column("rid").to_pylist()) == want, f"{flt!r}: {got.num_rows} rows, pyarrow {len(want)}"
    classes = table.classify_masks(flt)
    for rid in want:
        part, rg = where[rid]
        assert classes[part][0][rg], f"{flt!r}: pruned {part} row group {rg} holding rid {rid}"
    wanted = set(want)
    for rid, (part, rg) in where.items():
        if classes[part][1][rg]:
            assert rid in wanted, f"{flt!r}: {part} row group {rg} classified full, rid {rid} does not match"
    return len(want), sum(int((~m).sum()) for m, _ in classes.values())


def _run(table_dir, filters, to_arrow):
    root, where = table_dir
    dataset = ds.dataset(root)
    total = len(where)
    matched = empty = every = pruning = 0
    with qdbpm.open_table(root) as table:
        for flt in filters:
            n, p = _check(table, dataset, where, flt, to_arrow(flt))
            matched += 0 < n < total
            empty += n == 0
            every += n == total
            pruning += p > 0
    # Not vacuous: filters select some rows, none and all, and pruning prunes.
    assert matched > len(filters) // 3 and empty > 10 and every > 3, (matched, empty, every)
    assert pruning > len(filters) // 2, pruning


def test_dnf_lists_match_pyarrow_dataset(table_dir):
    rng = random.Random("qdbpm-dnf")
    fixed = [[("i", ">", 1)], [("f", "in", [float("nan")])], [("f", "not in", [float("nan"), None])],
             [("s", "in", ["a'b", 'q"x', None])], [("i", "in", [])], [("i", "not in", [])],
             [[("b", "==", True)], [("b", "in", [None])]], [(ODD, ">=", 7), ("tz", "<", T0.replace(tzinfo=UTC))],
             [("bin", "<", b"a")], [("dec", "<=", decimal.Decimal("3.005"))], [("ts", ">", dt.date(2024, 1, 1))]]
    filters = fixed + [_dnf(rng) for _ in range(N_DNF - len(fixed))]
    _run(table_dir, filters, pq.filters_to_expression)


def test_arrow_expressions_match_pyarrow_dataset(table_dir):
    rng = random.Random("qdbpm-arrow-expr")
    fixed = [pc.field("b"), ~pc.field("b"), pc.scalar(True), pc.field("f").isin([float("nan"), 1.5]),
             ~pc.field("i").isin([1, None]), pc.is_in(pc.field("i"), value_set=pa.array([1, None]), skip_nulls=True),
             pc.field("f") == pa.scalar(0.25, pa.float32()), pc.field(ODD) < 9, pc.scalar(5) > pc.field("i"),
             pc.field("ts") > pa.scalar(1704067200000000001, pa.timestamp("ns")), pc.field("f").is_null()]
    filters = fixed + [_expression(rng) for _ in range(N_EXPR - len(fixed))]
    _run(table_dir, filters, lambda e: e)


def test_read_table_and_prune_take_both_forms(table_dir):
    root, _ = table_dir
    dnf = [[("s", "in", ["a", "b"]), ("i", ">", 30)], [("f", "<", -5)]]
    expr = (pc.field("s").isin(["a", "b"]) & (pc.field("i") > 30)) | (pc.field("f") < -5)
    sql = "(s IN ('a', 'b') AND i > 30) OR f < -5"
    want = sorted(qdbpm.read_table(root, where=sql).column("rid").to_pylist())
    assert want
    for flt in (dnf, expr):
        assert sorted(qdbpm.read_table(root, where=flt).column("rid").to_pylist()) == want
    with qdbpm.open_table(root) as table:
        kept = table.prune(sql).to_pylist()
        assert table.prune(dnf).to_pylist() == kept == table.prune(expr).to_pylist()
        part = table.partitions[0]
        with qdbpm.open(table.pm_path(part)) as pm:
            assert pm.prune(dnf).tolist() == pm.prune(sql).tolist() == pm.prune(expr).tolist()


# --- what the readers build -----------------------------------------------------------------


def test_from_filters_builds_the_expected_trees():
    assert from_filters([("x", ">", 1)]) == Cmp("x", ">", 1)
    assert from_filters([("x", "=", 1), ("y", "!=", "a")]) == And((Cmp("x", "==", 1), Cmp("y", "!=", "a")))
    assert from_filters([[("x", "==", 1)], [("y", "in", (1, None))]]) == Or((Cmp("x", "==", 1), In("y", (1, None))))
    assert from_filters([["x", "not in", {3, 1, 2}]]) == Not(In("x", (1, 2, 3)))
    assert from_filters([("x", "in", [])]) == In("x", ())
    nan = from_filters([("f", "in", [1.5, float("nan")])])
    assert nan == Or((In("f", (1.5,)), And((Not(Cmp("f", ">=", float("-inf"))), IsNotNull("f")))))
    assert from_filters([("Ab", ">", 1)]).exact  # pyarrow matches names exactly
    dnf = from_filters([[("x", "<", 2)], [("y", ">", 3)]])
    assert pickle.loads(pickle.dumps(dnf)) == dnf == (col("x") < 2) | (col("y") > 3)  # travels to Spark


def test_from_arrow_keeps_exact_literals():
    f = pc.field
    cases = [
        (f("x") == pa.scalar(0.1, pa.float32()), Cmp("x", "==", float(np.float32(0.1)))),  # prints "0.1"
        (f("x") == 0.1, Cmp("x", "==", 0.1)),
        (f("x") == decimal.Decimal("0.10"), Cmp("x", "==", decimal.Decimal("0.10"))),  # prints like a double
        (f("x") == b"ab", Cmp("x", "==", b"ab")),  # prints "6162", like a string
        (f("x") == "6162", Cmp("x", "==", "6162")),
        (f("x") == pa.scalar("y", pa.string_view()), Cmp("x", "==", "y")),  # prints like the field y
        (f("x") == 2**63 - 1, Cmp("x", "==", 2**63 - 1)),
        (f("x") == pa.scalar(2**64 - 1, pa.uint64()), Cmp("x", "==", 2**64 - 1)),
        (f("x") == dt.date(2024, 1, 2), Cmp("x", "==", dt.date(2024, 1, 2))),
        (f("t") < pa.scalar(1704067200000000001, pa.timestamp("ns")),
         Cmp("t", "<", np.datetime64(1704067200000000001, "ns"))),
        (f("t") < pa.scalar(5, pa.timestamp("s", tz="America/New_York")), Cmp("t", "<", np.datetime64(5, "s"))),
        (f("t") >= dt.datetime(2024, 1, 2, 3, 4, 5, 6), Cmp("t", ">=", np.datetime64("2024-01-02T03:04:05.000006"))),
        (f("s") == 'it\'s "q" \\ }', Cmp("s", "==", 'it\'s "q" \\ }')),
        (f('x) > (1') > 1, Cmp('x) > (1', ">", 1)),  # prints unescaped
        (f("a", "b") <= 3, Cmp("a.b", "<=", 3)),
        (pc.scalar(3) < f("x"), Cmp("x", ">", 3)),
        (f("x").isin(['a"}', None]), In("x", ('a"}', None))),
        (pc.is_in(f("x"), value_set=pa.array([1, None]), skip_nulls=True), In("x", (1,))),
        (f("x").isin(pa.array([1.5], pa.float32())), In("x", (1.5,))),
        (f("x").is_null(), IsNull("x")),
        (f("x").is_valid(), IsNotNull("x")),
        (~f("flag"), Not(Cmp("flag", "==", True))),
        ((f("a") > 1) & (f("b") > 2) & ((f("c") > 3) | pc.scalar(False)),
         And((Cmp("a", ">", 1), Cmp("b", ">", 2), Or((Cmp("c", ">", 3), Literal(False)))))),
    ]
    for e, want in cases:
        got = from_arrow(e)
        assert got == want, (str(e), got)
        if isinstance(want, Cmp):
            assert type(got.value) is type(want.value), (str(e), got.value)  # noqa: E721
            if isinstance(want.value, np.datetime64):
                assert np.datetime_data(got.value.dtype) == np.datetime_data(want.value.dtype)


def test_as_predicate_is_the_one_entry_point():
    e = col("x") > 1
    assert as_predicate(None) is None
    assert as_predicate(e) is e
    assert as_predicate("x > 1") == parse("x > 1")
    assert as_predicate([("x", ">", 1)]) == e
    assert as_predicate(pc.field("x") > 1) == e


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bad, why", [
    (("x", ">", 1), "must be wrapped in a list"),
    ([], "empty"),
    ([[]], "filters[0] is an empty list"),
    ([[("x", ">", 1)], []], "filters[1] is an empty list"),
    ([("x", ">")], "filters[0] is not a (column, op, value) predicate"),
    ([("x", ">", 1, 2)], "filters[0] is not a (column, op, value) predicate"),
    ([("x", "IN", [1])], "unknown operator 'IN'"),
    ([("x", "like", "a%")], "unknown operator 'like'"),
    ([(1, "=", 2)], "the column must be a name"),
    ([("x", "in", "ab")], "takes a list, tuple or set"),
    ([("x", "not in", 3)], "takes a list, tuple or set"),
    ([("x", "=", None)], "('x', 'in', [None]) matches nulls"),
    ([("x", "<", [1])], "compares with one value"),
    ([[("x", "=", 1)], ("y", "=", 2)], "filters[1] must be one too"),
    ([("x", "=", 1), [("y", "=", 2)]], "filters[1] is not a (column, op, value) predicate"),
    ([[[("x", "=", 1)]]], "filters[0][0] is not a (column, op, value) predicate"),
    ({"x": 1}, "not dict"),
    (["x > 1"], "filters[0] is neither a (column, op, value) predicate nor a list of them"),
])
def test_malformed_dnf_is_a_predicate_error(bad, why):
    with pytest.raises(PredicateError) as e:
        as_predicate(bad)
    assert why in str(e.value)


@pytest.mark.parametrize("bad, why", [
    (lambda: pc.field("x") == pc.field("y"), "must compare a field with a literal, not field x with field y"),
    (lambda: pc.field("x").cast(pa.int8()) > 1, "not cast(...) with literal 1"),
    (lambda: pc.and_(pc.field("a"), pc.field("b")), "and_(field a, field b) is not supported"),
    (lambda: pc.add(pc.field("a"), 1) > 2, "add(...)"),
    (lambda: pc.field("x") == None, "x == null is never true"),  # noqa: E711
    (lambda: pc.field(0) > 1, "name columns"),
    (lambda: pc.scalar(1), "the literal 1 is not a condition"),
    (lambda: pc.field("x").is_null(nan_is_null=True), "nan_is_null=True"),
    (lambda: pc.field("x") == pa.scalar(1, pa.duration("s")), "type duration[s]"),
    (lambda: pc.field("x") == pa.scalar(dt.time(1), pa.time64("us")), "type time64[us]"),
    (lambda: pc.field("a.b", "c") > 1, "has a name with '.'"),
    (lambda: pc.field("x").isin(pa.array([[1]])), "type list<item: int64>"),
])
def test_unsupported_expression_is_a_predicate_error(bad, why):
    e = bad()
    with pytest.raises(PredicateError) as err:
        from_arrow(e)
    assert why in str(err.value) and "pyarrow expression" in str(err.value)


def test_other_types_are_refused():
    for bad in (5, 1.5, b"x > 1", {"x"}):
        with pytest.raises(PredicateError, match="a predicate is SQL text"):
            as_predicate(bad)
    with pytest.raises(PredicateError, match="expected a pyarrow.compute.Expression"):
        from_arrow("x > 1")


# --- the command line -----------------------------------------------------------------------


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "qdbpm.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_cli_where_takes_a_json_dnf_list(table_dir):
    root, _ = table_dir
    p = _cli("prune", root, "--where", '[["i", ">", 1]]', "--json")
    assert p.returncode == 0, p.stderr
    with qdbpm.open_table(root) as table:
        want = table.prune("i > 1").to_pylist()
    assert json.loads(p.stdout)["kept"] == want and 0 < len(want)
    dnf = '[[["s", "in", ["a", null]]], [["f", ">", 5.5], ["b", "==", true]]]'
    p = _cli("scan", root, "--where", dnf, "--count", "--json")
    assert p.returncode == 0, p.stderr
    want = ds.dataset(root).count_rows(filter=pq.filters_to_expression(json.loads(dnf)))
    assert json.loads(p.stdout)["count"] == want > 0
    p = _cli("prune", root, "--where", '[["i", ">", 1]')
    assert p.returncode == 1 and p.stderr.startswith("qdbpm: error:") and "not JSON" in p.stderr
    p = _cli("prune", root, "--where", '[["i", "~", 1]]')
    assert p.returncode == 1 and "unknown operator '~'" in p.stderr and "Traceback" not in p.stderr


def test_sql_text_is_parsed_once_into_one_immutable_tree():
    """as_predicate keeps the trees of the last texts (a one-shot reader asks the same query
    again): the same text gives the very tree parse gives, and a text that does not parse
    raises every time."""
    import dataclasses

    from qdbpm.errors import PredicateError
    from qdbpm.prune.filters import as_predicate
    from qdbpm.prune.sql import parse

    text = "a BETWEEN 0.05 AND 0.07 AND q < 24 AND s IN ('x', 'y')"
    first = as_predicate(text)
    assert as_predicate(text) is first and first == parse(text)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.children = ()
    for _ in range(2):
        with pytest.raises(PredicateError):
            as_predicate("a BETWEEN AND")
