"""Predicates as pyarrow compute expressions: the exact row filter behind `read_table`.

Literals are converted to the column's Arrow type exactly (an integer column compared with 2.5,
a millisecond column with a microsecond instant): the comparison is rewritten to an equivalent
one against a representable value, so results match the semantics in `expr`'s docstring.
"""

from __future__ import annotations

import decimal
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import expr as E
from .literals import ALWAYS, NEVER, Domain, bad_literal, int_bound, literal, not_boolean, out_of_range
from .names import Names
from ..errors import PredicateError
from ..pm.qdb_types import KIND_BYTES, KIND_FLOAT, KIND_INT

# Decimal arithmetic with enough digits for DECIMAL256 (the default context rounds at 28).
_EXACT = decimal.Context(prec=100)


def _field_ref(name, schema, exact=True):
    """(field reference, Arrow type) of the column `name` refers to, by names.Names' rules (the
    same as pruning's), else of a struct field path "a.b" whose every part follows them."""
    names = Names(schema.names)
    i = names.find(name, exact)
    if i is not None:
        return pc.field(schema.names[i]), schema.field(i).type
    parts, path, t = name.split("."), [], schema
    for p in parts if len(parts) > 1 else ():
        fields = list(t) if isinstance(t, pa.Schema) or pa.types.is_struct(t) else []
        k = Names([f.name for f in fields]).find(p, exact)
        if k is None:
            break
        path.append(fields[k].name)
        t = fields[k].type
    else:
        if path:
            return pc.field(*path), t
    return names.index(name, exact)  # raises: no such column


def _int_range(t):
    if pa.types.is_decimal(t):
        return -(10**t.precision) + 1, 10**t.precision - 1
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return -(1 << 31), (1 << 31) - 1
    if pa.types.is_integer(t):
        info = {8: 7, 16: 15, 32: 31, 64: 63}[t.bit_width]
        if pa.types.is_signed_integer(t):
            return -(1 << info), (1 << info) - 1
        return 0, (1 << t.bit_width) - 1
    return -(1 << 63), (1 << 63) - 1


def _is_temporal(t):
    return pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_duration(t)


def _is_int_valued(t):
    return pa.types.is_integer(t) or pa.types.is_decimal(t) or _is_temporal(t)


def _domain(name, t) -> Domain:
    """How a literal maps into an integer-valued (integers, decimals, temporal types, booleans as
    0 / 1) or floating Arrow column's values (prune.literals)."""
    if pa.types.is_floating(t):
        return Domain(name, str(t), KIND_FLOAT)
    unit = scale = None
    if pa.types.is_date32(t):
        unit = "days"
    elif pa.types.is_date64(t):
        unit = "ms"
    elif _is_temporal(t):
        unit = t.unit
    elif pa.types.is_decimal(t):
        scale = t.scale
    return Domain(name, str(t), KIND_INT, unit=unit, scale=scale, boolean=pa.types.is_boolean(t))


def _int_cmp(ref, t, op, q):
    """ref op q for an integer-valued column, q exact; rewritten to stay representable."""
    c = int_bound(op, q)
    if c == ALWAYS or c == NEVER:
        return _false_unless_null(ref, c == ALWAYS)
    truth = out_of_range(op, c, *_int_range(t))
    if truth is not None:
        return _false_unless_null(ref, truth)
    return _apply(ref, op, _scalar(t, c))


def _false_unless_null(ref, truth: bool):
    """TRUE (or FALSE) for every non-null value and null for nulls, like a real comparison."""
    valid = pc.is_valid(ref)
    return pc.if_else(valid, pa.scalar(truth), pa.scalar(None, pa.bool_()))


def _scalar(t, k: int):
    """The value of integer k (in the column's units) as a scalar of type t."""
    if pa.types.is_decimal(t):
        return pa.scalar(decimal.Decimal(k).scaleb(-t.scale, _EXACT), t)
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.scalar(k, pa.int32()).cast(t)
    if _is_temporal(t):
        return pa.scalar(k, pa.int64()).cast(t)
    return pa.scalar(k, t)


def _leaf_cmp(name, op, value, schema, exact=True):
    ref, t = _field_ref(name, schema, exact)
    if isinstance(t, pa.BaseExtensionType):
        ref, t = ref.cast(t.storage_type), t.storage_type
        if isinstance(value, uuid.UUID):
            value = value.bytes
    if pa.types.is_dictionary(t):
        ref, t = ref.cast(t.value_type), t.value_type
    if pa.types.is_boolean(t):
        if isinstance(value, (bool, np.bool_)):
            return _apply(ref, op, pa.scalar(bool(value)))
        # A number compares with FALSE / TRUE as 0 / 1 (as pruning does, and DuckDB).
        i8 = pa.int8()
        return _int_cmp(ref.cast(i8), i8, op, literal(_domain(name, t), value))
    if isinstance(value, (bool, np.bool_)):
        raise not_boolean(name, str(t))
    if _is_int_valued(t):
        return _int_cmp(ref, t, op, literal(_domain(name, t), value))
    if pa.types.is_floating(t):
        q = literal(_domain(name, t), value)
        return _apply(ref, op, pa.scalar(float(q), pa.float64()))
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        if isinstance(value, bytes):
            ref = ref.cast(pa.large_binary())
            return _apply(ref, op, pa.scalar(value, pa.large_binary()))
        if not isinstance(value, str):
            raise bad_literal(Domain(name, str(t), KIND_BYTES), value)
        return _apply(ref, op, pa.scalar(value, t))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) \
            or pa.types.is_binary_view(t):
        if pa.types.is_fixed_size_binary(t):
            ref = ref.cast(pa.binary())
        return _apply(ref, op, pa.scalar(literal(Domain(name, str(t), KIND_BYTES), value), pa.binary()))
    raise PredicateError(f"column {name!r} of type {t} cannot be compared")


def _apply(ref, op, s):
    return {"==": ref == s, "!=": ref != s, "<": ref < s, "<=": ref <= s, ">": ref > s, ">=": ref >= s}[op]


def to_arrow(e: E.Expr, schema: pa.Schema) -> pc.Expression:
    """The pyarrow compute expression with exactly the documented semantics."""
    if isinstance(e, E.And):
        out = to_arrow(e.children[0], schema)
        for c in e.children[1:]:
            out = out & to_arrow(c, schema)
        return out
    if isinstance(e, E.Or):
        out = to_arrow(e.children[0], schema)
        for c in e.children[1:]:
            out = out | to_arrow(c, schema)
        return out
    if isinstance(e, E.Not):
        return ~to_arrow(e.child, schema)
    if isinstance(e, E.Literal):
        return pc.scalar(bool(e.value))
    if isinstance(e, E.IsNull):
        return pc.is_null(_field_ref(e.column, schema, e.exact)[0], nan_is_null=False)
    if isinstance(e, E.IsNotNull):
        return pc.is_valid(_field_ref(e.column, schema, e.exact)[0])
    if isinstance(e, E.Cmp):
        return _leaf_cmp(e.column, e.op, e.value, schema, e.exact)
    if isinstance(e, E.Between):
        lo, hi = e.lo, e.hi
        if _ordered_key(e.column, lo, schema, e.exact) > _ordered_key(e.column, hi, schema, e.exact):
            lo, hi = hi, lo  # reversed bounds are swapped, as pruning does
        return _leaf_cmp(e.column, ">=", lo, schema, e.exact) & _leaf_cmp(e.column, "<=", hi, schema, e.exact)
    if isinstance(e, E.In):
        vals = [v for v in e.values if v is not None]
        out = None
        for v in vals:
            term = _leaf_cmp(e.column, "==", v, schema, e.exact)
            out = term if out is None else (out | term)
        # IN never yields null (pyarrow MATCH): null rows match only when None is listed.
        ref = _field_ref(e.column, schema, e.exact)[0]
        out = pc.scalar(False) if out is None else pc.if_else(pc.is_valid(ref), out, pa.scalar(False))
        if len(vals) != len(e.values):
            out = out | pc.is_null(ref, nan_is_null=False)
        return out
    raise PredicateError(f"not a predicate: {e!r}")


def _ordered_key(name, value, schema, exact=True):
    """The literal in the column's own order, to decide whether BETWEEN bounds are reversed."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)  # FALSE < TRUE (a non-BOOLEAN column refuses it in _leaf_cmp)
    _, t = _field_ref(name, schema, exact)
    if isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if _is_int_valued(t) or pa.types.is_floating(t):
        return literal(_domain(name, t), value)  # Fraction, or float for NaN / inf
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, uuid.UUID):
        return value.bytes
    return value


def filter_table(table: pa.Table, e: E.Expr) -> pa.Table:
    """Rows of `table` for which the predicate is TRUE."""
    if e is None:
        return table
    return table.filter(to_arrow(e, table.schema))
