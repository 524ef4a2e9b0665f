"""Scalar interpretation of verbatim Parquet stat bytes for display (inspect, JSON).

The stats are stored in Parquet-native units; what they mean comes from the QuestDB type code
(pm.qdb_types): DATE on INT32 = days, DATE on INT64 = millis, TIMESTAMP = micros, TIMESTAMP_NS =
nanos, INT96 = nanos since the Julian epoch.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import ipaddress
import uuid

from ..pm import layout as L
from ..pm import qdb_types as Q
from ..pm import stat_decode as SD

# Decimal arithmetic with enough digits for DECIMAL256 (the default context rounds at 28).
_EXACT = decimal.Context(prec=100)

_EPOCH = _dt.datetime(1970, 1, 1)
_PER_SECOND = {"ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}


def _epoch_plus(value: int, unit: str) -> str:
    per_second = _PER_SECOND[unit]
    secs, frac = divmod(value, per_second)
    try:
        t = _EPOCH + _dt.timedelta(seconds=secs)
    except OverflowError:
        return f"{value} (out of datetime range)"
    return t.isoformat() + f".{frac:0{len(str(per_second)) - 1}d}Z"


def _date(days: int) -> str:
    try:
        return (_EPOCH.date() + _dt.timedelta(days=days)).isoformat()
    except OverflowError:
        return f"{days} (out of date range)"


def decode_stat(raw: bytes | None, physical_type: int, type_code: int = -1):
    """A JSON-friendly value (int, float, bool or str) for one stat; None when absent."""
    if raw is None:
        return None
    pt = physical_type
    try:
        v = SD.plain_value(raw, pt)
    except ValueError:
        return bytes(raw).hex()
    if isinstance(v, (bool, float)):
        return v
    if pt == L.PT_INT96:
        return _epoch_plus(v, "ns")
    dec, form = Q.decimal_params(type_code), Q.value_form(type_code)
    if isinstance(v, int):  # INT32 / INT64
        if dec is not None:
            return str(decimal.Decimal(v).scaleb(-dec[1], _EXACT))
        if form == "ipv4" and pt == L.PT_INT32:
            return str(ipaddress.IPv4Address(v & 0xFFFFFFFF))
        unit = Q.unit(type_code, pt)
        if unit == "days":
            return _date(v)
        return v if unit is None else _epoch_plus(v, unit)
    if dec is not None:
        return str(decimal.Decimal(SD.decimal_value(v)).scaleb(-dec[1], _EXACT))
    if form == "uuid" and pt == L.PT_FIXED_LEN_BYTE_ARRAY and len(v) == 16:
        return str(uuid.UUID(bytes=v))
    if form == "text" and pt == L.PT_BYTE_ARRAY:
        return v.decode("utf-8", errors="replace")  # truncated stats may end inside a character
    return v.hex()
