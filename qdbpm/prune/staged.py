"""A residual evaluated over rows in stages: the conjuncts that no value can make fail first, then
each that may fail (an integer overflow, a value outside a CAST's type) over the rows kept so far.

DuckDB evaluates a conjunction conjunct by conjunct, each over the rows the earlier ones kept, so
`b / 4 = 19.1 AND CAST(a AS TINYINT) > 5` answers when no row with `b / 4 = 19.1` holds an `a`
past 127, and raises when one does; Arrow computes every conjunct over every row. Here a conjunct
that fails is tried again once the other conjuncts have narrowed the rows, and the evaluation
raises (EvaluationError) only when no conjunct left can go on: there is then a row on which every
other conjunct is TRUE and this one fails, which DuckDB meets in whatever order it evaluates them.
So qdbpm raises only where DuckDB raises whatever its order, and answers wherever it answers (a
narrower set of rows never makes a conjunct fail that did not before). Found by scripts/fuzz_reads.py.

An OR is evaluated alike, each part over the rows no other part has made TRUE (DuckDB computes
`b = 1 OR CAST(a AS TINYINT) > 0` only over rows where `b = 1` is not TRUE). A CASE computes each
THEN / ELSE value, and each WHEN after the first, over the rows that reach it, as DuckDB does:
`guarded` rewrites every column such a part reads as NULL on the other rows, where Arrow would
compute every branch over every row.
"""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pyarrow as pa

from . import expr as E
from . import residual as R
from .rows import Evaluating, matching_rows
from ..errors import EvaluationError

# CAST targets that never fail on a source the exact filter accepts (residual.CASTS): VARCHAR
# prints any value, BOOLEAN takes a BOOLEAN, DOUBLE rounds any number (an integer past 2^53 too).
SAFE_CASTS = ("VARCHAR", "BOOLEAN", "DOUBLE")
SAFE_FUNCS = ("year", "month", "day", "date_trunc", "lower", "upper", "length", "coalesce") + R.SUBSTRING_NAMES


def fallible(x) -> bool:
    """Whether some value may make `x` (a predicate or value node) fail to compute. Conservative:
    a node the rules below do not clear counts as fallible (it only costs a second stage)."""
    if isinstance(x, R.Cast):
        return x.to not in SAFE_CASTS or fallible(x.arg)  # integers: their range; DECIMAL: its precision
    if isinstance(x, R.Arith):
        return x.op != "/" or fallible(x.left) or fallible(x.right)  # + - * on integers overflow; / is a DOUBLE's
    if isinstance(x, R.Neg):
        return True  # -(-2^63) overflows
    if isinstance(x, R.Func):
        return x.name not in SAFE_FUNCS or any(fallible(a) for a in x.args)  # abs(-2^63) overflows
    if isinstance(x, (R.Ref, R.Const)):
        return False
    if isinstance(x, R.Node):
        return any(fallible(getattr(x, f.name)) for f in fields(x))
    if isinstance(x, (E.And, E.Or)):
        return any(fallible(c) for c in x.children)
    if isinstance(x, E.Not):
        return fallible(x.child)
    if isinstance(x, tuple):
        return any(fallible(y) for y in x)
    return False  # a plain predicate: a column against literals bound to its type


def stages(e) -> tuple:
    """(the conjuncts of `e` (nested ANDs flattened) that cannot fail, as one predicate or None;
    those that may, a tuple). Worked out per call, a walk of the tree: a cache keyed by the tree
    would hand `a = 1.5` (a SQL DECIMAL) the parts of an equal `a = 1.5` built with a float."""
    sure, risky = [], []
    for k in _conjuncts(e):
        (risky if fallible(k) else sure).append(k)
    return (None if not sure else sure[0] if len(sure) == 1 else E.And(tuple(sure))), tuple(risky)


def _conjuncts(e):
    return [k for c in e.children for k in _conjuncts(c)] if isinstance(e, E.And) else [e]


def matching(table: pa.Table, e, compile, where) -> np.ndarray:
    """Row numbers (ascending) of `table` where predicate `e` is TRUE, in stages (above);
    `compile(predicate, schema)`: its Arrow expression. EvaluationError names `where`."""
    if not fallible(e):
        return matching_rows(table, compile(e, table.schema), where)
    return _rows(table, guarded(e), compile, where)


def _rows(table, e, compile, where):
    """matching() of `e`, a CASE's parts already guarded: an AND or OR with a part that may fail
    in stages, anything else computed whole."""
    if isinstance(e, E.And) and fallible(e):
        return _all(table, e, compile, where)
    if isinstance(e, E.Or) and fallible(e):
        return _any(table, _disjuncts(e), compile, where)
    return matching_rows(table, compile(e, table.schema), where)


def _all(table, e, compile, where):
    """Rows where every conjunct of AND `e` is TRUE: the sure ones at once, then each that may
    fail over the rows kept so far (`_in_turn`)."""
    sure, risky = stages(e)
    rows = np.arange(table.num_rows) if sure is None else matching_rows(table, compile(sure, table.schema), where)
    sub = table

    def step(k):
        nonlocal rows, sub
        if sub.num_rows != len(rows):  # rows only narrow: the same count is the same rows
            sub = table.take(pa.array(rows))
        rows = rows[_rows(sub, k, compile, where)]

    _in_turn(list(risky), step, lambda: len(rows))
    return rows


def _any(table, parts, compile, where):
    """Rows where one of `parts` is TRUE: the sure ones at once, then each that may fail over the
    rows no part has made TRUE yet (`_in_turn`)."""
    hit = np.zeros(table.num_rows, bool)
    sure = [k for k in parts if not fallible(k)]
    if sure:
        hit[matching_rows(table, compile(sure[0] if len(sure) == 1 else E.Or(tuple(sure)), table.schema), where)] = True
    rest = np.flatnonzero(~hit)

    def step(k):
        nonlocal rest
        sub = table if len(rest) == table.num_rows else table.take(pa.array(rest))
        hit[rest[_rows(sub, k, compile, where)]] = True
        rest = np.flatnonzero(~hit)

    _in_turn([k for k in parts if fallible(k)], step, lambda: len(rest))
    return np.flatnonzero(hit)


def _in_turn(todo, step, open_rows):
    """step(k) for each part of `todo` while open_rows() (the rows still to decide) is not 0; a
    part that fails (EvaluationError) is tried again after the others, and its error is raised
    once a round of tries decides nothing more."""
    while todo and open_rows():
        left, failed = [], None
        for k in todo:
            try:
                step(k)
            except EvaluationError as x:
                left.append(k)
                failed = x
            if not open_rows():
                return
        if len(left) == len(todo):
            raise failed
        todo = left


def _disjuncts(e):
    return [k for c in e.children for k in _disjuncts(c)] if isinstance(e, E.Or) else [e]


def guarded(x):
    """`x` with each CASE's parts that may fail computed only over the rows that reach them: in a
    THEN / ELSE value, and in a WHEN after the first, every column reads NULL on the rows an
    earlier WHEN takes (and, in a THEN, where its own WHEN is not TRUE). NULL fails nothing
    and the CASE takes that part's value on none of those rows: the same values, where DuckDB
    computes them, and no failure on a row DuckDB never computes the part for."""
    if isinstance(x, R.Case):
        out = []
        for cond, value in x.whens:
            cond, value = guarded(cond), guarded(value)
            if out and fallible(cond):
                cond = _reads(cond, out, None)
            if fallible(value):
                value = _reads(value, out, cond)
            out.append((cond, value))
        default = guarded(x.default)
        return R.Case(tuple(out), _reads(default, out, None) if fallible(default) else default)
    return _map(x, guarded)


def _reads(x, before, cond):
    """`x` with each column read through a CASE: NULL where a WHEN of `before` is TRUE, else the
    column where `cond` is TRUE (None: the column)."""
    if isinstance(x, R.Ref):
        nulls = tuple((c, R.Const(None)) for c, _ in before)
        if cond is None:
            return R.Case(nulls, x)
        return R.Case(nulls + ((cond, x),), R.Const(None))
    return _map(x, lambda y: _reads(y, before, cond))


def _map(x, fn):
    """`x` (a predicate or value node) with fn applied to each of its parts, rebuilt alike."""
    if isinstance(x, R.Node):
        return replace(x, **{f.name: fn(getattr(x, f.name)) for f in fields(x) if f.compare})
    if isinstance(x, (E.And, E.Or)):
        return type(x)(tuple(fn(c) for c in x.children))
    if isinstance(x, E.Not):
        return E.Not(fn(x.child))
    if isinstance(x, tuple):
        return tuple(fn(y) for y in x)
    return x


def filtered(table: pa.Table, e, compile, where) -> pa.Table:
    """`table`'s rows where predicate `e` is TRUE (None: all), in stages (above)."""
    if e is None:
        return table
    if not fallible(e):
        with Evaluating(where):
            return table.filter(compile(e, table.schema))
    return table.take(pa.array(matching(table, e, compile, where), pa.int64()))
