"""Parquet schema → `_pm` column descriptors.

Two sources: QuestDB-written files carry a `questdb` key-value JSON with each column's full type
code; any other file gets its QuestDB type inferred from physical + logical type
(docs/format.md#type-inference). Nested columns map to their leaves with their levels.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ..pm import layout as L
from ..pm import qdb_types as Q
from ..pm.description import Column
from ..errors import ParquetFormatError, PmError
from .constants import (
    CT_DATE, CT_DECIMAL, CT_ENUM, CT_INT_8, CT_INT_16, CT_JSON, CT_TIMESTAMP_MICROS, CT_TIMESTAMP_MILLIS,
    CT_UINT_32, CT_UINT_64, CT_UTF8,
)


@dataclass(frozen=True)
class SchemaMapping:
    columns: list
    designated_timestamp: int
    sorting_columns: list  # column indices
    sorting_is_dts_asc: bool
    unused_bytes: int
    questdb: bool  # the file carried QuestDB's own metadata


def infer_type(leaf) -> int:
    """QuestDB type code of a leaf of an external file, -1 when no QuestDB type fits.

    Deviation from the reference (docs/format.md#deviations-from-the-reference), for pruning
    correctness: unsigned 32-bit maps to IPv4 (the
    one unsigned 32-bit QuestDB type, so its stats compare unsigned) and unsigned 64-bit to -1
    (no QuestDB type compares unsigned 64-bit; a signed reading of its stats could prune wrongly).
    """
    pt, lt, ct = leaf.physical_type, leaf.logical_type, leaf.converted_type
    kind = lt[0] if lt else None
    if kind == "DECIMAL" or ct == CT_DECIMAL:
        scale, precision = (lt[1], lt[2]) if kind == "DECIMAL" else (leaf.scale or 0, leaf.precision or 0)
        # DECIMAL32 / 64 on INT32 / 64, DECIMALn by byte width on FLBA, else by precision
        width = {L.PT_INT32: 4, L.PT_INT64: 8, L.PT_FIXED_LEN_BYTE_ARRAY: leaf.type_length}.get(pt)
        return Q.decimal_code(Q.decimal_tag(precision, width), precision, scale)
    if pt == L.PT_BOOLEAN:
        return L.QDB_BOOLEAN
    if pt == L.PT_FLOAT:
        return L.QDB_FLOAT
    if pt == L.PT_DOUBLE:
        return L.QDB_DOUBLE
    if pt == L.PT_INT96:
        return L.QDB_TIMESTAMP_NS
    if pt == L.PT_INT32:
        if kind == "INTEGER":
            bits, signed = lt[1], lt[2]
            if not signed and bits == 32:
                return L.QDB_IPV4
            if signed and bits == 8:
                return L.QDB_BYTE
            if signed and bits == 16:
                return L.QDB_SHORT
            return L.QDB_INT
        if kind == "DATE" or ct == CT_DATE:
            return L.QDB_DATE
        if ct == CT_UINT_32:
            return L.QDB_IPV4
        if ct == CT_INT_8:
            return L.QDB_BYTE
        if ct == CT_INT_16:
            return L.QDB_SHORT
        return L.QDB_INT
    if pt == L.PT_INT64:
        if kind == "TIMESTAMP":
            return {"MILLIS": L.QDB_DATE, "MICROS": L.QDB_TIMESTAMP, "NANOS": L.QDB_TIMESTAMP_NS}.get(lt[1], -1)
        if ct == CT_TIMESTAMP_MILLIS:
            return L.QDB_DATE
        if ct == CT_TIMESTAMP_MICROS:
            return L.QDB_TIMESTAMP
        if (kind == "INTEGER" and not lt[2]) or ct == CT_UINT_64:
            return -1
        return L.QDB_LONG
    if pt == L.PT_FIXED_LEN_BYTE_ARRAY:
        if leaf.type_length == 16:
            return L.QDB_UUID if kind == "UUID" else L.QDB_LONG128
        if leaf.type_length == 32:
            return L.QDB_LONG256
        return -1
    if pt == L.PT_BYTE_ARRAY:
        if kind in ("STRING", "ENUM", "JSON") or ct in (CT_UTF8, CT_ENUM, CT_JSON):
            return L.QDB_VARCHAR
        return L.QDB_BINARY
    return -1


def _questdb_json(footer):
    for key, value in footer.key_value_metadata:
        if key == "questdb" and value:
            try:
                meta = json.loads(value)
            except (ValueError, RecursionError) as e:
                raise ParquetFormatError(f"questdb key-value metadata is not valid JSON: {e}") from None
            if not isinstance(meta, dict) or not isinstance(meta.get("schema"), list):
                raise ParquetFormatError("questdb key-value metadata has no 'schema' list")
            return meta
    return None


def _json_int(v, lo, hi) -> int:
    """A JSON integer in [lo, hi] (lo None: no lower bound); TypeError / ValueError otherwise.
    Floats and bools are not integers here (int() would truncate 5.5, and fail on 1e400 with
    OverflowError)."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(v)
    if (lo is not None and v < lo) or v > hi:
        raise ValueError(v)
    return v


def common_sorting(footer):
    """Sorting columns shared by every row group, or [] when they disagree or are absent.

    Vectorised over the footer's CSR arrays: building a Python list per row group
    (footer.sorting_columns) costs milliseconds on a 10,000-row-group file."""
    off = np.asarray(footer.sort_offsets)
    R = off.shape[0] - 1
    if R <= 0:
        return []
    counts = np.diff(off)
    n = int(counts[0])
    if n == 0 or (counts != n).any():
        return []
    a, b = int(off[0]), int(off[-1])
    cols = [np.asarray(x)[a:b].reshape(R, n) for x in
            (footer.sort_column_idx, footer.sort_descending, footer.sort_nulls_first)]
    if any((x != x[0]).any() for x in cols):
        return []
    return [(int(i), bool(d), bool(f)) for i, d, f in zip(*(x[0].tolist() for x in cols))]


# How `_pm` column descriptors get their repetition flags (docs/format.md#repetition-flags).
# "encoder": QuestDB's partition encoder, which writes the `_pm` of every partition it converts:
# OPTIONAL for every column, REQUIRED only for a SYMBOL column whose table holds no NULL in it
# (whatever the Parquet schema says: it writes the designated timestamp and BOOLEAN / BYTE / SHORT
# / CHAR REQUIRED there). "parquet": the Parquet schema's repetition, as QuestDB's migration path
# (convert_from_parquet) and any writer of an external file does. Readers take nullability from
# definition levels, so both readings read the same.
REPETITION_RULES = ("encoder", "parquet")


def _no_nulls(footer, i: int, leaf) -> bool:
    """The file holds no NULL in leaf `i`: REQUIRED, or every row group's null count is present
    and 0 (no row group: nothing known, so False)."""
    if leaf.max_def_level == 0:
        return True
    ch = footer.chunks
    if ch.shape[0] == 0:
        return False
    known = (ch["stat_flags"][:, i] & L.STAT_NULL_COUNT_PRESENT) != 0
    return bool(known.all() and (ch["null_count"][:, i] == 0).all())


def _repetition(rule, footer, i, leaf, type_code, symbol_not_null) -> int:
    if rule == "parquet":
        return leaf.repetition
    if L.qdb_type_tag(type_code) != L.QDB_SYMBOL:
        return L.REPETITION_OPTIONAL
    name = ".".join(leaf.path)
    # The table's symbol map says (exactly QuestDB's hint); without it, this file's null counts.
    not_null = symbol_not_null[name] if name in symbol_not_null else _no_nulls(footer, i, leaf)
    return L.REPETITION_REQUIRED if not_null else L.REPETITION_OPTIONAL


def map_schema(footer, *, repetition: str | None = None, symbol_not_null=None) -> SchemaMapping:
    """Column descriptors, designated timestamp and sorting of a Parquet footer.

    repetition: "encoder" or "parquet" (REPETITION_RULES); None = "encoder" for a file QuestDB
    wrote (it carries the `questdb` metadata), else "parquet". symbol_not_null: {column name:
    bool} from the table's symbol maps (questdb/symbols.py), for the "encoder" rule."""
    leaves = footer.leaves
    sorting = common_sorting(footer)
    descending = {c for c, desc, _ in sorting if desc}
    qdb = _questdb_json(footer)
    if qdb is not None and len(qdb["schema"]) != len(leaves):
        raise ParquetFormatError(f"questdb metadata lists {len(qdb['schema'])} columns but the Parquet schema "
                                 f"has {len(leaves)} leaf columns")
    if repetition is None:
        repetition = "encoder" if qdb is not None else "parquet"
    if repetition not in REPETITION_RULES:
        raise PmError(f"repetition must be one of {REPETITION_RULES} or None, got {repetition!r}")
    symbol_not_null = symbol_not_null or {}
    cols = []
    dts = -1
    for i, leaf in enumerate(leaves):
        entry = qdb["schema"][i] if qdb else None
        if entry is not None:
            try:
                type_code = _json_int(entry["column_type"], -(1 << 31), (1 << 31) - 1)
            except (KeyError, TypeError, ValueError):
                raise ParquetFormatError(f"questdb metadata column {i} has no i32 column_type") from None
            # Bits 17 and 20 are flags of TIMESTAMP codes only (in a DECIMAL code they are
            # precision and scale bits: DECIMAL64(18,4) has bit 20 set).
            is_ts = L.qdb_type_tag(type_code) == L.QDB_TIMESTAMP
            if is_ts and type_code & L.QDB_FLAG_DESIGNATED_TIMESTAMP and dts < 0:
                dts = i
        else:
            type_code, is_ts = infer_type(leaf), False
        flags = L.column_flags(
            repetition=_repetition(repetition, footer, i, leaf, type_code, symbol_not_null),
            descending=i in descending or bool(entry and is_ts and type_code & L.QDB_FLAG_DESCENDING),
            ascii=bool(entry and entry.get("ascii")),
            local_key_is_global=bool(entry and entry.get("format") == 1
                                     and L.qdb_type_tag(type_code) == L.QDB_SYMBOL),
        )
        cols.append(Column(
            name=".".join(leaf.path),
            type=type_code,
            id=leaf.field_id if leaf.field_id is not None else (i if entry else -1),
            flags=flags,
            physical_type=leaf.physical_type,
            fixed_byte_len=leaf.type_length if leaf.physical_type == L.PT_FIXED_LEN_BYTE_ARRAY else 0,
            max_rep_level=leaf.max_rep_level,
            max_def_level=leaf.max_def_level,
        ))
    sort_idx = [c for c, _, _ in sorting]
    if dts < 0 and sorting:
        first, desc, _ = sorting[0]
        if (not desc and leaves[first].repetition == L.REPETITION_REQUIRED and leaves[first].max_rep_level == 0
                and L.qdb_type_tag(cols[first].type) == L.QDB_TIMESTAMP):
            dts = first
    dts_asc = False
    if qdb is not None and dts >= 0 and sort_idx in ([], [dts]) and not cols[dts].flags & L.COLUMN_FLAG_DESCENDING:
        # QuestDB partitions are sorted by the designated timestamp; say so the compact way.
        dts_asc, sort_idx = True, []
    unused = 0
    if qdb is not None:
        try:
            unused = max(0, _json_int(qdb.get("unused_bytes", 0) or 0, None, (1 << 64) - 1))
        except (TypeError, ValueError):
            raise ParquetFormatError(f"questdb metadata unused_bytes is {qdb.get('unused_bytes')!r}, "
                                     "not an integer below 2^64") from None
    return SchemaMapping(cols, dts, sort_idx, dts_asc, unused, qdb is not None)
