"""Column pairs (`a op b`, two columns of one type, bound by bind as "colcmp" / "notcolcmp"):
MAYBE and ALWAYS from both columns' bounds, row group by row group. A null on either side makes
the comparison null; a NaN (never in float stats) makes it FALSE and its NOT TRUE.
"""

from __future__ import annotations

import numpy as np

from . import expr as E
from .stats import KIND_FLOAT, ByteValues


def pair_maybe(b, sa, sb) -> np.ndarray:
    """Row groups where some row may make the pair leaf `b` TRUE (sa, sb: a's and b's stats)."""
    m = sa.some_value & sb.some_value  # a null on either side makes the comparison null
    if b.kind == "notcolcmp" and sa.kind == KIND_FLOAT:
        return m  # NOT (a op b) is TRUE for a NaN, which stats never count
    op = b.op if b.kind == "colcmp" else E.NEGATE_OP[b.op]
    if op == "!=":
        if sa.kind == KIND_FLOAT:
            return m
        # Both sides one and the same value everywhere (exact stats) is the only proof of a == b.
        return m & ~(sa.exact_eq & sb.exact_eq & (pair_sign(sa.lo, sb.lo, sa.exact_eq & sb.exact_eq) == 0))
    # Some row may have a op b only if some value of a and some value of b do: the pair of
    # bounds that would have to cross (min(a) >= max(b) rules out a < b), each used where present.
    return m & ~pair_excludes(op, sa, sb)


def pair_always(b, sa, sb) -> np.ndarray:
    """Row groups where every row makes the pair leaf `b` TRUE."""
    if sa.kind == KIND_FLOAT:
        return np.zeros(len(sa.has_lo), bool)  # a NaN row (never in the stats) makes a op b FALSE
    # Every row TRUE: no nulls on either side, and no pair of values may satisfy NOT (a op b).
    op = E.NEGATE_OP[b.op] if b.kind == "colcmp" else b.op
    m = sa.no_nulls & sb.no_nulls
    if op == "!=":
        both = sa.exact_eq & sb.exact_eq
        return m & both & (pair_sign(sa.lo, sb.lo, both) == 0)
    return m & pair_excludes(op, sa, sb)


def pair_excludes(op, sa, sb) -> np.ndarray:
    """Row groups where the bounds prove no value x of a and y of b have x op y."""
    lo_a, hi_b = sa.has_lo & sb.has_hi, sa.has_hi & sb.has_lo
    if op in ("<", "<="):  # x op y needs min(a) op max(b)
        sign = pair_sign(sa.lo, sb.hi, lo_a)
        return lo_a & ((sign >= 0) if op == "<" else (sign > 0))
    if op in (">", ">="):  # needs max(a) op min(b)
        sign = pair_sign(sa.hi, sb.lo, hi_b)
        return hi_b & ((sign <= 0) if op == ">" else (sign < 0))
    # ==: the ranges must overlap
    return (hi_b & (pair_sign(sa.hi, sb.lo, hi_b) < 0)) | (lo_a & (pair_sign(sa.lo, sb.hi, lo_a) > 0))


def pair_sign(x, y, where) -> np.ndarray:
    """sign(x_i - y_i) as int8 where `where`, 0 elsewhere (int64 / float64 arrays or ByteValues)."""
    if isinstance(x, ByteValues):
        return np.where(where, x.compare_pairs(y), 0).astype(np.int8)
    return np.where(where, (x > y).astype(np.int8) - (x < y).astype(np.int8), 0).astype(np.int8)
