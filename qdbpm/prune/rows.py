"""A filter pass over decoded columns (qdbpm.table.direct): the rows a `prune.arrow.to_arrow`
expression keeps, and DECIMAL columns held as their unscaled int64 values for it.

Comparing int64s costs a tenth of comparing decimal128s. A held column's field says so in its
metadata (`unscaled_field`); `to_arrow` then compares it with the literal rewritten to an integer by
the same rule as a decimal column's (`prune.literals.int_bound`). Only the columns `unscaled_ok`
names may be held: a residual's SQL values and arithmetic need the real type.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import expr as E
from .names import Names
from ..errors import EvaluationError, PredicateError

UNSCALED_KEY = b"qdbpm.unscaled_decimal"


@lru_cache(maxsize=256)  # asked per unit of a scan: a filter pass's fields, built once
def unscaled_field(name, t) -> pa.Field:
    """An int64 field holding DECIMAL type t's unscaled values (value x 10^scale)."""
    return pa.field(name, pa.int64(), metadata={UNSCALED_KEY: f"{t.precision},{t.scale}".encode()})


def unscaled_type(name, schema, exact=True):
    """The DECIMAL type a column held unscaled stands for, or None."""
    i = Names(schema.names).find(name, exact)
    md = schema.field(i).metadata if i is not None else None
    if not md or UNSCALED_KEY not in md:
        return None
    precision, scale = (int(x) for x in md[UNSCALED_KEY].split(b","))
    return pa.decimal128(precision, scale)


def unscaled_ok(e, schema) -> frozenset:
    """Names (in `schema`) of columns that `e` reads only in leaf comparisons with literals (Cmp,
    Between, In, IS [NOT] NULL): the ones a filter pass may hold unscaled. Asked per unit of a
    scan, with the same residual (equal, per partition) and names: answered once (a residual
    with an unhashable literal, each time)."""
    names = tuple(schema.names)
    try:
        return _unscaled_ok(e, names)
    except TypeError:
        return _unscaled_ok.__wrapped__(e, names)


@lru_cache(maxsize=32)  # a few queries' residuals (IN lists included) kept, no more
def _unscaled_ok(e, schema_names) -> frozenset:
    leaves, other = set(), set()
    names = Names(schema_names)
    for x in E.atoms(e):
        if isinstance(x, (E.Cmp, E.Between, E.In, E.IsNull, E.IsNotNull)):
            i = names.find(x.column, x.exact)
            if i is not None:
                leaves.add(schema_names[i])
        else:  # a residual (or any other node): its columns keep their real types
            for name in x.columns():
                i = names.find(name, False)
                other.add(schema_names[i] if i is not None else name)
                other.add(name)
    return frozenset(leaves - other)


class Evaluating:
    """`with Evaluating(where):` around the exact filter's evaluation over values: an ArrowInvalid
    there is a value the predicate cannot compute (an integer overflow, a value outside a CAST's
    type, where DuckDB raises too), raised as an EvaluationError naming `where` (a partition).
    Other Arrow errors are not the data's: they pass as they are."""

    __slots__ = ("where",)

    def __init__(self, where):
        self.where = where

    def __enter__(self):
        return self

    def __exit__(self, kind, e, tb):
        if kind is not None and issubclass(kind, pa.ArrowInvalid):
            raise EvaluationError(f"{self.where}: the filter cannot be computed over its values: {e}") from None
        return False


def matching_rows(table: pa.Table, expr: pc.Expression, where="the rows") -> np.ndarray:
    """Row numbers (int64, ascending) of `table` where `expr` (a to_arrow expression) is TRUE: the
    rows `table.filter(expr)` keeps, found by one projection in this thread, without the filtered
    copy of every column the filter makes (a late reader takes the other columns' rows itself).
    A value the filter cannot compute is an EvaluationError naming `where`."""
    with Evaluating(where):
        m = _project(table, [expr]).column(0)
    if len(m) != table.num_rows or not pa.types.is_boolean(m.type):
        raise PredicateError(f"the filter gave {len(m)} values of {m.type} for {table.num_rows} rows")
    return true_rows(m)


def by_column(e, names) -> dict | None:
    """`e`'s top-level conjuncts grouped by the one column of `names` each reads ({name: the AND
    of its conjuncts}), or None when a conjunct reads no column, several, or one not in `names`
    (a partition key): then only the whole filter decides a row. Each group may then be decided
    once per distinct value of its column (a dictionary's entries), as AND keeps exactly the rows
    every group keeps."""
    names = names if isinstance(names, Names) else Names(names)
    groups = {}
    for k in (e.children if isinstance(e, E.And) else (e,)):
        try:
            cols = k.resolve(names).columns()
        except PredicateError:
            return None
        if len(cols) != 1 or next(iter(cols)) not in names.names:
            return None
        groups.setdefault(next(iter(cols)), []).append(k)
    return {c: ks[0] if len(ks) == 1 else E.And(tuple(ks)) for c, ks in groups.items()}


def without_proven(residual, proven):
    """`residual` without its conjuncts proven TRUE on every row group a share reads (`proven`:
    [(conjunct, held)], held True for those): an AND with a conjunct TRUE on every row of a row
    group keeps exactly the rows the other conjuncts keep, so that row group's exact filter needs
    only those (and never decodes a column only the proven ones read)."""
    if not proven:
        return residual
    keep = [k for k, held in proven if not held]
    if len(keep) == len(proven) or not keep:  # none proven, or all (full: never filtered)
        return residual
    return keep[0] if len(keep) == 1 else E.And(tuple(keep))


def truths(table: pa.Table, exprs) -> list:
    """Per expression of `exprs` (to_arrow expressions over `table`), a bool numpy array: where it
    is TRUE (null: not), all from one projection in this thread."""
    out = _project(table, exprs)
    res = []
    for i in range(len(exprs)):
        m = out.column(i)
        if len(m) != table.num_rows or not pa.types.is_boolean(m.type):
            raise PredicateError(f"the filter gave {len(m)} values of {m.type} for {table.num_rows} rows")
        res.append(true_mask(m))
    return res


def _project(table, exprs) -> pa.Table:
    """`exprs` evaluated over `table` by one Acero projection in this thread: a column each. The
    plan's classes come from pyarrow's compiled `_acero`, which `pyarrow.acero` re-exports: that
    module imports pyarrow.dataset, whose import loads pandas wherever it is installed (~0.27 s
    on a process's first filtered read). A pyarrow without that module gets the public one."""
    try:
        from pyarrow._acero import Declaration, ProjectNodeOptions, TableSourceNodeOptions
    except ImportError:
        from pyarrow.acero import Declaration, ProjectNodeOptions, TableSourceNodeOptions

    names = [f"m{i}" for i in range(len(exprs))]
    return Declaration.from_sequence([Declaration("table_source", TableSourceNodeOptions(table)),
                                      Declaration("project", ProjectNodeOptions(list(exprs), names))]
                                     ).to_table(use_threads=False)


def true_rows(m) -> np.ndarray:
    """Row numbers (int64, ascending) where boolean (chunked) array `m` is TRUE (null: not)."""
    return np.flatnonzero(true_mask(m)).astype(np.int64, copy=False)  # numpy's fast path is bool's


def true_mask(m) -> np.ndarray:
    """A bool per row of boolean (chunked) array `m`: TRUE (null: not), read from its bitmaps: no
    filled copy, no byte-per-row conversion through pandas' machinery."""
    out = []
    for c in (m.chunks if isinstance(m, pa.ChunkedArray) else [m]):
        n = len(c)
        if n and c.null_count == n:
            out.append(np.zeros(n, bool))
        elif n:
            valid, data = c.buffers()[:2]
            keep = _bits(data, c.offset, n)
            if c.null_count:
                keep &= _bits(valid, c.offset, n)
            out.append(keep.view(bool))
    if len(out) == 1:
        return out[0]
    return np.concatenate(out) if out else np.zeros(0, bool)


def _bits(buf, offset, n) -> np.ndarray:
    """Bits [offset, offset + n) of an Arrow bitmap as one uint8 (0 / 1) per bit."""
    return np.unpackbits(np.frombuffer(buf, np.uint8), count=offset + n, bitorder="little")[offset:]
