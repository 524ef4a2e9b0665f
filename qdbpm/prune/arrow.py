"""Predicates as pyarrow compute expressions: the exact row filter behind `read_table`.

Literals are converted to the column's Arrow type exactly (an integer column compared with 2.5,
a millisecond column with a microsecond instant): the comparison is rewritten to an equivalent
one against a representable value, so results match the semantics in `expr`'s docstring.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import expr as E
from . import residual as R
from .literals import ALWAYS, NEVER, Domain, bad_literal, int_bound, literal, not_boolean, out_of_range
from .names import Names
from . import numbers as N
from .rows import unscaled_type
from .staged import filtered
from .. import arrays
from ..errors import PredicateError
from ..pm.qdb_types import KIND_BYTES, KIND_FLOAT, KIND_INT

_FALSE = arrays.scalar(False, pa.bool_())  # an IN's answer for a null row, a CASE's null condition


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


def _int_cmp(ref, t, op, q, carrier=None):
    """ref op q for an integer-valued column, q exact; rewritten to stay representable. `carrier`:
    the integer type the column's values are held in, unscaled (`unscaled_field`), else None."""
    c = int_bound(op, q)
    if c == ALWAYS or c == NEVER:
        return _false_unless_null(ref, c == ALWAYS)
    truth = out_of_range(op, c, *_int_range(t))
    if truth is not None:
        return _false_unless_null(ref, truth)
    return _apply(ref, op, arrays.scalar(c, carrier) if carrier is not None else _scalar(t, c))


def _false_unless_null(ref, truth: bool):
    """TRUE (or FALSE) for every non-null value and null for nulls, like a real comparison."""
    valid = pc.is_valid(ref)
    return pc.if_else(valid, arrays.scalar(truth, pa.bool_()), arrays.scalar(None, pa.bool_()))


def _scalar(t, k: int):
    """The value of integer k (in the column's units) as a scalar of type t."""
    if pa.types.is_decimal(t):
        return arrays.unscaled(k, t)
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return arrays.scalar(k, pa.int32()).cast(t)
    if _is_temporal(t):
        return arrays.scalar(k, pa.int64()).cast(t)
    return arrays.scalar(k, t)


def _leaf_cmp(name, op, value, schema, exact=True):
    ref, t = _field_ref(name, schema, exact)
    dec = unscaled_type(name, schema, exact) if t == pa.int64() else None  # held columns are int64
    if dec is not None:
        if isinstance(value, (bool, np.bool_)):
            raise not_boolean(name, str(dec))
        return _int_cmp(ref, dec, op, literal(_domain(name, dec), value), carrier=pa.int64())
    if isinstance(t, pa.BaseExtensionType):
        ref, t = ref.cast(t.storage_type), t.storage_type
        if isinstance(value, uuid.UUID):
            value = value.bytes
    if pa.types.is_dictionary(t):
        ref, t = ref.cast(t.value_type), t.value_type
    if pa.types.is_boolean(t):
        if isinstance(value, (bool, np.bool_)):
            return _apply(ref, op, arrays.scalar(bool(value), pa.bool_()))
        # A number compares with FALSE / TRUE as 0 / 1 (as pruning does, and DuckDB).
        i8 = pa.int8()
        return _int_cmp(ref.cast(i8), i8, op, literal(_domain(name, t), value))
    if isinstance(value, (bool, np.bool_)):
        raise not_boolean(name, str(t))
    if _is_int_valued(t):
        return _int_cmp(ref, t, op, literal(_domain(name, t), value))
    if pa.types.is_floating(t):
        q = literal(_domain(name, t), value)
        return _apply(ref, op, arrays.scalar(float(q), pa.float64()))
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        if isinstance(value, bytes):
            ref = ref.cast(pa.large_binary())
            return _apply(ref, op, arrays.scalar(value, pa.large_binary()))
        if not isinstance(value, str):
            raise bad_literal(Domain(name, str(t), KIND_BYTES), value)
        return _apply(ref, op, arrays.scalar(value, t))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) \
            or pa.types.is_binary_view(t):
        if pa.types.is_fixed_size_binary(t):
            ref = ref.cast(pa.binary())
        return _apply(ref, op, arrays.scalar(literal(Domain(name, str(t), KIND_BYTES), value), pa.binary()))
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
        return pc.scalar(arrays.scalar(bool(e.value), pa.bool_()))
    if isinstance(e, R.Residual):
        for name in e.columns():
            if unscaled_type(name, schema, False) is not None:
                raise PredicateError(f"column {name!r} is held unscaled; a residual needs its decimal values")
        R.check(e, lambda name, exact: value_type(_field_ref(name, schema, exact)[1]), lambda x: to_arrow(x, schema))
        return _residual(e, schema)
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
        out = pc.scalar(_FALSE) if out is None else pc.if_else(pc.is_valid(ref), out, _FALSE)
        if len(vals) != len(e.values):
            out = out | pc.is_null(ref, nan_is_null=False)
        return out
    raise PredicateError(f"not a predicate: {e!r}")


def _ordered_key(name, value, schema, exact=True):
    """The literal in the column's own order, to decide whether BETWEEN bounds are reversed."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)  # FALSE < TRUE (a non-BOOLEAN column refuses it in _leaf_cmp)
    _, t = _field_ref(name, schema, exact)
    t = (unscaled_type(name, schema, exact) if t == pa.int64() else None) or t
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


def filter_table(table: pa.Table, e: E.Expr, where="the rows") -> pa.Table:
    """Rows of `table` where the predicate is TRUE, in stages (prune.staged): EvaluationError names `where`."""
    return filtered(table, e, to_arrow, where)


# --- residuals (prune.residual): SQL values and conditions, Kleene logic -------------------------


def value_type(t) -> str:
    """An Arrow type in residual.check's terms."""
    t = _plain_type(t)
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "str"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "bytes"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    return "other"


def _plain_type(t):
    if isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
    return t.value_type if pa.types.is_dictionary(t) else t


def _residual(e, schema) -> pc.Expression:
    if isinstance(e, R.Negated):
        return ~_residual(e.child, schema)
    if isinstance(e, R.Compare):
        a, b = _pair(e.left, e.right, schema)
        return _apply(a, e.op, b)
    if isinstance(e, R.Distinct):
        a, b = _pair(e.left, e.right, schema)
        va, vb = pc.is_valid(a), pc.is_valid(b)
        return pc.if_else(va & vb, a != b, pc.xor(va, vb))  # never null; NaN != NaN as with !=
    if isinstance(e, R.InList):
        vals = [v for v in e.values if v is not None]
        x = _value(e.arg, schema)
        out = pc.scalar(_FALSE)
        for v in vals:
            a, b = _pair(e.arg, R.Const(v), schema)
            out = out | (a == b)
        out = pc.if_else(pc.is_valid(x[0]), out, _FALSE)  # never null, as expr.In
        return out | pc.is_null(x[0], nan_is_null=False) if len(vals) != len(e.values) else out
    if isinstance(e, R.IsNullOf):
        return pc.is_null(_value(e.arg, schema)[0], nan_is_null=False)
    if isinstance(e, R.Truth):
        return _value(e.arg, schema)[0]
    if isinstance(e, R.Like):
        x = _string(_value(e.arg, schema))
        return pc.match_like(x, pattern=R.arrow_like_pattern(e.pattern, e.escape), ignore_case=e.ignore_case)
    if isinstance(e, R.StartsWith):
        return pc.starts_with(_string(_value(e.arg, schema)), pattern=e.prefix)
    raise PredicateError(f"not a predicate: {e!r}")


def _string(v):
    return v[0] if v[2] is None or not pa.types.is_string_view(v[2]) else v[0].cast(pa.string())


def _value(v, schema, want=None):
    """(expression, residual type, Arrow type or None where pyarrow's own promotion decides) of
    value v; a literal takes the type `want` (a (type, Arrow type) pair) when given."""
    if isinstance(v, R.Ref):
        ref, t = _field_ref(v.column, schema, v.exact)
        if isinstance(t, pa.BaseExtensionType):
            ref, t = ref.cast(t.storage_type), t.storage_type
        if pa.types.is_dictionary(t):
            ref, t = ref.cast(t.value_type), t.value_type
        if pa.types.is_uint64(t):  # BIGINT holds no value from 2^63 on; DECIMAL(20, 0) holds them all
            return ref.cast(N.UINT64), "decimal", N.UINT64
        return ref, value_type(t), t
    if isinstance(v, R.Const):
        return _const(v.value, want)
    if isinstance(v, R.Arith):
        a, b = _value(v.left, schema), _value(v.right, schema)
        if a[1] == "null" or b[1] == "null":
            a, b = _pair(v.left, v.right, schema)
            a, b = (a, None, None), (b, None, None)
        if v.op == "/" or "float" in (a[1], b[1]):
            x, y = N.to_double(a[0], a[1]), N.to_double(b[0], b[1])
            if v.op == "/":
                return pc.divide(x, y), "float", pa.float64()
            out, t = x, "float"
        elif a[1] == "int" and b[1] == "int":
            x, y, t = a[0].cast(pa.int64()), b[0].cast(pa.int64()), "int"
        else:  # pyarrow scales decimals as SQL does; an integer joins as a DECIMAL (N.int_as_decimal)
            x, y, t = _as_decimal(a, v.left), _as_decimal(b, v.right), "decimal"
        fn = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}[v.op]
        return fn(x, y), t, {"int": pa.int64(), "float": pa.float64()}.get(t)
    if isinstance(v, R.Neg):
        x = _value(v.arg, schema)
        return pc.negate_checked(x[0]), x[1], x[2]
    if isinstance(v, R.Func):
        return _func(v, schema)
    if isinstance(v, R.Cast):
        return _cast(v, schema)
    if isinstance(v, R.Condition):
        return to_arrow(v.cond, schema), "bool", pa.bool_()
    if isinstance(v, R.Case):
        vals = [w[1] for w in v.whens] + [v.default]
        exprs, t, at = _common(vals, schema)
        common = N.case_common(vals, lambda r: _value(r, schema)[2]) if t == "decimal" else None
        if common is not None:  # if_else takes one type
            at, exprs = common, [e.cast(common) for e in exprs]
        out = exprs[-1]
        for (cond, _), x in reversed(list(zip(v.whens, exprs[:-1]))):
            out = pc.if_else(pc.coalesce(to_arrow(cond, schema), _FALSE), x, out)  # null: not taken
        return out, t, at
    raise PredicateError(f"not a value: {v!r}")


def _const(value, want=None):
    t, at = want if want is not None else (R.const_type(value), None)
    if value is None:
        return pc.scalar(arrays.scalar(None, at or pa.null())), "null", at
    if isinstance(value, str) and t in R.TEMPORAL:
        value = R.parse_temporal(value, t)
    if t == "float":
        return pc.scalar(arrays.scalar(float(value), pa.float64())), t, pa.float64()
    if isinstance(value, bool) or t == "str":
        plain = pa.bool_() if isinstance(value, bool) else pa.string() if isinstance(value, str) else None
        return pc.scalar(value if plain is None else arrays.scalar(value, plain)), R.const_type(value), None
    if isinstance(value, int) and t == "int" and -(1 << 63) <= value < (1 << 63):  # else a DECIMAL (HUGEINT)
        return pc.scalar(arrays.scalar(value, pa.int64())), t, pa.int64()
    if isinstance(value, (int, decimal.Decimal)):
        return pc.scalar(pa.scalar(decimal.Decimal(value))), "decimal", None
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            s = arrays.scalar(value.astimezone(dt.timezone.utc).replace(tzinfo=None), pa.timestamp("us")).cast(
                pa.timestamp("us", "UTC"))
        else:
            s = arrays.scalar(value, pa.timestamp("us"))
    elif isinstance(value, dt.date):
        s = arrays.scalar(value, pa.date32())
    else:
        return pc.scalar(value), R.const_type(value), None
    if at is not None and at != s.type:
        s = _temporal_cast(s, at)
    return pc.scalar(s), R.const_type(value) if at is None else t, s.type


def _temporal_cast(x, at):
    """A DATE / TIMESTAMP (scalar or expression) as Arrow type `at` (naive taken as UTC)."""
    if pa.types.is_timestamp(at) and isinstance(x, pa.Scalar) and pa.types.is_timestamp(x.type) \
            and x.type.tz is None and at.tz is not None:
        return x.cast(pa.timestamp(x.type.unit, "UTC")).cast(at)
    return x.cast(at)


def _finer(a, b):
    """The Arrow type two DATE / TIMESTAMP types compare in: the finer unit, a zone if either has one."""
    if pa.types.is_date(a) and pa.types.is_date(b):
        return pa.date32()
    units = ["s", "ms", "us", "ns"]
    ua = a.unit if pa.types.is_timestamp(a) else "s"
    ub = b.unit if pa.types.is_timestamp(b) else "s"
    tz = next((t.tz for t in (a, b) if pa.types.is_timestamp(t) and t.tz is not None), None)
    return pa.timestamp(max(ua, ub, key=units.index), tz)


def _pair(left, right, schema):
    exprs, _, _ = _common([left, right], schema)
    return exprs


def _common(values, schema):
    """Expressions of `values` cast to one type (as residual.check unified them), with it."""
    typed = [None if isinstance(v, R.Const) else _value(v, schema) for v in values]
    known = [x for x in typed if x is not None and x[1] != "null"]
    t = "null"
    for x in known:
        t = R.unify(t, x[1], values)
    for v in values:
        if isinstance(v, R.Const) and not (isinstance(v.value, str) and t in R.TEMPORAL):
            t = R.unify(t, R.const_type(v.value), values)
    at = None
    if t in R.TEMPORAL:
        for x in known:
            at = x[2] if at is None else _finer(at, x[2])
        for v in values:
            if isinstance(v, R.Const) and v.value is not None:
                c = _const(v.value, (t, None))
                at = c[2] if at is None else _finer(at, c[2])
    elif t == "int":
        at = pa.int64()
    elif t == "float":
        at = pa.float64()
    elif t == "str" and any(x[2] is not None and not pa.types.is_string(x[2]) for x in known):
        at = pa.large_string()
    out = []
    for v, x in zip(values, typed):
        if x is not None and t == "decimal":
            out.append(_as_decimal(x))
        elif x is None:
            out.append(_const(v.value, (t, at))[0])
        elif t == "float" and x[1] in ("decimal", "int"):
            out.append(N.to_double(x[0], x[1]))
        elif at is not None and x[2] != at:
            out.append(x[0].cast(at) if not (t in R.TEMPORAL and x[2] is not None and pa.types.is_timestamp(x[2])
                                              and x[2].tz is None and at.tz is not None)
                       else x[0].cast(pa.timestamp(x[2].unit, "UTC")).cast(at))
        else:
            out.append(x[0])
    return out, t, at


def _as_decimal(x, node=None):  # an integer as a DECIMAL (N.int_as_decimal)
    return N.int_as_decimal(x[0], node) if x[1] == "int" else x[0]


def _func(f, schema):
    name = f.name
    if name == "coalesce":
        exprs, t, at = _common(list(f.args), schema)
        return pc.coalesce(*exprs), t, at
    if name == "date_trunc":
        x = _value(f.args[1], schema)
        return pc.floor_temporal(x[0], unit=f.args[0].value.lower(), week_starts_monday=True), x[1], x[2]
    x = _value(f.args[0], schema)
    if name in ("year", "month", "day"):
        return getattr(pc, name)(x[0]), "int", pa.int64()
    if name in ("lower", "upper"):
        return getattr(pc, "utf8_" + name)(_string(x)), "str", None
    if name == "length":
        return pc.utf8_length(_string(x)).cast(pa.int64()), "int", pa.int64()
    if name == "substring":
        begin, end = R.substring_slice(*R.substring_args(f.args))
        return pc.utf8_slice_codeunits(_string(x), start=begin, stop=end), "str", None
    if name == "abs":
        return pc.abs_checked(x[0]), x[1], x[2]
    raise PredicateError(f"unknown function {name}")


def _cast(c, schema):
    x = _value(c.arg, schema)
    e, src, to = x[0], x[1], c.to
    if to.startswith("DECIMAL"):
        p, s = map(int, to[8:-1].split(","))
        e, t = N.to_decimal(e, src, p, s, N.scale(c.arg, lambda r: _value(r, schema)[2]) if src == "decimal" else None)
        return e, "decimal", t
    if to == "DOUBLE":
        return N.to_double(e, src), "float", pa.float64()
    if to in R.INT_BITS:  # a narrower type's range checked by a safe cast to it: a value outside raises
        if src == "float":
            e = pc.round(e, round_mode="half_to_even")  # as DuckDB rounds a DOUBLE to an integer
        narrow = e if to == "BIGINT" else e.cast(getattr(pa, f"int{R.INT_BITS[to]}")())
        return narrow.cast(pa.int64()), "int", pa.int64()
    if to == "VARCHAR":
        return e.cast(pa.string()), "str", pa.string()
    if to == "DATE":
        if src == "timestamp":
            e = pc.floor_temporal(e, unit="day")
        return e.cast(pa.date32()), "date", pa.date32()
    if to == "TIMESTAMP":
        t = pa.timestamp(x[2].unit if x[2] is not None and pa.types.is_timestamp(x[2]) else "us")
        return e.cast(t), "timestamp", t
    return e, "bool", pa.bool_()  # BOOLEAN of a BOOLEAN
