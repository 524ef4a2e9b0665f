"""Predicates → row-group masks. Pure functions over arrays: no file I/O here.

A mask is True where a row group MAY hold a row for which the predicate is TRUE. Every rule is
conservative: when in doubt, True. NOT is pushed to the leaves first (expr.nnf), so combining
leaf masks with & and | stays sound.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import ipaddress
import math
import operator
import struct
import uuid
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from . import expr as E
from ..pm import layout as L
from ..errors import PredicateError
from .stats import (KIND_ANYSIGN, KIND_BIGDEC, KIND_BYTES, KIND_FLOAT, KIND_INT, KIND_NONE, KIND_UINT, ByteValues,
                    ColumnType)

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
        "!=": operator.ne}
UNIT_PER_SECOND = {"days": Fraction(1, 86400), "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
NAN = float("nan")


# --- literal conversion ---------------------------------------------------------------------


def _bad(ct: ColumnType, value, why=""):
    return PredicateError(f"literal {value!r} does not fit column {ct.name!r} "
                          f"({L.qdb_type_name(ct.type_code)} on {L.PHYSICAL_TYPE_NAMES[ct.physical_type]}){why}")


def _datetime_units(ct, value) -> Fraction:
    """A temporal literal in the column's units since the epoch, exactly."""
    per_s = Fraction(UNIT_PER_SECOND[ct.unit])
    if hasattr(value, "asm8"):  # pandas Timestamp: keep its nanoseconds
        value = value.asm8
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            raise _bad(ct, value, ": NaT is a null, use is_null()")
        unit, count = np.datetime_data(value.dtype)
        per = {"D": 86400, "h": 3600, "m": 60, "s": 1, "ms": Fraction(1, 1000), "us": Fraction(1, 10**6),
               "ns": Fraction(1, 10**9), "W": 7 * 86400}.get(unit)
        if per is None:
            raise _bad(ct, value, f": datetime64 unit {unit!r} is not supported")
        return Fraction(int(value.astype(np.int64))) * count * per * per_s
    if isinstance(value, str):
        try:
            value = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise _bad(ct, value, ": not an ISO-8601 date/time") from None
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)  # naive means UTC, as Parquet's instants
        d = value - _EPOCH
        micros = (d.days * 86400 + d.seconds) * 10**6 + d.microseconds
        return Fraction(micros, 10**6) * per_s
    if isinstance(value, _dt.date):
        return Fraction((value - _dt.date(1970, 1, 1)).days * 86400) * per_s
    if isinstance(value, (bool, np.bool_)):
        raise _bad(ct, value)
    return _number(ct, value)


def _number(ct, value) -> Fraction | float:
    """An exact numeric literal; float NaN / inf are returned as floats."""
    if isinstance(value, (bool, np.bool_)):
        return Fraction(int(value))
    if isinstance(value, (np.timedelta64, np.datetime64)):
        raise _bad(ct, value)  # np.timedelta64 is an np.integer, but its number is not the column's
    if isinstance(value, (int, np.integer)):
        return Fraction(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isnan(v) or math.isinf(v) else Fraction(v)
    if isinstance(value, decimal.Decimal):
        if value.is_nan():
            return NAN
        if value.is_infinite():
            return float(value)
        return Fraction(value)
    if isinstance(value, Fraction):
        return value
    raise _bad(ct, value)


def _scaled(ct, value):
    if ct.scale is not None and isinstance(value, (float, np.floating)) and math.isfinite(value):
        value = decimal.Decimal(repr(float(value)))  # 0.02 means the decimal 0.02, not its binary double
    v = _number(ct, value) if not isinstance(value, str) else _parse_number(ct, value)
    if ct.scale and isinstance(v, Fraction):
        v = v * 10**ct.scale
    return v


def _parse_number(ct, s):
    try:
        return _number(ct, decimal.Decimal(s.strip()))
    except decimal.InvalidOperation:
        raise _bad(ct, s, ": not a number") from None


def not_boolean(name, type_name):
    return PredicateError(f"column {name!r} is {type_name}, not BOOLEAN: only a BOOLEAN column stands alone as a "
                          f"condition, takes IS [NOT] TRUE / FALSE or compares with TRUE / FALSE")


def literal(ct: ColumnType, value):
    """The literal in the column's comparison domain: Fraction / float for numbers, bytes, int."""
    kind = ct.kind
    if isinstance(value, (bool, np.bool_)) and ct.physical_type != L.PT_BOOLEAN:
        raise not_boolean(ct.name, f"{L.qdb_type_name(ct.type_code)} on {L.PHYSICAL_TYPE_NAMES[ct.physical_type]}")
    if kind in (KIND_INT, KIND_UINT, KIND_ANYSIGN):
        if ct.unit is not None:
            return _datetime_units(ct, value)
        if ct.tag == L.QDB_IPV4 and isinstance(value, str):
            try:
                return Fraction(int(ipaddress.IPv4Address(value)))
            except ValueError:
                raise _bad(ct, value, ": not an IPv4 address") from None
        if ct.tag == L.QDB_CHAR and isinstance(value, str):
            if len(value) != 1:
                raise _bad(ct, value, ": CHAR takes one character")
            return Fraction(ord(value))
        if isinstance(value, str):
            return _scaled(ct, value)
        return _scaled(ct, value)
    if kind == KIND_FLOAT:
        return _parse_number(ct, value) if isinstance(value, str) else _number(ct, value)
    if kind == KIND_BIGDEC:
        return _scaled(ct, value)
    if kind == KIND_BYTES:
        if isinstance(value, uuid.UUID):
            return value.bytes
        if isinstance(value, str):
            if ct.tag == L.QDB_UUID:
                try:
                    return uuid.UUID(value).bytes
                except ValueError:
                    raise _bad(ct, value, ": not a UUID") from None
            return value.encode("utf-8")
        if isinstance(value, (bytes, bytearray, memoryview, np.bytes_)):
            return bytes(value)
        raise _bad(ct, value)
    return value  # KIND_NONE: only null-count rules apply, the literal is never compared


# --- integer / float bounds -----------------------------------------------------------------

ALWAYS, NEVER = "always", "never"


def _int_bound(op, q):
    """For integer columns: the integer c with (x op q) == (x op' c), or ALWAYS / NEVER."""
    if isinstance(q, float):  # NaN or +-inf
        if math.isnan(q):
            return ALWAYS if op == "!=" else NEVER  # NaN compares FALSE with everything but !=
        if op in ("<", "<="):
            return ALWAYS if q > 0 else NEVER
        if op in (">", ">="):
            return NEVER if q > 0 else ALWAYS
        return NEVER if op == "==" else ALWAYS
    if op == "<":
        return math.ceil(q)  # x < q  <=>  x < ceil(q)
    if op == "<=":
        return math.floor(q)
    if op == ">":
        return math.floor(q)
    if op == ">=":
        return math.ceil(q)
    if op == "==":
        return int(q) if q.denominator == 1 else NEVER
    return int(q) if q.denominator == 1 else ALWAYS  # !=


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


def _cmp(arr, op, c, lo_kind=None):
    """arr op c for int64 / uint64 arrays and Python ints that may fall outside their range."""
    lo, hi = (0, (1 << 64) - 1) if arr.dtype == np.uint64 else (I64_MIN, I64_MAX)
    if c > hi:
        return np.full(arr.shape, op in ("<", "<=", "!="))
    if c < lo:
        return np.full(arr.shape, op in (">", ">=", "!="))
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


# --- bound predicates -----------------------------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    kind: str  # "cmp", "notcmp", "in", "notin", "isnull", "notnull", "const"
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


def _hash_for_bloom(ct: ColumnType, v):
    """XXH64 of the literal's Parquet PLAIN bytes, or None when it cannot be encoded exactly."""
    from ..bloom.sbbf import xxh64

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
                if v.denominator != 1 or ct.fixed_byte_len > 64:
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


def _bind_leaf(e, schema):
    ct = schema.column(e.column, e.exact)
    if ct.repeated:
        raise PredicateError(f"column {ct.name!r} is a repeated (list) leaf; qdbpm predicates take flat columns")
    if isinstance(e, E.IsNull):
        return Leaf("isnull", ct)
    if isinstance(e, E.IsNotNull):
        return Leaf("notnull", ct)
    if isinstance(e, (E.Cmp, E.NotCmp)):
        v = literal(ct, e.value)
        h = _hash_for_bloom(ct, v) if isinstance(e, E.Cmp) and e.op == "==" and ct.kind != KIND_NONE else None
        return Leaf("cmp" if isinstance(e, E.Cmp) else "notcmp", ct, e.op, v,
                    None if h is None else np.array([h], np.uint64))
    if isinstance(e, (E.Between, E.NotBetween)):
        lo, hi = literal(ct, e.lo), literal(ct, e.hi)
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
        dom = [literal(ct, v) for v in vals]
        hashes = None
        if isinstance(e, E.In) and ct.kind != KIND_NONE:
            hs = [_hash_for_bloom(ct, v) for v in dom]
            if all(h is not None for h in hs):
                hashes = np.array(hs, np.uint64)
        return Leaf("in" if isinstance(e, E.In) else "notin", ct, None, tuple(dom), hashes, null_in)
    raise PredicateError(f"not a predicate: {e!r}")


def _is_num(v):
    return isinstance(v, (Fraction, float))


def bind(expr: E.Expr, schema) -> object:
    """Push NOT down and convert every literal to its column's domain (done once per schema:
    the result is cached on the schema, keyed by the expression and its literals' exact types)."""
    if not isinstance(expr, E.Expr):
        raise PredicateError(f"not a predicate: {expr!r}")
    cache = getattr(schema, "bound", None)
    key = None
    if cache is not None:
        sig = _literal_types(expr, [])
        if sig is not None:
            key = (expr, tuple(sig))
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
    return _bind_leaf(e, schema)


def bound_columns(b) -> set:
    if isinstance(b, Node):
        out = set()
        for c in b.children:
            out |= bound_columns(c)
        return out
    return set() if b.ct is None else {b.ct.index}


# --- evaluation -----------------------------------------------------------------------------


MAX_ANYSIGN_COLUMNS = 3  # readings tried jointly: 2**3 evaluations at most


def evaluate(b, n_rows: int, stats, blooms=None) -> np.ndarray:
    """Mask over `n_rows` row groups. stats(col) -> ColumnStats; blooms(col) -> (data, offsets,
    lengths) or None. Both are lookups over data already in memory."""
    anysign = sorted(_anysign_columns(b))
    if not anysign or len(anysign) > MAX_ANYSIGN_COLUMNS:
        # Beyond the cap each leaf ORs both readings on its own: sound, only less sharp.
        return _evaluate(b, n_rows, stats, blooms)
    # A typeless integer column is signed or unsigned, the same for the whole predicate: evaluate
    # it under each joint reading and keep a row group any reading keeps. Leaf by leaf ORing
    # would let `x >= 0 AND x <= 0` pass on 2^63 (>= 0 unsigned, <= 0 signed). A reading under
    # which a row group's min > max is not its writer's order, so it adds nothing for that row
    # group (decided per row group: a Table pass concatenates files of either order).
    out = np.zeros(n_rows, bool)
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

        out |= _evaluate(b, n_rows, fixed, blooms) & possible
        if out.all():
            break
    return out


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
    from .stats import ColumnStats

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
    s = stats(b.ct.index)
    return _leaf_mask(b, s, blooms)


def _leaf_mask(b: Leaf, s, blooms) -> np.ndarray:
    kind = s.kind
    if b.kind == "isnull":
        # Only a known null count of 0 proves there is no null.
        return ~s._no_nulls
    if b.kind == "notnull":
        return ~s._all_null
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


def _equals_everywhere(v, s):
    """Row groups whose every non-null value is exactly v."""
    if s.kind in (KIND_INT, KIND_UINT, KIND_ANYSIGN):
        c = _int_bound("==", v)
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
        c = _int_bound(op, v)
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
        c = _int_bound(op, v)
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
    from ..bloom.sbbf import probe_many

    data, offsets, lengths = idx
    # Absent filters (length < 0) answer "may contain".
    return probe_many(b.hashes, data, offsets, lengths, any_of=True)


# --- designated-timestamp search ------------------------------------------------------------


def timestamp_find(mins: np.ndarray, maxs: np.ndarray, ts: int, num_rows=None) -> int:
    """docs/format.md#timestamp-lookup over row groups sorted by timestamp: 2*rg+1 when ts is
    before row group rg (in the gap before it), 2*(rg+1) when inside it, 2*count+1 after the
    last one. Empty row groups (num_rows == 0) are skipped."""
    count = len(mins)
    live = np.ones(count, bool) if num_rows is None else np.asarray(num_rows) > 0
    idx = np.nonzero(live)[0]
    if idx.size == 0:
        return 2 * count + 1
    lo_arr, hi_arr = np.asarray(mins)[idx], np.asarray(maxs)[idx]
    # first live row group whose max >= ts
    k = int(np.searchsorted(hi_arr, ts, side="left"))
    if k == idx.size:
        return 2 * count + 1
    rg = int(idx[k])
    if ts < lo_arr[k]:
        return 2 * rg + 1
    return 2 * (rg + 1)


def timestamp_range(mins: np.ndarray, maxs: np.ndarray, lo: int, hi: int) -> tuple[int, int]:
    """[first, last) row groups that may overlap [lo, hi), for row groups sorted by timestamp."""
    first = int(np.searchsorted(np.asarray(maxs), lo, side="left"))
    last = int(np.searchsorted(np.asarray(mins), hi, side="left"))
    return first, max(first, last)
