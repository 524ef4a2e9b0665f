"""Scalar interpretation of verbatim Parquet stat bytes for display (inspect, JSON).

Units come from the QuestDB type code, as the stats are stored in Parquet-native units:
DATE on INT32 = days, DATE on INT64 = millis, TIMESTAMP = micros, TIMESTAMP_NS = nanos.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import ipaddress
import struct
import uuid

from ..pm import layout as L

# Decimal arithmetic with enough digits for DECIMAL256 (the default context rounds at 28).
_EXACT = decimal.Context(prec=100)

_EPOCH = _dt.datetime(1970, 1, 1)
_JULIAN_EPOCH_DAY = 2440588


def decimal_scale(type_code: int) -> int:
    return (type_code >> L.QDB_DECIMAL_SCALE_SHIFT) & 0x3F


def is_decimal(type_code: int) -> bool:
    return L.QDB_DECIMAL8 <= L.qdb_type_tag(type_code) <= L.QDB_DECIMAL256


def _epoch_plus(value: int, unit_per_second: int) -> str:
    secs, frac = divmod(value, unit_per_second)
    try:
        t = _EPOCH + _dt.timedelta(seconds=secs)
    except OverflowError:
        return f"{value} (out of datetime range)"
    digits = {1000: 3, 1_000_000: 6, 1_000_000_000: 9}[unit_per_second]
    return t.isoformat() + f".{frac:0{digits}d}Z"


def decode_stat(raw: bytes | None, physical_type: int, type_code: int = -1):
    """A JSON-friendly value (int, float, bool or str) for one stat; None when absent."""
    if raw is None:
        return None
    tag = L.qdb_type_tag(type_code)
    try:
        if physical_type == L.PT_BOOLEAN:
            return bool(raw[0])
        if physical_type == L.PT_INT32:
            (v,) = struct.unpack("<i", raw[:4].ljust(4, b"\0"))
            if tag == L.QDB_IPV4:
                return str(ipaddress.IPv4Address(v & 0xFFFFFFFF))
            if tag == L.QDB_DATE:
                return (_dt.date(1970, 1, 1) + _dt.timedelta(days=v)).isoformat()
            if is_decimal(type_code):
                return str(decimal.Decimal(v).scaleb(-decimal_scale(type_code), _EXACT))
            return v
        if physical_type == L.PT_INT64:
            (v,) = struct.unpack("<q", raw[:8].ljust(8, b"\0"))
            if tag == L.QDB_DATE:
                return _epoch_plus(v, 1000)
            if tag == L.QDB_TIMESTAMP:
                return _epoch_plus(v, 1_000_000_000 if type_code & L.QDB_FLAG_TIMESTAMP_NANOS else 1_000_000)
            if is_decimal(type_code):
                return str(decimal.Decimal(v).scaleb(-decimal_scale(type_code), _EXACT))
            return v
        if physical_type == L.PT_FLOAT:
            return struct.unpack("<f", raw[:4])[0]
        if physical_type == L.PT_DOUBLE:
            return struct.unpack("<d", raw[:8])[0]
        if physical_type == L.PT_INT96 and len(raw) == 12:
            nanos, day = struct.unpack("<qi", raw)
            return _epoch_plus((day - _JULIAN_EPOCH_DAY) * 86_400_000_000_000 + nanos, 1_000_000_000)
        if physical_type == L.PT_FIXED_LEN_BYTE_ARRAY:
            if tag == L.QDB_UUID and len(raw) == 16:
                return str(uuid.UUID(bytes=bytes(raw)))
            if is_decimal(type_code):
                v = int.from_bytes(raw, "big", signed=True)
                return str(decimal.Decimal(v).scaleb(-decimal_scale(type_code), _EXACT))
            return raw.hex()
        if physical_type == L.PT_BYTE_ARRAY:
            if tag in (L.QDB_STRING, L.QDB_SYMBOL, L.QDB_VARCHAR):
                # Truncated stats may end inside a character.
                return raw.decode("utf-8", errors="replace")
            return raw.hex()
    except (struct.error, ValueError, IndexError):
        pass
    return raw.hex()
