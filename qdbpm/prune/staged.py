"""A residual evaluated over rows in stages: the conjuncts that no value can make fail first, then
each that may fail (an integer overflow, a value outside a CAST's type) over the rows kept so far.

DuckDB evaluates a conjunction conjunct by conjunct, each over the rows the earlier ones kept, so
`b / 4 = 19.1 AND CAST(a AS TINYINT) > 5` answers when no row with `b / 4 = 19.1` holds an `a`
past 127, and raises when one does; Arrow computes every conjunct over every row. Here a conjunct
that fails is tried again once the other conjuncts have narrowed the rows, and the evaluation
raises (EvaluationError) only when no conjunct left can go on: there is then a row on which every
other conjunct is TRUE and this one fails, which DuckDB meets in whatever order it evaluates them.
So qdbpm raises only where DuckDB raises whatever its order, and answers wherever it answers (a
narrower set of rows never makes a conjunct fail that did not before). Inside one conjunct (an OR,
a CASE) every part is computed for every row it sees: there qdbpm may raise where DuckDB's own
short cuts spare it. Found by scripts/fuzz_reads.py.
"""

from __future__ import annotations

from dataclasses import fields

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
    sure, risky = stages(e)
    if not risky or sure is None and len(risky) == 1:
        return matching_rows(table, compile(e, table.schema), where)
    rows = np.arange(table.num_rows) if sure is None else matching_rows(table, compile(sure, table.schema), where)
    todo, sub = list(risky), table if len(rows) == table.num_rows else table.take(pa.array(rows))
    while todo and len(rows):
        left, failed = [], None
        for k in todo:
            if sub.num_rows != len(rows):  # rows only narrow: the same count is the same rows
                sub = table.take(pa.array(rows))
            try:
                rows = rows[matching_rows(sub, compile(k, sub.schema), where)]
            except EvaluationError as x:  # tried again over the rows the others keep
                left.append(k)
                failed = x
            if not len(rows):
                return rows
        if len(left) == len(todo):
            raise failed
        todo = left
    return rows


def filtered(table: pa.Table, e, compile, where) -> pa.Table:
    """`table`'s rows where predicate `e` is TRUE (None: all), in stages (above)."""
    if e is None:
        return table
    sure, risky = stages(e)
    if not risky or sure is None and len(risky) == 1:
        with Evaluating(where):
            return table.filter(compile(e, table.schema))
    return table.take(pa.array(matching(table, e, compile, where), pa.int64()))
