"""Binding a predicate to a schema: NOT pushed to the leaves (expr.nnf), each column resolved,
each literal mapped into its column's comparison domain (prune.literals) and hashed for the
bloom filters where it can be. The result is what rules.evaluate walks, cached per schema.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import struct
import uuid
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from . import expr as E
from . import residual as R
from .approx import approx, column_pair
from .literals import literal
from .stats import KIND_ANYSIGN, KIND_BIGDEC, KIND_BYTES, KIND_FLOAT, KIND_INT, KIND_NONE, KIND_UINT, ColumnType
from ..bloom import xxh64
from ..errors import PredicateError
from ..pm import layout as L


@dataclass(frozen=True)
class Leaf:
    kind: str  # "cmp", "notcmp", "in", "notin", "isnull", "notnull", "const"; residuals: "residual",
    # "approx" (value: bound (maybe, always) predicates or None), "colcmp" / "notcolcmp" (value: b's ColumnType)
    ct: ColumnType | None
    op: str | None = None
    value: object = None  # domain literal(s)
    hashes: object = None  # uint64 array of bloom hashes for == / IN, or None
    null_in_list: bool = False
    const: bool = True


@dataclass(frozen=True)
class Node:
    op: str  # "and" / "or"
    children: tuple


def bind(expr: E.Expr, schema) -> object:
    """Push NOT down and convert every literal to its column's domain (done once per schema:
    the result is cached on the schema, keyed by the expression and its literals' exact types)."""
    if not isinstance(expr, E.Expr):
        raise PredicateError(f"not a predicate: {expr!r}")
    cache = getattr(schema, "bound", None)
    key = None
    if cache is not None:
        sig = literal_signature(expr)
        if sig is not None:
            key = (expr, sig)
            try:
                hit = cache.get(key)
            except TypeError:  # an unhashable literal
                key = hit = None
            if hit is not None:
                return hit
    out = _bind(E.nnf(expr), schema)
    if key is not None:
        if len(cache) >= _BOUND_MAX:
            cache.clear()
        cache[key] = out
    return out


_BOUND_MAX = 512
# Literal types whose equal values bind identically (exact types: bool is not int here, and a
# subclass such as pandas.Timestamp is not cached). Anything else is bound on every call.
_IMMUTABLE_LITERALS = frozenset((type(None), bool, int, float, str, bytes, Fraction, decimal.Decimal, _dt.datetime,
                                 _dt.date, uuid.UUID))
_NODES = {E.Literal: ("value",), E.Cmp: ("value",), E.NotCmp: ("value",), E.Between: ("lo", "hi"),
          E.NotBetween: ("lo", "hi"), E.In: None, E.NotIn: None, E.IsNull: (), E.IsNotNull: ()}


def literal_signature(e):
    """What a cache keyed by expression `e` must add to its key: the exact type of each literal
    (1, 1.0 and True are equal values that bind differently) and each node's `exact`, as a
    tuple; None when some literal is not known to be immutable (then nothing is cached)."""
    sig = _literal_types(e, [])
    return None if sig is None else tuple(sig)


def _literal_types(e, sig):
    """The exact type (and numpy dtype) of every literal of `e`, in order; None when some literal
    is not known to be immutable (the binding is then not cached)."""
    t = type(e)
    if t in (E.And, E.Or):
        for c in e.children:
            if _literal_types(c, sig) is None:
                return None
        return sig
    if t is E.Not:
        return _literal_types(e.child, sig)
    if t not in _NODES:
        return None
    fields = _NODES[t]
    if t is not E.Literal:
        sig.append(e.exact)  # not part of the node's equality, but it changes the binding
    values = e.values if fields is None else tuple(getattr(e, f) for f in fields)
    if fields is None:
        if type(values) is not tuple:
            return None
        sig.append(len(values))
    for v in values:
        vt = type(v)
        if vt in _IMMUTABLE_LITERALS:
            if vt is _dt.datetime and v.tzinfo is not None and type(v.tzinfo) is not _dt.timezone:
                return None  # an arbitrary tzinfo implementation
            sig.append(vt)
        elif isinstance(v, np.generic) and not isinstance(v, np.void):
            sig.append((vt, v.dtype.str))
        else:
            return None
    return sig


def _bind(e, schema):
    if isinstance(e, E.And):
        return Node("and", tuple(_bind(c, schema) for c in e.children))
    if isinstance(e, E.Or):
        return Node("or", tuple(_bind(c, schema) for c in e.children))
    if isinstance(e, E.Literal):
        return Leaf("const", None, const=bool(e.value))
    if isinstance(e, R.Residual):
        return _bind_residual(e, schema)
    return _bind_leaf(e, schema)


# --- residuals ------------------------------------------------------------------------------


def value_type(ct: ColumnType) -> str:
    """A `_pm` column's type in residual.check's terms ("other": no residual takes it)."""
    if ct.repeated or ct.kind == KIND_NONE:
        return "other"
    if ct.physical_type == L.PT_BOOLEAN:
        return "bool"
    if ct.unit is not None:
        return "date" if ct.unit == "days" else "timestamp"
    if ct.scale is not None:
        return "decimal"
    if ct.kind == KIND_FLOAT:
        return "float"
    form = ct.domain.form
    if ct.kind in (KIND_INT, KIND_ANYSIGN) and form is None:
        return "int"
    if ct.kind == KIND_UINT:  # an unsigned INT32 (QuestDB's IPv4 type): DuckDB computes on it as UINTEGER
        return "int"
    if ct.kind == KIND_BYTES and form in ("text", None):
        return "str" if form == "text" else "bytes"
    return "other"


def _bind_residual(e, schema):
    """Checked now (one PredicateError before any I/O for what the exact filter cannot do), then
    pruned by a column pair's bounds, by prune.approx's plain predicates, or not at all."""

    def typer(name, exact):
        return value_type(schema.column(name, exact))

    R.check(e, typer, lambda x: _bind(E.nnf(x), schema))
    pair = column_pair(e)
    if pair is not None:
        a, op, b, neg = pair
        ca, cb = schema.column(a.column, a.exact), schema.column(b.column, b.exact)
        if _comparable(ca, cb):
            return Leaf("notcolcmp" if neg else "colcmp", ca, op, cb)
    maybe, always = approx(e, typer)
    if maybe is None and always is None:
        return Leaf("residual", None)
    return Leaf("approx", None, value=tuple(None if p is None else _bind(E.nnf(p), schema) for p in (maybe, always)))


def _comparable(a: ColumnType, b: ColumnType) -> bool:
    """Stats of a and b compare as values (same type only: the same kind, unit and scale)."""
    return a.kind == b.kind and a.kind in (KIND_INT, KIND_FLOAT, KIND_BYTES) and a.unit == b.unit \
        and a.scale == b.scale and value_type(a) == value_type(b) != "other"


def _bind_leaf(e, schema):
    ct = schema.column(e.column, e.exact)
    if ct.repeated:
        raise PredicateError(f"column {ct.name!r} is a repeated (list) leaf; qdbpm predicates take flat columns")
    if isinstance(e, E.IsNull):
        return Leaf("isnull", ct)
    if isinstance(e, E.IsNotNull):
        return Leaf("notnull", ct)
    if isinstance(e, (E.Cmp, E.NotCmp)):
        v = literal(ct.domain, e.value)
        h = _hash_for_bloom(ct, v) if isinstance(e, E.Cmp) and e.op == "==" and ct.kind != KIND_NONE else None
        return Leaf("cmp" if isinstance(e, E.Cmp) else "notcmp", ct, e.op, v,
                    None if h is None else np.array([h], np.uint64))
    if isinstance(e, (E.Between, E.NotBetween)):
        lo, hi = literal(ct.domain, e.lo), literal(ct.domain, e.hi)
        if ct.kind != KIND_NONE and _is_num(lo) and _is_num(hi) or isinstance(lo, bytes):
            if not (isinstance(lo, float) and math.isnan(lo)) and not (isinstance(hi, float) and math.isnan(hi)):
                if lo > hi:
                    lo, hi = hi, lo  # reversed bounds are swapped (reference behaviour)
        a, b = Leaf("cmp", ct, ">=", lo), Leaf("cmp", ct, "<=", hi)
        if isinstance(e, E.Between):
            return Node("and", (a, b))
        return Node("or", (Leaf("notcmp", ct, ">=", lo), Leaf("notcmp", ct, "<=", hi)))
    if isinstance(e, (E.In, E.NotIn)):
        vals = [v for v in e.values if v is not None]
        null_in = len(vals) != len(e.values)
        dom = [literal(ct.domain, v) for v in vals]
        hashes = None
        if isinstance(e, E.In) and ct.kind != KIND_NONE:
            hs = [_hash_for_bloom(ct, v) for v in dom]
            if all(h is not None for h in hs):
                hashes = np.array(hs, np.uint64)
        return Leaf("in" if isinstance(e, E.In) else "notin", ct, None, tuple(dom), hashes, null_in)
    raise PredicateError(f"not a predicate: {e!r}")


def _is_num(v):
    return isinstance(v, (Fraction, float))


def _hash_for_bloom(ct: ColumnType, v):
    """XXH64 of the literal's Parquet PLAIN bytes, or None when it cannot be encoded exactly."""
    pt = ct.physical_type
    try:
        if pt in (L.PT_INT32, L.PT_INT64):
            if not isinstance(v, Fraction) or v.denominator != 1:
                return None
            n = int(v)
            if ct.kind == KIND_ANYSIGN and n < 0:
                raw = struct.pack("<i" if pt == L.PT_INT32 else "<q", n)
            elif ct.kind == KIND_ANYSIGN:
                raw = struct.pack("<I" if pt == L.PT_INT32 else "<Q", n)  # same bytes as signed below 2^31/2^63
            elif pt == L.PT_INT32:
                raw = struct.pack("<I" if ct.kind == KIND_UINT else "<i", n)
            else:
                raw = struct.pack("<q", n)
        elif pt in (L.PT_FLOAT, L.PT_DOUBLE):
            if isinstance(v, float) or Fraction(float(v)) != v:
                return None
            f = float(v) + 0.0  # -0.0 hashes as +0.0
            if pt == L.PT_FLOAT:
                if float(np.float32(f)) != f:
                    return None
                raw = struct.pack("<f", f)
            else:
                raw = struct.pack("<d", f)
        elif pt == L.PT_FIXED_LEN_BYTE_ARRAY:
            if ct.kind == KIND_BIGDEC:
                # wider than any decimal a writer makes (a hostile width would cost its size in memory)
                if not isinstance(v, Fraction) or v.denominator != 1 or ct.fixed_byte_len > 64:
                    return None
                raw = int(v).to_bytes(ct.fixed_byte_len, "big", signed=True)
            else:
                raw = v
            if len(raw) != ct.fixed_byte_len:
                return None
        elif pt == L.PT_BYTE_ARRAY and ct.kind == KIND_BYTES:
            raw = v
        else:
            return None  # BOOLEAN, INT96, BYTE_ARRAY decimals (width not fixed by the type)
    except (struct.error, OverflowError, ValueError):
        return None
    return xxh64(raw)
