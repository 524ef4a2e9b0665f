"""Which columns `direct` builds without pyarrow's reader, and how: the Arrow type pyarrow would
give a column (from the file's own footer, `ColumnSchemas.fields`) against the column's Parquet
physical type and annotations, and each chunk's encodings and codec against what `parquet.pages`
decodes. A column this module does not name stays with pyarrow's reader (`decode`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..parquet import constants as PQ
from ..parquet.compact import T
from ..pm import layout as L

# Chunk value encodings this path takes (`_pm` keeps no bit for RLE levels); DELTA_* and
# BYTE_STREAM_SPLIT go to pyarrow.
_ENCODINGS_OK = L.ENC_PLAIN | L.ENC_RLE_DICTIONARY
_CODECS_OK = {L.CODEC_UNCOMPRESSED, L.CODEC_SNAPPY, L.CODEC_GZIP, L.CODEC_BROTLI, L.CODEC_ZSTD, L.CODEC_LZ4_RAW}
# The two rules as tables over a chunk record's u1 fields: one lookup per unit, not a set per unit.
_ENCODINGS_TABLE = (np.arange(256) & ~_ENCODINGS_OK) == 0
_CODECS_TABLE = np.isin(np.arange(256), sorted(_CODECS_OK))
_TS_UNITS = {1: "ms", 2: "us", 3: "ns"}  # Parquet TimeUnit member -> Arrow unit
_CT_TS_UNITS = {PQ.CT_TIMESTAMP_MILLIS: "ms", PQ.CT_TIMESTAMP_MICROS: "us"}
# How a column is built (`kinds`): a plain view of its values, a DECIMAL widened to 128 bits, byte
# strings; UNSCALED: a DECIMAL filtered on as its int64s (direct._held)
VIEW, DECIMAL, BINARY, UNSCALED = "view", "decimal", "binary", "unscaled"


def _logical(el):
    """(member id, member Struct) of the element's LogicalType, or (None, None)."""
    lt = el.typed(PQ.SE_LOGICAL_TYPE, T.STRUCT)
    if lt is None or len(lt.fields) != 1:
        return None, None
    (mid, (tt, member)), = lt.fields.items()
    return mid, member if tt == T.STRUCT else None


def _int_annotation(el, mid, member, bits):
    """'signed' / 'unsigned' when the element says a `bits`-wide integer (or says nothing: signed)."""
    ct = el.typed(PQ.SE_CONVERTED_TYPE, T.I32)
    if mid is None:
        if ct is None or ct == {32: PQ.CT_INT_32, 64: PQ.CT_INT_64}[bits]:
            return "signed"
        return "unsigned" if ct == {32: PQ.CT_UINT_32, 64: PQ.CT_UINT_64}[bits] else None
    if mid != PQ.LOGICAL_TYPE_IDS["INTEGER"] or member is None:
        return None
    if member.get(PQ.INT_BIT_WIDTH) != bits:
        return None
    return "signed" if member.get(PQ.INT_IS_SIGNED) else "unsigned"


def _decimal(el, mid, member):
    if mid == PQ.LOGICAL_TYPE_IDS["DECIMAL"] and member is not None:
        return member.get(PQ.DECIMAL_PRECISION), member.get(PQ.DECIMAL_SCALE)
    if mid is None and el.typed(PQ.SE_CONVERTED_TYPE, T.I32) == PQ.CTDECIMAL:
        return el.typed(PQ.SE_PRECISION, T.I32), el.typed(PQ.SE_SCALE, T.I32, 0)
    return None


def _kind(el, ptype, t):
    """How this path builds Arrow type `t` from the column's physical values, or None (pyarrow's)."""
    mid, member = _logical(el)
    ct = el.typed(PQ.SE_CONVERTED_TYPE, T.I32)
    if ptype in (L.PT_INT32, L.PT_INT64):
        bits = 32 if ptype == L.PT_INT32 else 64
        if pa.types.is_decimal(t):
            d = _decimal(el, mid, member)
            ok = d is not None and t == pa.decimal128(*d) if d and d[0] is not None and 0 < d[0] <= 38 else False
            return DECIMAL if ok else None
        sign = _int_annotation(el, mid, member, bits)
        if t == (pa.int32() if bits == 32 else pa.int64()) and sign == "signed":
            return VIEW
        if t == (pa.uint32() if bits == 32 else pa.uint64()) and sign == "unsigned":
            return VIEW
        if bits == 32 and t == pa.date32():
            return VIEW if mid == PQ.LOGICAL_TYPE_IDS["DATE"] or (mid is None and ct == PQ.CT_DATE) else None
        if bits == 64 and pa.types.is_timestamp(t):
            if mid == PQ.LOGICAL_TYPE_IDS["TIMESTAMP"] and member is not None:
                unit = member.get(PQ.TIME_UNIT)
                unit = _TS_UNITS.get(next(iter(unit.fields)) if unit is not None and len(unit.fields) == 1 else None)
            else:
                unit = _CT_TS_UNITS.get(ct) if mid is None else None
            return VIEW if unit is not None and t.unit == unit else None
        return None
    if ptype in (L.PT_FLOAT, L.PT_DOUBLE):
        want = pa.float32() if ptype == L.PT_FLOAT else pa.float64()
        return VIEW if t == want and mid is None and ct is None else None
    if ptype == L.PT_BYTE_ARRAY and t in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary()):
        return BINARY
    return None


def taken_rows(records) -> np.ndarray:
    """Per row of chunk records (2-D: row groups x columns), whether this path takes every chunk's
    encodings and codec: what `kinds` checks, for a planner sizing many units at once."""
    return (_ENCODINGS_TABLE[records["encodings"]] & _CODECS_TABLE[records["codec"]]).all(axis=-1)


def kinds(pm, rgs, cols, schemas, fields, taken=None):
    """Per column of `cols`, how it is built here; None when any column or chunk of row groups
    `rgs` is not this path's (the unit goes to pyarrow whole). The per-column part depends on the
    column schema only and is kept on `schemas`; the chunks' encodings and codecs are per unit.
    `taken`: `taken_rows` over the unit's rows, all true (or not), when the caller knows it."""
    if taken is None:
        sub = pm.chunks[np.ix_(np.asarray(rgs, np.int64), np.asarray(cols, np.int64))]
        taken = bool(taken_rows(sub).all())
    if not taken:
        return None
    return schemas.cached(("direct kinds", tuple(cols)), lambda: _column_kinds(pm, cols, schemas, fields))


def _column_kinds(pm, cols, schemas, fields):
    out = []
    for c, f in zip(cols, fields):
        d = pm.columns[c]
        if int(d["max_rep_level"]) or int(d["max_def_level"]) > 1:
            return None
        k = _kind(schemas.element(pm, c), int(d["physical_type"]), f.type)
        if k is None:
            return None
        out.append(k)
    return out
