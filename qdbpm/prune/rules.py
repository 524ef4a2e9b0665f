"""Bound predicates -> row-group masks: the conservative rule of each leaf, over stat arrays in
memory (no file I/O here).

A mask is True where a row group MAY hold a row for which the predicate is TRUE. Every rule is
conservative: when in doubt, True. NOT was pushed to the leaves when binding (bind.py), so
combining leaf masks with & and | stays sound.

`classify` adds the other half, ALWAYS: True only where the stats prove that EVERY row of the row
group makes the predicate TRUE (not FALSE, not NULL); when in doubt, False. Each ALWAYS leaf rule
is the complement of a MAYBE test: "every value satisfies P" is "no value may satisfy NOT P".
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

import numpy as np

from . import expr as E
from .bind import Leaf, Node
from .literals import ALWAYS, NEVER, int_bound, out_of_range
from .stats import KIND_ANYSIGN, KIND_BIGDEC, KIND_BYTES, KIND_FLOAT, KIND_INT, KIND_NONE, KIND_UINT, ByteValues, \
    ColumnStats
from ..bloom import probe_many
from ..pm import layout as L

I64_MAX = (1 << 63) - 1
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
        "!=": operator.ne}


# --- integer / float bounds -----------------------------------------------------------------


def _float_bounds(q, f32=False):
    """(down, up): float64 values with down <= q <= up; for FLOAT columns also covering q's float32
    rounding, in case a reader compares in float32."""
    if isinstance(q, float):
        return q, q
    f = float(q)
    down = up = f
    if Fraction(f) < q:
        up = math.nextafter(f, math.inf)
    elif Fraction(f) > q:
        down = math.nextafter(f, -math.inf)
    if not f32:
        return down, up
    with np.errstate(over="ignore"):
        r32 = float(np.float32(f))  # inf when out of float32 range: only widens the bounds
    return min(down, r32), max(up, r32)


def _cmp(arr, op, c):
    """arr op c for int64 / uint64 arrays and Python ints that may fall outside their range."""
    info = np.iinfo(arr.dtype)
    truth = out_of_range(op, c, int(info.min), int(info.max))
    if truth is not None:
        return np.full(arr.shape, truth)
    return _OPS[op](arr, arr.dtype.type(c))


def _obj_cmp(arr, op, c, has):
    """Elementwise comparison on object arrays (bytes, big ints) or ByteValues, only where `has`."""
    if isinstance(arr, ByteValues):
        return arr.compare(op, c, has)
    out = np.ones(len(arr), bool)
    idx = np.nonzero(has)[0]
    if idx.size:
        vals = arr[idx]
        if op == "<":
            r = [v < c for v in vals]
        elif op == "<=":
            r = [v <= c for v in vals]
        elif op == ">":
            r = [v > c for v in vals]
        else:
            r = [v >= c for v in vals]
        out[idx] = r
    return out


# --- evaluation -----------------------------------------------------------------------------


MAX_ANYSIGN_COLUMNS = 3  # readings tried jointly: 2**3 evaluations at most


def evaluate(b, n_rows: int, stats, blooms=None) -> np.ndarray:
    """Mask over `n_rows` row groups. stats(col) -> ColumnStats; blooms(col) -> (data, offsets,
    lengths) or None. Both are lookups over data already in memory."""
    out = np.zeros(n_rows, bool)
    for fixed, possible in _readings(b, n_rows, stats):
        if possible is None:
            return _evaluate(b, n_rows, fixed, blooms)
        out |= _evaluate(b, n_rows, fixed, blooms) & possible
        if out.all():
            break
    return out


def classify(b, n_rows: int, stats, blooms=None) -> tuple:
    """(maybe, always): two masks over `n_rows` row groups. `maybe` is `evaluate`'s; `always`, a
    subset of it, is True where the stats prove every row of the row group makes the predicate
    TRUE. On a row group with no rows that holds vacuously, so `always` may be True there where
    `maybe` is (ParquetMeta.classify and Table.classify_masks clear it). Blooms never prove ALWAYS."""
    maybe = evaluate(b, n_rows, stats, blooms)
    always = np.ones(n_rows, bool)
    for fixed, possible in _readings(b, n_rows, stats):
        a = _always(b, n_rows, fixed)
        if possible is not None:
            a |= ~possible  # a reading disordered for a row group is not its writer's: nothing to prove there
        always &= a  # ALWAYS under every reading still possible for the row group
        if not always.any():
            break
    always &= maybe  # only where a row group may match: an empty one stays out unless maybe keeps it
    return maybe, always


def _readings(b, n_rows, stats):
    """(stats lookup, possible) per joint reading of b's typeless integer columns."""
    anysign = sorted(_anysign_columns(b))
    if not anysign or len(anysign) > MAX_ANYSIGN_COLUMNS:
        # Beyond the cap each leaf reads both ways on its own: sound, only less sharp.
        yield stats, None
        return
    # A typeless integer column is signed or unsigned, the same for the whole predicate: evaluate
    # it under each joint reading and keep a row group any reading keeps. Leaf by leaf ORing
    # would let `x >= 0 AND x <= 0` pass on 2^63 (>= 0 unsigned, <= 0 signed). A reading under
    # which a row group's min > max is not its writer's order, so it adds nothing for that row
    # group (decided per row group: a Table pass concatenates files of either order).
    for mask in range(1 << len(anysign)):
        unsigned = {c for k, c in enumerate(anysign) if mask >> k & 1}
        possible = np.ones(n_rows, bool)
        for c in anysign:
            s = stats(c)
            lo, hi = (s.ulo, s.uhi) if c in unsigned else (s.lo, s.hi)
            possible &= ~(s.has_lo & s.has_hi) | (lo <= hi)
        if not possible.any():
            continue
        cache = {}

        def fixed(col, unsigned=unsigned, cache=cache):
            st = stats(col)
            if col not in anysign:
                return st
            if col not in cache:
                cache[col] = _one_reading(st, col in unsigned)
            return cache[col]

        yield fixed, possible


def _anysign_columns(b) -> set:
    if isinstance(b, Node):
        out = set()
        for c in b.children:
            out |= _anysign_columns(c)
        return out
    return {b.ct.index} if b.ct is not None and b.ct.kind == KIND_ANYSIGN else set()


def _one_reading(s, unsigned: bool):
    """KIND_ANYSIGN stats read one way: plain integer bounds; a row group whose bounds are
    disordered under this reading keeps no bounds in it."""
    lo, hi = (s.ulo, s.uhi) if unsigned else (s.lo, s.hi)
    ordered = ~(s.has_lo & s.has_hi) | (lo <= hi)
    eq = s.exact_eq & ordered  # all values share lo's bits, whichever the reading
    return ColumnStats(KIND_INT, lo, hi, s.has_lo & ordered, s.has_hi & ordered, eq,
                       s.nulls_known, s.nulls, s.num_values)


def _evaluate(b, n_rows: int, stats, blooms) -> np.ndarray:
    if isinstance(b, Node):
        it = iter(b.children)
        m = _evaluate(next(it), n_rows, stats, blooms)
        for c in it:
            if b.op == "and":
                if not m.any():
                    break
                m &= _evaluate(c, n_rows, stats, blooms)
            else:
                if m.all():
                    break
                m |= _evaluate(c, n_rows, stats, blooms)
        return m
    if b.kind == "const":
        return np.full(n_rows, b.const)
    if b.kind in _RESIDUAL_KINDS:
        return _residual_maybe(b, n_rows, stats, blooms)
    s = stats(b.ct.index)
    return _leaf_mask(b, s, blooms)


def _leaf_mask(b: Leaf, s, blooms) -> np.ndarray:
    kind = s.kind
    if b.kind == "isnull":
        # Only a known null count of 0 proves there is no null.
        return ~s.no_nulls
    if b.kind == "notnull":
        return ~s.all_null
    some_value = s.some_value  # an all-null chunk satisfies no comparison, IN or NOT IN (read-only)
    f32 = b.ct.physical_type == L.PT_FLOAT
    if b.kind == "cmp":
        m = _cmp_mask(b.op, b.value, s, f32)  # always a fresh array
        if s.any_all_null:
            m &= some_value
        if b.hashes is not None:
            m &= _bloom_mask(b, blooms, len(m))
        return m
    if b.kind == "notcmp":
        if kind == KIND_FLOAT:
            # NOT (x op c) is also TRUE for NaN, which stats never count.
            return some_value.copy()
        if _is_nan(b.value) and b.op != "!=":
            # x op NaN is FALSE for every x (op is not != here), so its NOT is TRUE for every value.
            return some_value.copy()
        m = _cmp_mask(E.NEGATE_OP[b.op], b.value, s, f32)
        if s.any_all_null:
            m &= some_value
        return m
    if b.kind == "in":
        m = np.zeros(len(some_value), bool)
        for v in b.value:
            m |= _cmp_mask("==", v, s, f32)
        m &= some_value
        if b.hashes is not None and len(b.value):
            m &= _bloom_mask(b, blooms, len(m))
        if b.null_in_list:
            m |= ~s.no_nulls  # None in the list matches null rows
        return m
    if b.kind == "notin":
        if kind == KIND_FLOAT or kind == KIND_NONE or not b.value:
            m = some_value.copy()
        else:
            # Provably excluded only when every non-null value is one listed value.
            m = some_value.copy()
            for v in b.value:
                m &= ~_equals_everywhere(v, s)
        if not b.null_in_list:
            m |= ~s.no_nulls  # IN never yields null (pyarrow's MATCH), so NOT IN is TRUE for nulls
        return m
    raise AssertionError(b.kind)


def _always(b, n_rows: int, stats) -> np.ndarray:
    """Row groups where every row makes `b` TRUE (a fresh array)."""
    if isinstance(b, Node):
        it = iter(b.children)
        m = _always(next(it), n_rows, stats)
        for c in it:
            if b.op == "and":  # every child TRUE on every row
                if not m.any():
                    break
                m &= _always(c, n_rows, stats)
            else:  # one child TRUE on every row is enough
                if m.all():
                    break
                m |= _always(c, n_rows, stats)
        return m
    if b.kind == "const":
        return np.full(n_rows, b.const)
    if b.kind in _RESIDUAL_KINDS:
        return _residual_always(b, n_rows, stats)
    return _leaf_always(b, stats(b.ct.index))


def _leaf_always(b: Leaf, s) -> np.ndarray:
    """Row groups where every row makes the leaf TRUE (a fresh array). A null row makes a
    comparison NULL, and its NOT too (Kleene): comparison leaves need a known null count of 0."""
    kind = s.kind
    n = len(s.has_lo)
    if b.kind == "isnull":
        return s.all_null.copy()  # a known null count equal to the value count
    if b.kind == "notnull":
        return s.no_nulls.copy()
    f32 = b.ct.physical_type == L.PT_FLOAT
    if b.kind in ("cmp", "notcmp"):
        op, v = b.op, b.value
        if kind == KIND_NONE:
            return np.zeros(n, bool)  # no known order
        if _is_nan(v):
            # x op NaN is FALSE for every x but !=: TRUE on every non-null row or on none.
            return s.no_nulls.copy() if (op == "!=") == (b.kind == "cmp") else np.zeros(n, bool)
        if b.kind == "cmp":
            if kind == KIND_FLOAT and op != "!=":
                return np.zeros(n, bool)  # a NaN row (stats never count NaN) makes x op c FALSE
            # Every value satisfies x op c when none may satisfy NOT (x op c): x NEG c (NaN satisfies !=).
            return s.no_nulls & ~_cmp_mask(E.NEGATE_OP[op], v, s, f32)
        if kind == KIND_FLOAT and op == "!=":
            return np.zeros(n, bool)  # NOT (NaN != c) is FALSE, and stats never count NaN
        # NOT (x op c) holds for every value when none may satisfy x op c (NaN satisfies none).
        return s.no_nulls & ~_cmp_mask(op, v, s, f32)
    if b.kind == "in":
        # A value is TRUE when it equals a listed one (only exact min == max proves it: never
        # for floats, where a NaN row may hide), a null when None is listed.
        eq = np.zeros(n, bool)
        for v in b.value:
            eq |= _equals_everywhere(v, s)
        return eq | s.all_null if b.null_in_list else eq & s.no_nulls
    if b.kind == "notin":
        # A value is TRUE when it equals no listed one (NaN equals none), a null unless None is listed.
        m = np.ones(n, bool)
        for v in b.value:
            m &= ~_cmp_mask("==", v, s, f32)
        m |= s.all_null  # no value at all
        if b.null_in_list:
            m &= s.no_nulls
        return m
    raise AssertionError(b.kind)


def _is_nan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _equals_everywhere(v, s):
    """Row groups whose every non-null value is exactly v."""
    if s.kind in (KIND_INT, KIND_UINT, KIND_ANYSIGN):
        c = int_bound("==", v)
        if c == ALWAYS or c == NEVER:
            return np.zeros(len(s.has_lo), bool)
        if s.kind == KIND_ANYSIGN and not 0 <= c <= I64_MAX:
            return np.zeros(len(s.has_lo), bool)  # equal in one reading, maybe not in the other
        return s.exact_eq & _cmp(s.lo, "==", c)
    if s.kind == KIND_BIGDEC:
        if not isinstance(v, Fraction) or v.denominator != 1:
            return np.zeros(len(s.has_lo), bool)
        c = int(v)
        return s.exact_eq & np.array([x == c for x in s.lo], bool)
    if s.kind == KIND_BYTES:
        if isinstance(s.lo, ByteValues):
            return s.exact_eq & s.lo.equals(v)
        return s.exact_eq & np.array([x == v for x in s.lo], bool)
    return np.zeros(len(s.has_lo), bool)


def _cmp_mask(op, v, s, f32=False) -> np.ndarray:
    """May some non-null value x satisfy (x op v)? Each bound is used when present on its own
    (an absent bound is infinite); rows with no usable bound: True."""
    kind = s.kind
    n = len(s.has_lo)
    if kind == KIND_NONE:
        return np.ones(n, bool)
    if op == "!=":
        return ~_equals_everywhere(v, s) if kind != KIND_FLOAT else np.ones(n, bool)
    if kind == KIND_ANYSIGN:
        # Signedness unknown: a row group stays if it may match under either reading.
        c = int_bound(op, v)
        if c == ALWAYS:
            return np.ones(n, bool)
        if c == NEVER:
            return np.zeros(n, bool)
        out = np.zeros(n, bool)
        for lo, hi in ((s.lo, s.hi), (s.ulo, s.uhi)):
            ordered = ~(s.has_lo & s.has_hi) | (lo <= hi)  # a disordered reading is not the true one
            hl, hh = s.has_lo & ordered, s.has_hi & ordered
            if op in ("<", "<="):
                m = ~hl | _cmp(lo, op, c)
            elif op in (">", ">="):
                m = ~hh | _cmp(hi, op, c)
            else:
                m = (~hl | _cmp(lo, "<=", c)) & (~hh | _cmp(hi, ">=", c))
            out |= m & ordered
        return out
    if kind in (KIND_INT, KIND_UINT, KIND_BIGDEC):
        c = int_bound(op, v)
        if c == ALWAYS:
            return np.ones(n, bool)
        if c == NEVER:
            return np.zeros(n, bool)
        test = (lambda arr, o, has: _obj_cmp(arr, o, c, has)) if kind == KIND_BIGDEC else \
            (lambda arr, o, has: _cmp(arr, o, c))
    elif kind == KIND_FLOAT:
        if isinstance(v, float) and math.isnan(v):
            return np.zeros(n, bool)  # x op NaN is FALSE for every x (op is not != here)
        down, up = _float_bounds(v, f32)
        # lower-bound tests (min op c) may use `up`, upper-bound tests (max op c) `down`.
        test = (lambda arr, o, has: _apply_float(arr, o, up if o in ("<", "<=") else down))
    elif kind == KIND_BYTES:
        test = (lambda arr, o, has: _obj_cmp(arr, o, v, has))
    else:
        return np.ones(n, bool)
    # Each test returns a fresh array; a row with no usable bound on the tested side stays.
    if op in ("<", "<="):
        return _or_missing(test(s.lo, op, s.has_lo), s.has_lo, s.all_has_lo)
    if op in (">", ">="):
        return _or_missing(test(s.hi, op, s.has_hi), s.has_hi, s.all_has_hi)
    # ==: v within [min, max], each side where known
    m = _or_missing(test(s.lo, "<=", s.has_lo), s.has_lo, s.all_has_lo)
    m &= _or_missing(test(s.hi, ">=", s.has_hi), s.has_hi, s.all_has_hi)
    return m


def _or_missing(m, has, all_have):
    """m | ~has, in place (m is a fresh array), skipped when every bound is present."""
    if not all_have:
        m |= ~has
    return m


def _apply_float(arr, op, c):
    return _OPS[op](arr, c)


def _bloom_mask(b: Leaf, blooms, n) -> np.ndarray:
    if blooms is None:
        return np.ones(n, bool)
    idx = blooms(b.ct.index)
    if idx is None:
        return np.ones(n, bool)
    data, offsets, lengths = idx
    # Absent filters (length < 0) answer "may contain".
    return probe_many(b.hashes, data, offsets, lengths, any_of=True)


# --- residuals (prune.residual, bound in bind._bind_residual) ----------------------------------

_RESIDUAL_KINDS = ("residual", "approx", "colcmp", "notcolcmp")


def _residual_maybe(b: Leaf, n_rows, stats, blooms) -> np.ndarray:
    if b.kind == "residual":
        return np.ones(n_rows, bool)  # evaluated by the exact filter only
    if b.kind == "approx":
        # residual.approx's `maybe` is TRUE wherever the residual is: its mask covers the residual's.
        return np.ones(n_rows, bool) if b.value[0] is None else _evaluate(b.value[0], n_rows, stats, blooms)
    sa, sb = stats(b.ct.index), stats(b.value.index)
    m = sa.some_value & sb.some_value  # a null on either side makes the comparison null
    if b.kind == "notcolcmp" and sa.kind == KIND_FLOAT:
        return m  # NOT (a op b) is TRUE for a NaN, which stats never count
    op = b.op if b.kind == "colcmp" else E.NEGATE_OP[b.op]
    if op == "!=":
        if sa.kind == KIND_FLOAT:
            return m
        # Both sides one and the same value everywhere (exact stats) is the only proof of a == b.
        return m & ~(sa.exact_eq & sb.exact_eq & (_pair_sign(sa.lo, sb.lo, sa.exact_eq & sb.exact_eq) == 0))
    # Some row may have a op b only if some value of a and some value of b do: the pair of
    # bounds that would have to cross (min(a) >= max(b) rules out a < b), each used where present.
    return m & ~_pair_excludes(op, sa, sb)


def _residual_always(b: Leaf, n_rows, stats) -> np.ndarray:
    if b.kind == "residual":
        return np.zeros(n_rows, bool)  # a residual proves nothing
    if b.kind == "approx":
        # `always` TRUE implies the residual TRUE on that row.
        return np.zeros(n_rows, bool) if b.value[1] is None else _always(b.value[1], n_rows, stats)
    sa, sb = stats(b.ct.index), stats(b.value.index)
    if sa.kind == KIND_FLOAT:
        return np.zeros(n_rows, bool)  # a NaN row (never in the stats) makes a op b FALSE
    # Every row TRUE: no nulls on either side, and no pair of values may satisfy NOT (a op b).
    op = E.NEGATE_OP[b.op] if b.kind == "colcmp" else b.op
    m = sa.no_nulls & sb.no_nulls
    if op == "!=":
        both = sa.exact_eq & sb.exact_eq
        return m & both & (_pair_sign(sa.lo, sb.lo, both) == 0)
    return m & _pair_excludes(op, sa, sb)


def _pair_excludes(op, sa, sb) -> np.ndarray:
    """Row groups where the bounds prove no value x of a and y of b have x op y."""
    lo_a, hi_b = sa.has_lo & sb.has_hi, sa.has_hi & sb.has_lo
    if op in ("<", "<="):  # x op y needs min(a) op max(b)
        sign = _pair_sign(sa.lo, sb.hi, lo_a)
        return lo_a & ((sign >= 0) if op == "<" else (sign > 0))
    if op in (">", ">="):  # needs max(a) op min(b)
        sign = _pair_sign(sa.hi, sb.lo, hi_b)
        return hi_b & ((sign <= 0) if op == ">" else (sign < 0))
    # ==: the ranges must overlap
    return (hi_b & (_pair_sign(sa.hi, sb.lo, hi_b) < 0)) | (lo_a & (_pair_sign(sa.lo, sb.hi, lo_a) > 0))


def _pair_sign(x, y, where) -> np.ndarray:
    """sign(x_i - y_i) as int8 where `where`, 0 elsewhere (int64 / float64 arrays or ByteValues)."""
    if isinstance(x, ByteValues):
        return np.where(where, x.compare_pairs(y), 0).astype(np.int8)
    return np.where(where, (x > y).astype(np.int8) - (x < y).astype(np.int8), 0).astype(np.int8)
