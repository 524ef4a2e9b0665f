"""Literal semantics: how a Python literal maps into a column's comparison domain. The one home
of them, shared by pruning (bind.py, against stats) and the exact filter (arrow.py, against
values), so both read `x < 2.5` or `ts >= '2024-01-01'` the same way.

The domain value is exact: numbers become Fractions (float NaN / inf stay floats); a temporal
literal (datetime, date, ISO-8601 string, numpy datetime64, pandas Timestamp) becomes the
column's units since the epoch, naive meaning UTC; a decimal column takes the unscaled value,
and a float literal there means its shortest decimal repr (0.02 is 0.02, not its binary double);
byte-string columns take bytes (str as UTF-8, a UUID string or uuid.UUID as its 16 bytes). An
integer-valued column then compares with the integer `int_bound` gives (x < 2.5 is x < 3).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import ipaddress
import math
import uuid
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import PredicateError
from ..pm.qdb_types import KIND_ANYSIGN, KIND_BIGDEC, KIND_BYTES, KIND_FLOAT, KIND_INT, KIND_UINT

UNIT_PER_SECOND = {"days": Fraction(1, 86400), "s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}
# numpy datetime64 units in seconds
_NP_UNIT_SECONDS = {"W": 7 * 86400, "D": 86400, "h": 3600, "m": 60, "s": 1, "ms": Fraction(1, 1000),
                    "us": Fraction(1, 10**6), "ns": Fraction(1, 10**9)}
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
NAN = float("nan")
INT_KINDS = (KIND_INT, KIND_UINT, KIND_ANYSIGN)


@dataclass(frozen=True)
class Domain:
    """What mapping a literal needs to know of its column."""

    column: str  # for messages
    type_name: str  # for messages: "TIMESTAMP on INT64", an Arrow type, ...
    kind: str  # pm.qdb_types.KIND_*: the domain (numbers for the integer kinds and floats, else bytes)
    unit: str | None = None  # temporal column: its values are these units (UNIT_PER_SECOND) since the epoch
    scale: int | None = None  # decimal column: its values are unscaled by 10**scale
    form: str | None = None  # pm.qdb_types.value_form: a str literal may be an "ipv4", "char" or "uuid"
    boolean: bool = False  # a BOOLEAN column: the one that takes TRUE / FALSE


def bad_literal(d: Domain, value, why="") -> PredicateError:
    return PredicateError(f"literal {value!r} does not fit column {d.column!r} ({d.type_name}){why}")


def not_boolean(name, type_name) -> PredicateError:
    return PredicateError(f"column {name!r} is {type_name}, not BOOLEAN: only a BOOLEAN column stands alone as a "
                          f"condition, takes IS [NOT] TRUE / FALSE or compares with TRUE / FALSE")


def literal(d: Domain, value):
    """The literal in the column's comparison domain: Fraction / float for numbers, bytes for
    byte strings; for KIND_NONE the literal itself (only null-count rules apply, it is never compared)."""
    if isinstance(value, (bool, np.bool_)) and not d.boolean:
        raise not_boolean(d.column, d.type_name)
    kind = d.kind
    if kind in INT_KINDS:
        if d.unit is not None:
            return time_units(d, value)
        if d.form == "ipv4" and isinstance(value, str):
            try:
                return Fraction(int(ipaddress.IPv4Address(value)))
            except ValueError:
                raise bad_literal(d, value, ": not an IPv4 address") from None
        if d.form == "char" and isinstance(value, str):
            if len(value) != 1:
                raise bad_literal(d, value, ": CHAR takes one character")
            return Fraction(ord(value))
        return _scaled(d, value)
    if kind == KIND_FLOAT:
        return _parse_number(d, value) if isinstance(value, str) else number(d, value)
    if kind == KIND_BIGDEC:
        return _scaled(d, value)
    if kind == KIND_BYTES:
        if isinstance(value, uuid.UUID):
            return value.bytes
        if isinstance(value, str):
            if d.form == "uuid":
                try:
                    return uuid.UUID(value).bytes
                except ValueError:
                    raise bad_literal(d, value, ": not a UUID") from None
            return value.encode("utf-8")
        if isinstance(value, (bytes, bytearray, memoryview, np.bytes_)):
            return bytes(value)
        raise bad_literal(d, value)
    return value


def time_units(d: Domain, value) -> Fraction | float:
    """A temporal literal in the column's units since the epoch, exactly (a number is taken as
    a count of those units)."""
    per_s = Fraction(UNIT_PER_SECOND[d.unit])
    if hasattr(value, "asm8"):  # pandas Timestamp: keep its nanoseconds
        value = value.asm8
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            raise bad_literal(d, value, ": NaT is a null, use is_null()")
        unit, count = np.datetime_data(value.dtype)
        per = _NP_UNIT_SECONDS.get(unit)
        if per is None:
            raise bad_literal(d, value, f": datetime64 unit {unit!r} is not supported")
        return Fraction(int(value.astype(np.int64))) * count * per * per_s
    if isinstance(value, str):
        try:
            value = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise bad_literal(d, value, ": not an ISO-8601 date/time") from None
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)  # naive means UTC, as Parquet's instants
        delta = value - _EPOCH
        micros = (delta.days * 86400 + delta.seconds) * 10**6 + delta.microseconds
        return Fraction(micros, 10**6) * per_s
    if isinstance(value, _dt.date):
        return Fraction((value - _dt.date(1970, 1, 1)).days * 86400) * per_s
    if isinstance(value, (bool, np.bool_)):
        raise bad_literal(d, value)
    return number(d, value)


def number(d: Domain, value) -> Fraction | float:
    """An exact numeric literal; float NaN / inf are returned as floats."""
    if isinstance(value, (bool, np.bool_)):
        return Fraction(int(value))
    if isinstance(value, (np.timedelta64, np.datetime64)):
        raise bad_literal(d, value)  # np.timedelta64 is an np.integer, but its number is not the column's
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
    raise bad_literal(d, value)


def _scaled(d: Domain, value):
    if d.scale is not None and isinstance(value, (float, np.floating)) and math.isfinite(value):
        value = decimal.Decimal(repr(float(value)))  # 0.02 means the decimal 0.02, not its binary double
    v = _parse_number(d, value) if isinstance(value, str) else number(d, value)
    if d.scale and isinstance(v, Fraction):
        v = v * 10**d.scale
    return v


def _parse_number(d: Domain, s: str):
    try:
        return number(d, decimal.Decimal(s.strip()))
    except decimal.InvalidOperation:
        raise bad_literal(d, s, ": not a number") from None


# --- integer comparisons ----------------------------------------------------------------------

ALWAYS, NEVER = "always", "never"


def int_bound(op, q):
    """For an integer-valued x and an exact q: the integer c with (x op q) == (x op c), or
    ALWAYS / NEVER when (x op q) is TRUE / FALSE for every (non-null) x."""
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


def out_of_range(op, c: int, lo: int, hi: int) -> bool | None:
    """(x op c) for every integer x in [lo, hi] when c lies outside it (TRUE or FALSE for all),
    None when c is inside and a real comparison is needed."""
    if c > hi:
        return op in ("<", "<=", "!=")
    if c < lo:
        return op in (">", ">=", "!=")
    return None
