"""DuckDB's numeric conversions as Arrow expressions, where pyarrow's own differ: the exact filter
(`prune.arrow`) means what DuckDB computes. No I/O; nothing here knows a schema (`scale` asks its
caller for a column's Arrow type).

- A DECIMAL becoming a DOUBLE is the double nearest its value (pyarrow multiplies by an inexact
  10^-scale: 7.60 became 7.6000000000000005, above the literal 7.6; 13 % of random DECIMAL(9, 2)
  values came out an ulp off); an integer past 2^53 rounds (pyarrow's safe cast refuses it).
- A UINT64 value is a DECIMAL(20, 0): BIGINT arithmetic overflows from 2^63 on.
- CAST(integer AS DECIMAL(p, s)) checks the value, not the integer type's digits; CAST of a DECIMAL
  to a smaller scale rounds half away from zero (pyarrow refuses "data loss").
- CASE branches of DECIMALs of other types meet at DECIMAL(38, their largest scale) (pyarrow's
  if_else takes one type); a CASE with one value that is not NULL keeps its type, as DuckDB's.
"""

from __future__ import annotations

import decimal

import pyarrow as pa
import pyarrow.compute as pc

from . import residual as R

UINT64 = pa.decimal128(20, 0)


def to_double(e, kind):
    """Expression `e` of residual type `kind` ("decimal", "int", "float", ...) as a DOUBLE."""
    if kind == "decimal":  # its text is exact, and Arrow parses text correctly rounded
        return e.cast(pa.string()).cast(pa.float64())
    return e.cast(pa.float64(), safe=kind != "int")


def to_decimal(e, kind, p, s, from_scale=None):
    """CAST(e AS DECIMAL(p, s)) of an "int" or "decimal" `e` (of scale `from_scale`, None: unknown)."""
    t = pa.decimal128(p, s) if p <= 38 else pa.decimal256(p, s)
    if kind == "int" and s <= 19:
        e = e.cast(pa.decimal128(38, s))  # then the cast to (p, s) checks each value against p
    elif kind == "decimal" and (from_scale is None or from_scale > s):
        e = pc.round(e, ndigits=s, round_mode="half_towards_infinity")
    return e.cast(t), t


def int_as_decimal(e, node):
    """Integer value `node` (a residual node; its Arrow expression `e`) joining DECIMAL arithmetic: a
    literal as DECIMAL(its digits, 0) (DuckDB: DECIMAL(18, 4) * 2 is a DECIMAL(18, 4)), anything
    else as a BIGINT's DECIMAL(19, 0). pyarrow's result precision adds the operands' (p1 + p2 + 1
    for *), so 19 digits for a literal 2 put `dec * dec * 2` past 38 and refused it; and pyarrow
    casts an int64 to no DECIMAL narrower than 19, so the literal is made one."""
    if isinstance(node, R.Const) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return pc.scalar(pa.scalar(decimal.Decimal(node.value), pa.decimal128(len(str(abs(node.value))), 0)))
    return e.cast(pa.decimal128(19, 0))


def case_type(scales):
    """The type CASE branches of DECIMAL scales `scales` meet at, or None when one is unknown."""
    return None if not scales or None in scales else pa.decimal128(38, max(scales))


def case_common(values, ref_type):
    """case_type of CASE values `values` (residual nodes): None where at most one is not NULL, whose
    own type the CASE keeps (DuckDB: CASE WHEN c THEN DECIMAL(15,2) END is a DECIMAL(15,2))."""
    known = [v for v in values if not (isinstance(v, R.Const) and v.value is None)]
    return case_type([scale(v, ref_type) for v in known]) if len(known) > 1 else None


def scale(v, ref_type):
    """The scale of DECIMAL (or integer: 0) value `v` (a residual node) as pyarrow computes it,
    None where not known; `ref_type(ref)` is a column's Arrow type as the filter reads it."""
    if isinstance(v, R.Const):
        if v.value is None:
            return 0
        if isinstance(v.value, bool) or not isinstance(v.value, (int, decimal.Decimal)):
            return None
        return pa.scalar(v.value).type.scale if isinstance(v.value, decimal.Decimal) else 0
    if isinstance(v, R.Ref):
        t = ref_type(v)
        return t.scale if pa.types.is_decimal(t) else 0 if pa.types.is_integer(t) else None
    if isinstance(v, R.Arith) and v.op != "/":
        a, b = scale(v.left, ref_type), scale(v.right, ref_type)
        return None if a is None or b is None else a + b if v.op == "*" else max(a, b)
    if isinstance(v, R.Neg):
        return scale(v.arg, ref_type)
    if isinstance(v, R.Func) and v.name in ("abs", "coalesce"):
        return _largest([scale(a, ref_type) for a in v.args])
    if isinstance(v, R.Cast) and v.to.startswith("DECIMAL"):
        return int(v.to[8:-1].split(",")[1])
    if isinstance(v, R.Case):
        return _largest([scale(x, ref_type) for x in [w[1] for w in v.whens] + [v.default]])
    return None


def _largest(scales):
    return None if None in scales else max(scales)
