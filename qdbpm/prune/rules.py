"""Bound predicates -> row-group masks: the conservative rule of each leaf, over stat arrays in
memory (no file I/O here).

A mask is True where a row group MAY hold a row for which the predicate is TRUE. Every rule is
conservative: when in doubt, True. NOT was pushed to the leaves when binding (bind.py), so
combining leaf masks with & and | stays sound.

`classify` adds the other half, ALWAYS: True only where the stats prove that EVERY row of the row
group makes the predicate TRUE (not FALSE, not NULL); when in doubt, False. Each ALWAYS leaf rule
is the complement of a MAYBE test: "every value satisfies P" is "no value may satisfy NOT P".

Cheap work first: an AND evaluates a child only where the children before it left a row group
alive, an OR only where they left it undecided, children run cheapest first (`cost`), and the
stats and bloom lookups are told which row groups still count (`need`), so a costly lookup
(byte-string stats, bloom bitsets) is made only where its answer can change the result. Every
rule answers row group by row group, and AND / OR are commutative over masks: the masks are
exactly those of evaluating every child over every row group in written order (LAZY = False).
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

import numpy as np

from . import expr as E
from .bind import Leaf, Node
from .column_pairs import pair_always, pair_maybe
from .literals import ALWAYS, NEVER, int_bound, out_of_range
from .readings import readings
from .stats import KIND_ANYSIGN, KIND_BIGDEC, KIND_BYTES, KIND_FLOAT, KIND_INT, KIND_NONE, KIND_UINT, ByteValues
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


LAZY = True  # False: every child over every row group in written order, every lookup whole, `need` ignored

# Cost tiers, cheapest first: no lookup; bounds in the chunk records; out-of-line bounds
# (byte strings, big decimals); a bloom probe; a residual (column pairs, approximations).
COST_CONST, COST_FIXED, COST_VARIABLE, COST_BLOOM, COST_RESIDUAL = range(5)


def evaluate(b, n_rows: int, stats, blooms=None, need=None) -> np.ndarray:
    """Mask over `n_rows` row groups. stats(col, need) -> ColumnStats; blooms(col, need) ->
    (data, offsets, lengths) or None: lookups over data already in memory, told which row groups
    still count (`need`, a bool mask; None: all), so they may leave the others unknown (no
    bounds, nulls unknown, no filter). `need` here: only those row groups are wanted; the mask
    is False elsewhere (LAZY off: `need` is ignored, the mask is whole)."""
    w = _Walk(n_rows, stats, blooms, LAZY)
    if not w.lazy or need is None:
        return _maybe(b, w, None)
    return _maybe(b, w, need) & need


def classify(b, n_rows: int, stats, blooms=None, need=None) -> tuple:
    """(maybe, always): two masks over `n_rows` row groups. `maybe` is `evaluate`'s; `always`, a
    subset of it, is True where the stats prove every row of the row group makes the predicate
    TRUE. On a row group with no rows that holds vacuously, so `always` may be True there where
    `maybe` is (ParquetMeta.classify and Table.classify_masks clear it). Blooms never prove ALWAYS.
    `need` as in `evaluate`: both masks are False outside it (LAZY off: whole)."""
    w = _Walk(n_rows, stats, blooms, LAZY)
    need = need if w.lazy else None
    maybe = _maybe(b, w, need)
    if need is not None:
        maybe &= need
    return maybe, _proved(b, w, maybe)


def prove(b, n_rows: int, stats, need) -> np.ndarray:
    """classify(b, n_rows, stats, None, need)[1] where b may match every row group of `need`: b a
    conjunct of an AND whose `maybe` holds `need` (a row group an AND leaves alive, each of its
    conjuncts does: its MAYBE pass would only give `need` back, so it is skipped)."""
    if not LAZY or need is None:
        return classify(b, n_rows, stats, None, need)[1]
    return _proved(b, _Walk(n_rows, stats, None, LAZY), need)


def _proved(b, w, maybe) -> np.ndarray:
    """classify's `always`: ALWAYS under every reading still possible, only where `maybe` (a
    fresh mask, classify's or prove's) holds."""
    always = np.ones(w.n, bool)
    for fixed, possible in readings(b, w.n, w.stats, maybe if w.lazy else None):
        todo = None
        if w.lazy:  # only where ALWAYS is still open and may matter: `always &= maybe` drops the rest
            todo = always & maybe if possible is None else always & maybe & possible
            if not todo.any():
                continue
        a = _always(b, w.using(fixed), todo)
        if possible is not None:
            a |= ~possible  # a reading disordered for a row group is not its writer's: nothing to prove there
        always &= a  # ALWAYS under every reading still possible for the row group
        if not always.any():
            break
    always &= maybe  # only where a row group may match: an empty one stays out unless maybe keeps it
    return always


class _Walk:
    """One evaluation's row count, lookups and laziness, and its nodes' cheap-first orders."""

    __slots__ = ("n", "stats", "blooms", "lazy", "orders")

    def __init__(self, n, stats, blooms, lazy, orders=None):
        self.n, self.stats, self.blooms, self.lazy = n, stats, blooms, lazy
        self.orders = {} if orders is None else orders  # id(node) -> children, cheap first

    def using(self, stats) -> "_Walk":
        return _Walk(self.n, stats, self.blooms, self.lazy, self.orders)

    def children(self, node) -> tuple:
        """node's children cheapest first (a stable sort: equal costs keep their written order)."""
        if not self.lazy:
            return node.children
        kids = self.orders.get(id(node))  # the bound tree outlives the walk: ids stay its nodes'
        if kids is None:
            kids = self.orders[id(node)] = tuple(sorted(node.children, key=cost))
        return kids


def cost(b) -> int:
    """What evaluating `b` may look up, as a COST_* tier: a node costs its dearest child."""
    if isinstance(b, Node):
        return max(cost(c) for c in b.children)
    if b.kind in ("const", "residual"):
        return COST_CONST  # a constant mask ("residual": MAYBE everywhere, never ALWAYS)
    if b.kind in _RESIDUAL_KINDS:
        return COST_RESIDUAL
    if b.hashes is not None and b.kind in ("cmp", "in"):
        return COST_BLOOM
    return COST_VARIABLE if b.ct.kind in (KIND_BYTES, KIND_BIGDEC) else COST_FIXED


def _and(m, need):
    """m & need (need None: m itself; callers never write a `need`)."""
    return m if need is None else m & need


def _maybe(b, w, need) -> np.ndarray:
    """evaluate over every reading of b's typeless integer columns: exact where `need`."""
    out = np.zeros(w.n, bool)
    for fixed, possible in readings(b, w.n, w.stats, need):
        if possible is None:
            return _evaluate(b, w, need)
        todo = None
        if w.lazy:  # only where this reading may still add a row group
            todo = _and(possible & ~out, need)
            if not todo.any():
                continue
        out |= _evaluate(b, w.using(fixed), todo) & possible
        if out.all():
            break
    return out


def _fold(b, w, need, mask) -> np.ndarray:
    """An AND / OR node's mask from its children's `mask(child, w, need)` (MAYBE or ALWAYS, both
    combine alike): an AND asks a child only where m is still True, an OR only where m is still
    False, so work is done only where it can change the answer."""
    kids = w.children(b)
    m = mask(kids[0], w, need)
    for c in kids[1:]:
        todo = _and(m, need) if b.op == "and" else _and(~m, need)
        if not todo.any():
            break
        r = mask(c, w, todo if w.lazy else None)
        if b.op == "and":
            m &= r
        else:
            m |= r
    return m


def _evaluate(b, w, need) -> np.ndarray:
    """b's MAYBE mask, exact where `need` (None: everywhere); a fresh array."""
    if isinstance(b, Node):
        return _fold(b, w, need, _evaluate)
    if b.kind == "const":
        return np.full(w.n, b.const)
    if b.kind in _RESIDUAL_KINDS:
        return _residual_maybe(b, w, need)
    return _leaf_mask(b, w.stats(b.ct.index, need), w, need)


def _leaf_mask(b: Leaf, s, w, need) -> np.ndarray:
    """The leaf's MAYBE mask from its column's stats `s`; for = / IN then its bloom filters,
    probed only where the stats leave a needed row group (not lazy: everywhere)."""
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
            m &= _bloom_mask(b, w, _and(m, need) if w.lazy else None)
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
            m &= _bloom_mask(b, w, _and(m, need) if w.lazy else None)
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


def _always(b, w, need) -> np.ndarray:
    """Row groups where every row makes `b` TRUE, exact where `need` (None: everywhere); a fresh array."""
    if isinstance(b, Node):
        return _fold(b, w, need, _always)
    if b.kind == "const":
        return np.full(w.n, b.const)
    if b.kind in _RESIDUAL_KINDS:
        return _residual_always(b, w, need)
    return _leaf_always(b, w.stats(b.ct.index, need))


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


def _bloom_mask(b: Leaf, w, rows) -> np.ndarray:
    """May some of b's hashed values be in each row group: probed where `rows` (None: all), True
    elsewhere; the lookup builds filters only for those row groups."""
    out = np.ones(w.n, bool)
    if w.blooms is None:
        return out
    sel = None
    if rows is not None:
        sel = np.flatnonzero(rows)
        if not sel.size:
            return out
        if sel.size == w.n:
            rows = sel = None
    idx = w.blooms(b.ct.index, rows)
    if idx is None:
        return out
    data, offsets, lengths = idx
    # Absent filters (length < 0) answer "may contain".
    if sel is None:
        return probe_many(b.hashes, data, offsets, lengths, any_of=True)
    out[sel] = probe_many(b.hashes, data, offsets[sel], lengths[sel], any_of=True)
    return out


# --- residuals (prune.residual, bound in bind._bind_residual) ----------------------------------

_RESIDUAL_KINDS = ("residual", "approx", "colcmp", "notcolcmp")


def _residual_maybe(b: Leaf, w, need) -> np.ndarray:
    if b.kind == "residual":
        return np.ones(w.n, bool)  # evaluated by the exact filter only
    if b.kind == "approx":
        # residual.approx's `maybe` is TRUE wherever the residual is: its mask covers the residual's.
        return np.ones(w.n, bool) if b.value[0] is None else _evaluate(b.value[0], w, need)
    return pair_maybe(b, w.stats(b.ct.index, need), w.stats(b.value.index, need))


def _residual_always(b: Leaf, w, need) -> np.ndarray:
    if b.kind == "residual":
        return np.zeros(w.n, bool)  # a residual proves nothing
    if b.kind == "approx":
        # `always` TRUE implies the residual TRUE on that row.
        return np.zeros(w.n, bool) if b.value[1] is None else _always(b.value[1], w, need)
    return pair_always(b, w.stats(b.ct.index, need), w.stats(b.value.index, need))
