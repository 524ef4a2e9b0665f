"""A predicate over partition keys: which partitions may hold a matching row, decided from the key
values alone, and what is left to evaluate inside each (no I/O).

Every row of a partition has the same key values, so an atom (a comparison, IN, IS NULL, ... any
leaf) over key columns only has one value per partition: TRUE, FALSE or NULL. `split` evaluates
every such atom once over the table of key values (one pyarrow compute pass for all of them),
groups partitions by the pattern of their atoms' values and substitutes each pattern into the
predicate. A partition whose predicate then folds to FALSE holds no matching row; the others keep
the folded predicate (its "residual") for the statistics and the exact row filter.

Substitution keeps TRUE-ness exact, which is all pruning and filtering ask: a TRUE or FALSE atom
becomes that literal; a NULL atom becomes FALSE under an even number of NOTs and TRUE under an
odd number (in Kleene logic `NOT NULL` is NULL, never TRUE, and AND / OR are TRUE exactly when
their TRUE-ness says so). Atoms over other columns are left as they are (unknown here), so the
decision over a partition is "certainly not TRUE" only when the keys prove it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from . import expr as E
from .expr import atoms
from .arrow import to_arrow
from .names import Names
from ..errors import PredicateError

_FALSE, _TRUE, _NULL = 0, 1, 2  # an atom's value in one partition


def resolved_columns(atom, names: Names) -> set | None:
    """The columns of `names` the atom refers to (names.Names' rules), None when one is not there."""
    try:
        return atom.resolve(names).columns()
    except PredicateError:
        return None


def key_atoms(e, key_names, file_names=()) -> list:
    """The atoms of `e` whose every column is a key (and at least one): with `file_names` known, a
    name resolves among the file's columns and the keys together, as the exact filter sees them."""
    keys = set(key_names)
    names = Names(list(file_names) + list(key_names))
    out = []
    for a in atoms(e):
        cols = resolved_columns(a, names)
        if cols and cols <= keys:
            out.append(a)
    return out


def substitute(e, values: dict):
    """`e` with each atom whose id is in `values` (_TRUE / _FALSE / _NULL) replaced by a literal,
    NULL by polarity (see the module docstring), then folded."""
    def leaf(a, negated):
        v = values.get(id(a))
        return None if v is None else v == _TRUE or (v == _NULL and negated)

    return _replace(e, leaf)


def relax(e, ids, upper: bool):
    """`e` with the atoms in `ids` replaced so that the result is TRUE wherever `e` may be
    (upper) or only where `e` surely is (not upper): for an atom that cannot be evaluated here
    (over key and file columns at once) while the statistics decide the rest."""
    return _replace(e, lambda a, negated: (upper != negated) if id(a) in ids else None)


def _replace(e, leaf, negated=False):
    """`e` with each atom `a` for which leaf(a, under an odd number of NOTs) is a bool replaced by
    that literal, then folded."""
    if isinstance(e, (E.And, E.Or)):
        return fold(type(e), [_replace(c, leaf, negated) for c in e.children])
    if isinstance(e, E.Not):
        inner = _replace(e.child, leaf, not negated)
        return E.Literal(not inner.value) if isinstance(inner, E.Literal) else (e if inner is e.child else E.Not(inner))
    if isinstance(e, E.Literal):
        return e
    v = leaf(e, negated)
    return e if v is None else E.Literal(v)


def fold(kind, kids):
    """And / Or of `kids` with literal children folded away (exact in Kleene logic)."""
    absorbing = kind is E.Or  # TRUE absorbs an OR, FALSE an AND
    rest = []
    for k in kids:
        if isinstance(k, E.Literal):
            if k.value == absorbing:
                return E.Literal(absorbing)
            continue
        rest.append(k)
    if not rest:
        return E.Literal(not absorbing)
    return rest[0] if len(rest) == 1 else kind(tuple(rest))


def evaluate(exprs, keys: pa.Table) -> np.ndarray:
    """(partitions, expressions) uint8: each boolean expression's value (_FALSE / _TRUE / _NULL) in
    each row of `keys`, all in one Acero projection (pyarrow's semantics, the exact filter's)."""
    # pyarrow.acero loads pyarrow.dataset (~0.3 s): imported only once a table has hive keys
    import pyarrow.acero as acero

    plan = acero.Declaration.from_sequence([
        acero.Declaration("table_source", acero.TableSourceNodeOptions(keys)),
        acero.Declaration("project", acero.ProjectNodeOptions(exprs, [str(i) for i in range(len(exprs))])),
    ])
    out = plan.to_table(use_threads=False)
    vals = np.empty((keys.num_rows, len(exprs)), np.uint8)
    for i, column in enumerate(out.columns):
        arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        vals[:, i] = _bits(arr, 1)  # _TRUE where true, _FALSE where false
        if arr.null_count:
            vals[~_bits(arr, 0).astype(bool), i] = _NULL
    return vals


def _computed(expr, keys):
    """`evaluate([expr], keys)`, or None where some row of `keys` cannot compute it (ArrowInvalid:
    an overflow, a value outside a CAST's type)."""
    try:
        return evaluate([expr], keys)
    except pa.ArrowInvalid:
        return None


def _bits(arr, k) -> np.ndarray:
    """Buffer k (0: validity, 1: values) of a boolean array as one uint8 0 / 1 per value."""
    n, offset = len(arr), arr.offset
    buf = arr.buffers()[k]
    bits = np.unpackbits(np.frombuffer(buf, np.uint8, count=(offset + n + 7) // 8), bitorder="little")
    return bits[offset : offset + n]


@dataclass(frozen=True)
class Split:
    """What the keys decide: `positions` (rows of the key table, ascending) may hold a matching
    row; `classes[i]` indexes `residuals` for positions[i]; a residual is what remains to
    evaluate in those partitions (None: every row matches)."""

    positions: np.ndarray
    classes: np.ndarray
    residuals: list
    leaves: list  # the key atoms evaluated
    refused: list = ()  # (atom, PredicateError): key atoms whose literal does not fit the key (defer=True)


def split(e, keys: pa.Table, file_names=(), defer=False) -> Split:
    """Partition the rows of `keys` (one per partition, one column per key) by what `e` leaves to
    evaluate in them, dropping those where it is certainly not TRUE. A key atom that cannot be
    evaluated over its key (a literal of another type) raises its PredicateError, or with `defer`
    is left unknown and listed in `refused`: before the file columns are known, the name may
    yet be a file column's (the caller decides once they are)."""
    n = keys.num_rows
    exprs, leaves, refused = [], [], []
    for a in key_atoms(e, keys.schema.names, file_names) if keys.num_columns else ():
        try:
            exprs.append(to_arrow(a, keys.schema))
            leaves.append(a)
        except PredicateError as err:
            if not defer:
                raise
            refused.append((a, err))
    try:
        vals = evaluate(exprs, keys) if leaves else None
    except pa.ArrowInvalid:
        # an atom some partition's key value cannot compute (CAST(k AS TINYINT) of k=300) is left
        # unknown here: the exact filter computes it over the rows that reach it (prune.staged)
        each = [_computed(x, keys) for x in exprs]
        leaves = [a for a, v in zip(leaves, each) if v is not None]
        vals = np.hstack([v for v in each if v is not None]) if leaves else None
    if not leaves:
        return Split(np.arange(n, dtype=np.int64), np.zeros(n, np.int32), [e], [], refused)
    # the distinct patterns of the leaves' values (uniq, one row each) and each partition's
    if len(leaves) == 1:  # the common case: the three values themselves, no sort
        uniq, inverse = np.array([[_FALSE], [_TRUE], [_NULL]], np.uint8), vals[:, 0]
    elif len(leaves) <= 39:  # 3**39 < 2**63: one integer per pattern
        powers = 3 ** np.arange(len(leaves), dtype=np.int64)
        codes, inverse = np.unique(vals.astype(np.int64) @ powers, return_inverse=True)
        uniq = (codes[:, None] // powers) % 3
    else:
        uniq, inverse = np.unique(vals, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    residuals, seen = [], {}
    index = np.full(len(uniq), -1, np.int32)  # pattern -> class, -1: the predicate is not TRUE there
    for u, pattern in enumerate(uniq.tolist()):
        r = substitute(e, dict(zip(map(id, leaves), pattern)))
        if isinstance(r, E.Literal) and not r.value:
            continue
        r = None if isinstance(r, E.Literal) else r
        try:  # patterns that fold alike share a class (an unhashable literal: its own class);
            # repr keeps apart trees equal but for how names match (`exact` is not in ==)
            index[u] = seen.setdefault((r, repr(r)), len(residuals))
        except TypeError:
            index[u] = len(residuals)
        if index[u] == len(residuals):
            residuals.append(r)
    classes = index[inverse]
    positions = np.flatnonzero(classes >= 0).astype(np.int64)
    return Split(positions, classes[positions], residuals, leaves, refused)
