"""Predicate trees: building, parsing, pickling, negation normal form."""

import datetime as dt
import pickle

import pytest

from qdbpm import col, parse
from qdbpm import expr as E
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
