"""Predicate trees: building, parsing, pickling, negation normal form."""

import datetime as dt
import pickle

import pytest

from qdbpm import col, parse
from qdbpm.prune import expr as E
from qdbpm.errors import PmError, PredicateError


def test_builders_make_immutable_nodes():
    e = (col("a") > 5) & (col("b").isin(["x", "y"]) | ~col("c").is_null())
    assert e == E.And((E.Cmp("a", ">", 5), E.Or((E.In("b", ("x", "y")), E.Not(E.IsNull("c"))))))
    with pytest.raises(Exception):
        e.children = ()
    assert e.columns() == {"a", "b", "c"}


def test_pickle_round_trip():
    e = (col("ts").between(dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2))) & ~(col("s") == "a")
    assert pickle.loads(pickle.dumps(e)) == e


def test_predicate_has_no_truth_value():
    with pytest.raises(TypeError):
        bool(col("a") > 1)
    with pytest.raises(TypeError):
        col("a") > 1 and col("b") < 2  # noqa: B015 - the point is that `and` is refused


def test_none_literals_refused():
    with pytest.raises(PredicateError, match="is_null"):
        col("a") == None  # noqa: E711
    with pytest.raises(PredicateError):
        col("a").between(None, 3)


@pytest.mark.parametrize("text,want", [
    ("a = 1", E.Cmp("a", "==", 1)),
    ("a <> 'x''y'", E.Cmp("a", "!=", "x'y")),
    ("a >= -1.5e3", E.Cmp("a", ">=", -1500.0)),
    ('"my col" < 3', E.Cmp("my col", "<", 3)),
    ("a BETWEEN 1 AND 2", E.Between("a", 1, 2)),
    ("a NOT BETWEEN 1 AND 2", E.Not(E.Between("a", 1, 2))),
    ("a IN (1, 2, NULL)", E.In("a", (1, 2, None))),
    ("a not in ('x')", E.Not(E.In("a", ("x",)))),
    ("a IS NULL", E.IsNull("a")),
    ("a is not null", E.IsNotNull("a")),
    ("NOT a = 1", E.Not(E.Cmp("a", "==", 1))),
    ("a = 1 OR b = 2 AND c = 3", E.Or((E.Cmp("a", "==", 1), E.And((E.Cmp("b", "==", 2), E.Cmp("c", "==", 3)))))),
    ("(a = 1 OR b = 2) AND c = 3", E.And((E.Or((E.Cmp("a", "==", 1), E.Cmp("b", "==", 2))), E.Cmp("c", "==", 3)))),
    ("ts >= TIMESTAMP '2024-01-02T00:00:00Z'", E.Cmp("ts", ">=", dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc))),
    ("d < DATE '2024-01-02'", E.Cmp("d", "<", dt.date(2024, 1, 2))),
    ("f = NaN", E.Cmp("f", "==", float("nan"))),
    ("b = TRUE", E.Cmp("b", "==", True)),
])
def test_parse(text, want):
    got = parse(text)
    if text == "f = NaN":
        assert got.column == "f" and got.value != got.value
    else:
        assert got == want


def test_parse_api_example():
    e = parse("ts >= '2024-01-02T00:00:00' AND sym IN ('a', 'b') AND px IS NOT NULL")
    assert e == E.And((E.Cmp("ts", ">=", "2024-01-02T00:00:00"), E.In("sym", ("a", "b")), E.IsNotNull("px")))


@pytest.mark.parametrize("bad", ["", "a =", "a = = 1", "= 1", "a IN 1", "a BETWEEN 1", "a = 1 b = 2", "a NOT = 1",
                                 "(a = 1", "a = 'unterminated", "a ~ 1", "DATE 'x' = 1"])
def test_parse_errors_are_clear(bad):
    with pytest.raises(PredicateError) as info:
        parse(bad)
    assert isinstance(info.value, PmError)


def test_nnf_pushes_not_to_leaves():
    e = ~((col("a") < 1) | ~(col("b").isin([1])) | col("c").is_null() | col("d").between(1, 2))
    n = E.nnf(e)
    assert n == E.And((E.NotCmp("a", "<", 1), E.In("b", (1,)), E.IsNotNull("c"), E.NotBetween("d", 1, 2)))
    assert E.nnf(~~(col("a") == 1)) == E.Cmp("a", "==", 1)


# --- bare BOOLEAN columns, IS TRUE / FALSE, SQL identifiers ---------------------------------


@pytest.mark.parametrize("text,want", [
    ("flag", E.Cmp("flag", "==", True)),
    ("NOT flag", E.Not(E.Cmp("flag", "==", True))),
    ("(x > 1 OR px < 20) AND NOT side", E.And((E.Or((E.Cmp("x", ">", 1), E.Cmp("px", "<", 20))),
                                                E.Not(E.Cmp("side", "==", True))))),
    ("a AND (b OR NOT c)", E.And((E.Cmp("a", "==", True), E.Or((E.Cmp("b", "==", True),
                                                                E.Not(E.Cmp("c", "==", True))))))),
    ("f IS TRUE", E.In("f", (True,))),
    ("f IS NOT TRUE", E.Not(E.In("f", (True,)))),
    ("f is false", E.In("f", (False,))),
    ("f IS NOT FALSE", E.Not(E.In("f", (False,)))),
])
def test_parse_boolean_forms(text, want):
    assert parse(text) == want


def test_unquoted_names_are_inexact_quoted_and_col_names_exact():
    e = parse('Ab = 1 AND "Cd" = 2 AND ef IS NULL AND gh IN (1) AND ij BETWEEN 1 AND 2 AND kl IS NOT NULL')
    assert [k.exact for k in e.children] == [False, True, False, False, False, False]
    assert parse("flag").exact is False and parse('"flag"').exact is True and parse("f IS TRUE").exact is False
    assert (col("Ab") == 1).exact is True and col("Ab").isin([1]).exact and col("Ab").is_null().exact
    # equality ignores exactness (the name as written is the same), pickling and nnf keep it
    assert parse("Ab = 1") == (col("Ab") == 1)
    assert pickle.loads(pickle.dumps(parse("NOT Ab = 1"))).child.exact is False
    n = E.nnf(parse("NOT (a = 1 OR b BETWEEN 1 AND 2 OR c IN (1) OR d IS NULL)"))
    assert [k.exact for k in n.children] == [False] * 4
    assert E.nnf(E.Not(n)).children[0] == E.Cmp("a", "==", 1) and not E.nnf(E.Not(n)).children[0].exact


@pytest.mark.parametrize("bad", ["flag flag2", "flag IS 1", "flag IS NOT", "NOT", "flag AND", "flag = TRUE TRUE"])
def test_parse_errors_around_bare_columns(bad):
    with pytest.raises(PredicateError):
        parse(bad)


def test_names_rule():
    names = E.Names(["l_orderkey", "ab", "AB", "Cd", "Cd"])
    assert names.index("L_ORDERKEY", exact=False) == 0
    assert names.index("ab", exact=False) == 1 and names.index("AB", exact=False) == 2  # exact case wins
    assert names.index("cD", exact=False) == 3  # a duplicated name is one column: the first
    with pytest.raises(PredicateError, match='ambiguous: it matches "AB", "ab"'):
        names.index("aB", exact=False)
    with pytest.raises(PredicateError, match="no column 'L_ORDERKEY'.*did you mean 'l_orderkey'"):
        names.index("L_ORDERKEY")
    with pytest.raises(PredicateError, match="no column 'zz'"):
        names.index("zz", exact=False)
    assert names.find("zz", exact=False) is None and names.find("aB") is None


def test_resolve_gives_the_schemas_exact_names():
    e = parse('l_ORDERKEY > 1 AND NOT flag AND "Cd" IS NULL') | (col("Cd") == 1)
    r = e.resolve(["L_OrderKey", "Flag", "Cd", "cd"])
    assert r.columns() == {"L_OrderKey", "Flag", "Cd"}
    assert r.children[0].children[1].child == E.Cmp("Flag", "==", True) and r.children[0].children[1].child.exact
    with pytest.raises(PredicateError, match="no column 'Cd'"):
        (col("Cd") == 1).resolve(["cd"])


def test_bind_cache_tells_quoted_from_unquoted():
    """parse("A = 1") == (col("A") == 1), but only the unquoted one finds column "a": the bound
    predicate cached on the schema must not serve one for the other."""
    from qdbpm.pm import layout as L
    from qdbpm.prune.bind import bind
    from qdbpm.prune.stats import KIND_INT, ColumnType, Schema

    sch = Schema([ColumnType("a", 0, L.PT_INT64, L.QDB_LONG, 0, KIND_INT, None, None, True, False),
                  ColumnType("f", 1, L.PT_BOOLEAN, L.QDB_BOOLEAN, 0, KIND_INT, None, None, True, False)])
    assert bind(parse("A = 1"), sch).ct.name == "a"
    with pytest.raises(PredicateError, match="no column 'A'"):
        bind(col("A") == 1, sch)
    assert bind(parse("F"), sch).ct.name == "f"
    with pytest.raises(PredicateError, match="not BOOLEAN"):
        bind(parse("a"), sch)
    with pytest.raises(PredicateError, match="not BOOLEAN"):
        bind(col("a").isin([True]), sch)
