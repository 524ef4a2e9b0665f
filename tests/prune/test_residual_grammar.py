"""Residual predicates (prune.residual): the grammar. What each SQL form parses to, which plain
clauses keep plain nodes and the fast path, what is refused (one PredicateError, before any data
is read), the node protocol (immutable, hashable, picklable, resolvable), and substring's forms,
refusals and slicing, DuckDB's to the character.
"""

import datetime as dt
import pickle

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import col, parse
from qdbpm.errors import PredicateError
from qdbpm.prune import expr as E
from qdbpm.prune import residual as R
from qdbpm.prune.arrow import filter_table

from support.residual_cases import has_residual, write_table


@pytest.fixture(scope="module")
def table_files(tmp_path_factory):
    return write_table(tmp_path_factory.mktemp("residual"))


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
    assert not has_residual(e)
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
