"""Two independent views of a Parquet footer, for checking qdbpm.parquet.ParquetFooter.

* `from_pyarrow(path)`: what pyarrow (parquet-cpp) says, through pq.ParquetFile(path).metadata.
* `from_thrift(meta)`: the footer decoded by the generic pure-Python codec qdbpm.thrift (no code
  shared with the Cython kernel), field by field, following parquet.thrift.

Both return plain Python structures: per chunk a dict keyed by (row group, column).
`compare(footer, path)` asserts ParquetFooter against both and returns the number of chunks seen.
`footer_of` / `footer_meta` cut the footer out of a whole file; `pyarrow_reads(path)`: whether pyarrow
can read its metadata at all; `arrow_decompressed`: what Arrow's codec makes of a page's payload.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pyarrow.parquet as pq

from qdbpm.pm import layout as L
from qdbpm.parquet import compact as T
from qdbpm.parquet.footer import PARQUET_ENCODING_TO_BIT

CODEC_BY_NAME = {"UNCOMPRESSED": 0, "SNAPPY": 1, "GZIP": 2, "LZO": 3, "BROTLI": 4, "ZSTD": 6, "LZ4": 7,
                 "UNKNOWN": 5}  # parquet-cpp reads LZ4_RAW (7) as "LZ4"; Hadoop LZ4 (5) it cannot name
ENCODING_BY_NAME = {"PLAIN": 0, "PLAIN_DICTIONARY": 2, "RLE": 3, "BIT_PACKED": 4, "DELTA_BINARY_PACKED": 5,
                    "DELTA_LENGTH_BYTE_ARRAY": 6, "DELTA_BYTE_ARRAY": 7, "RLE_DICTIONARY": 8, "BYTE_STREAM_SPLIT": 9}
PHYSICAL_BY_NAME = {n: i for i, n in enumerate(L.PHYSICAL_TYPE_NAMES)}


# --- whole files ------------------------------------------------------------------------------------


def footer_of(data: bytes):
    """(footer offset, FileMetaData bytes) of a whole Parquet file."""
    n = int.from_bytes(data[-8:-4], "little")
    return len(data) - 8 - n, data[-8 - n : -8]


def footer_meta(data: bytes):
    """(footer offset, footer length, FileMetaData bytes) of a whole Parquet file."""
    n = int.from_bytes(data[-8:-4], "little")
    return len(data) - 8 - n, n, data[-8 - n : -8]


def arrow_decompressed(name, payload, size):
    """Arrow's codec `name` on a page's payload said to decode to `size` bytes: those bytes, or
    None where it raises or gives another size (the reference our page decoders are held to)."""
    import pyarrow as pa

    try:
        got = pa.Codec(name).decompress(payload, decompressed_size=size, asbytes=True)
    except (pa.ArrowException, OSError, ValueError):
        return None
    return got if len(got) == size else None


def pyarrow_reads(path) -> bool:
    try:
        pq.ParquetFile(path).metadata
        return True
    except Exception:
        return False


_UNITS = {"MILLIS": "milliseconds", "MICROS": "microseconds", "NANOS": "nanoseconds"}
_SIMPLE = {"STRING": "String", "DATE": "Date", "UUID": "UUID", "FLOAT16": "Float16", "MAP": "Map", "LIST": "List",
           "ENUM": "Enum", "JSON": "JSON", "BSON": "BSON", "UNKNOWN": "Null", "OTHER": "Undefined"}


def logical_as_pyarrow(lt: tuple) -> dict:
    """A SchemaElement.logical_type tuple as the fields of pyarrow's LogicalType.to_json()."""
    kind = lt[0]
    if kind == "INTEGER":
        return {"Type": "Int", "bitWidth": lt[1], "isSigned": lt[2]}
    if kind in ("TIMESTAMP", "TIME"):
        return {"Type": kind.title(), "isAdjustedToUTC": lt[2], "timeUnit": _UNITS[lt[1]]}
    if kind == "DECIMAL":
        return {"Type": "Decimal", "scale": lt[1], "precision": lt[2]}
    return {"Type": _SIMPLE[kind]}


def pm_encodings(raw: list[int]) -> int:
    bits = 0
    for e in raw:
        bits |= PARQUET_ENCODING_TO_BIT.get(e, 0)
    return bits


# --- pyarrow -----------------------------------------------------------------------------------


def from_pyarrow(path) -> dict:
    md = pq.ParquetFile(path).metadata
    out = {
        "num_rows": md.num_rows,
        "created_by": md.created_by,
        "kv": {k: v for k, v in (md.metadata or {}).items()},
        "leaves": [],
        "row_groups": [],
        "chunks": {},
    }
    for c in range(md.num_columns):
        s = md.schema.column(c)
        out["leaves"].append({
            "path": tuple(s.path.split(".")),
            "physical_type": PHYSICAL_BY_NAME[s.physical_type],
            "max_def_level": s.max_definition_level,
            "max_rep_level": s.max_repetition_level,
            "length": s.length,
            "logical": json.loads(s.logical_type.to_json()),
        })
    for r in range(md.num_row_groups):
        rg = md.row_group(r)
        out["row_groups"].append({
            "num_rows": rg.num_rows,
            "total_byte_size": rg.total_byte_size,
            "sorting_columns": [(sc.column_index, sc.descending, sc.nulls_first) for sc in rg.sorting_columns],
        })
        for c in range(rg.num_columns):
            cc = rg.column(c)
            st = cc.statistics if cc.is_stats_set else None
            d = cc.dictionary_page_offset if cc.has_dictionary_page else None
            out["chunks"][r, c] = {
                "path": tuple(cc.path_in_schema.split(".")),
                "physical_type": PHYSICAL_BY_NAME[cc.physical_type],
                "codec": CODEC_BY_NAME[cc.compression],
                "encodings": sorted(ENCODING_BY_NAME[e] for e in cc.encodings),
                "num_values": cc.num_values,
                "data_page_offset": cc.data_page_offset,
                "dictionary_page_offset": d,
                "total_compressed": cc.total_compressed_size,
                "total_uncompressed": cc.total_uncompressed_size,
                "bloom_offset": cc.bloom_filter_offset,
                "bloom_length": cc.bloom_filter_length,
                "has_column_index": cc.has_column_index,
                "has_offset_index": cc.has_offset_index,
                "null_count": st.null_count if st is not None and st.has_null_count else None,
                "distinct_count": st.distinct_count if st is not None and st.has_distinct_count else None,
                "min_max": (st.min_raw, st.max_raw) if st is not None and st.has_min_max else None,
                "typed_min_max": (st.min, st.max) if st is not None and st.has_min_max else None,
            }
    return out


# --- generic Thrift decode -----------------------------------------------------------------------


def from_thrift(meta: bytes) -> dict:
    """FileMetaData decoded with qdbpm.thrift: the raw values of the fields qdbpm reads."""
    fmd, _ = T.decode_struct(meta)
    rgs = fmd.get(4).values
    out = {"num_rows": fmd.get(3), "version": fmd.get(1), "row_groups": [], "chunks": {}}
    for r, rg in enumerate(rgs):
        sc = rg.get(4)
        out["row_groups"].append({
            "num_rows": rg.get(3),
            "total_byte_size": rg.get(2, -1),
            "file_offset": rg.get(5, -1),
            "total_compressed_size": rg.get(6, -1),
            "ordinal": rg.get(7, -1),
            "sorting_columns": [(s.get(1), s.get(2), s.get(3)) for s in sc.values] if sc is not None else [],
        })
        for c, cc in enumerate(rg.get(1).values):
            md = cc.get(3)
            st = md.get(12)
            g = (lambda f, default=None: st.get(f, default)) if st is not None else (lambda f, default=None: default)
            out["chunks"][r, c] = {
                "physical_type": md.get(1),
                "encodings": sorted(md.get(2).values),
                "path": tuple(p.decode() for p in md.get(3).values),
                "codec": md.get(4),
                "num_values": md.get(5),
                "total_uncompressed": md.get(6),
                "total_compressed": md.get(7),
                "data_page_offset": md.get(9),
                "index_page_offset": md.get(10, -1),
                "dictionary_page_offset": md.get(11, -1),
                "bloom_offset": md.get(14, -1),
                "bloom_length": md.get(15, -1),
                "offset_index_offset": cc.get(4, -1),
                "offset_index_length": cc.get(5, -1),
                "column_index_offset": cc.get(6, -1),
                "column_index_length": cc.get(7, -1),
                "has_statistics": st is not None,
                "max": g(1), "min": g(2),
                "null_count": g(3), "distinct_count": g(4),
                "max_value": g(5), "min_value": g(6),
                "is_max_value_exact": g(7), "is_min_value_exact": g(8),
                "nan_count": g(9),
            }
    return out


def expected_stat_flags(ch: dict) -> int:
    """STAT_FLAGS as docs/format.md#generation-from-parquet prescribes, from raw Thrift values."""
    f = 0
    if ch["min_value"]:
        f |= L.STAT_MIN_PRESENT | (0 if ch["is_min_value_exact"] is False else L.STAT_MIN_EXACT)
    if ch["max_value"]:
        f |= L.STAT_MAX_PRESENT | (0 if ch["is_max_value_exact"] is False else L.STAT_MAX_EXACT)
    if ch["null_count"] is not None and ch["null_count"] >= 0:
        f |= L.STAT_NULL_COUNT_PRESENT
    if ch["distinct_count"] is not None and ch["distinct_count"] >= 0:
        f |= L.STAT_DISTINCT_COUNT_PRESENT
    return f


_PLAIN = {L.PT_BOOLEAN: "<?", L.PT_INT32: "<i", L.PT_INT64: "<q", L.PT_FLOAT: "<f", L.PT_DOUBLE: "<d"}


def plain_bytes(value, physical_type: int) -> bytes:
    """pyarrow's Statistics.min_raw / max_raw (a Python value of the physical type) as the PLAIN
    bytes a footer holds."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return struct.pack(_PLAIN[physical_type], value)


def same_stat(mine: bytes | None, theirs: bytes) -> bool:
    if mine == (theirs or None):
        return True
    # NaN: pyarrow hands out a Python float, whose bits need not be the file's.
    return mine is not None and len(mine) in (4, 8) and len(mine) == len(theirs) and all(
        np.isnan(struct.unpack("<f" if len(b) == 4 else "<d", b)[0]) for b in (mine, theirs))


def _typed(raw: bytes, physical_type: int):
    fmt = {L.PT_INT32: "<i", L.PT_INT64: "<q", L.PT_FLOAT: "<f", L.PT_DOUBLE: "<d"}.get(physical_type)
    return struct.unpack(fmt, raw)[0] if fmt and len(raw) == struct.calcsize(fmt) else None


# --- comparison ---------------------------------------------------------------------------------


def compare_thrift(footer) -> int:
    """Every ParquetFooter field against the generic decoder's raw values."""
    exp = from_thrift(footer.metadata_bytes())
    R, C = footer.chunks.shape
    assert footer.num_rows == exp["num_rows"] and footer.version == exp["version"]
    assert R == len(exp["row_groups"])
    for r, rg in enumerate(exp["row_groups"]):
        assert footer.rg_num_rows[r] == rg["num_rows"]
        assert footer.rg_total_byte_size[r] == rg["total_byte_size"]
        assert footer.rg_file_offset[r] == rg["file_offset"]
        assert footer.rg_total_compressed_size[r] == rg["total_compressed_size"]
        assert footer.rg_ordinal[r] == rg["ordinal"]
        assert footer.sorting_columns[r] == rg["sorting_columns"]
    legacy = footer.stat_legacy
    for (r, c), e in exp["chunks"].items():
        ch = footer.chunks[r, c]
        where = f"chunk ({r}, {c})"
        assert footer.leaves[c].path == e["path"], where
        assert footer.physical_types[r, c] == e["physical_type"], where
        assert footer.encodings(r, c) == sorted(set(e["encodings"])), where
        assert ch["encodings"] == pm_encodings(e["encodings"]), where
        assert ch["codec"] == e["codec"], where
        assert ch["num_values"] == e["num_values"], where
        assert ch["total_compressed"] == e["total_compressed"], where
        assert footer.total_uncompressed[r, c] == e["total_uncompressed"], where
        assert footer.data_page_offset[r, c] == e["data_page_offset"], where
        assert footer.dictionary_page_offset[r, c] == e["dictionary_page_offset"], where
        assert footer.index_page_offset[r, c] == e["index_page_offset"], where
        start = e["dictionary_page_offset"] if e["dictionary_page_offset"] >= 0 else e["data_page_offset"]
        assert ch["byte_range_start"] == start, where
        for name in ("bloom_offset", "bloom_length", "offset_index_offset", "offset_index_length",
                     "column_index_offset", "column_index_length"):
            assert getattr(footer, name)[r, c] == e[name], (where, name)
        assert ch["stat_flags"] == expected_stat_flags(e), where
        assert ch["null_count"] == (e["null_count"] if ch["stat_flags"] & L.STAT_NULL_COUNT_PRESENT else 0), where
        assert ch["distinct_count"] == (e["distinct_count"] if ch["stat_flags"] & L.STAT_DISTINCT_COUNT_PRESENT else 0)
        assert ch["stat_sizes"] == 0 and ch["min_stat"] == 0 and ch["max_stat"] == 0 and ch["reserved"] == 0
        nan = e["nan_count"]
        assert footer.nan_count[r, c] == (nan if nan is not None and nan >= 0 else -1), where
        assert footer.stats.get((r, c, 0)) == (e["min_value"] or None), where
        assert footer.stats.get((r, c, 1)) == (e["max_value"] or None), where
        assert legacy.get((r, c, 0)) == e["min"], where
        assert legacy.get((r, c, 1)) == e["max"], where
        # Zero copy: the stat bytes are addressed inside the footer buffer itself.
        assert footer.stats.data is footer.buffer
    return len(exp["chunks"])


def compare_pyarrow(footer, path) -> dict:
    """ParquetFooter against pyarrow's metadata. Returns counters of how stats were checked."""
    exp = from_pyarrow(path)
    R, C = footer.chunks.shape
    seen = {"raw": 0, "legacy": 0, "typed": 0, "pyarrow_dropped": []}
    assert footer.num_rows == exp["num_rows"]
    assert (footer.created_by or "") == exp["created_by"]  # pyarrow shows an absent one as ""
    assert {k.encode(): (v.encode() if v is not None else b"") for k, v in footer.key_value_metadata} == exp["kv"]
    assert C == len(exp["leaves"])
    for c, leaf in enumerate(exp["leaves"]):
        mine = footer.leaves[c]
        assert mine.path == leaf["path"] and mine.physical_type == leaf["physical_type"], c
        assert mine.max_def_level == leaf["max_def_level"] and mine.max_rep_level == leaf["max_rep_level"], c
        if mine.physical_type == L.PT_FIXED_LEN_BYTE_ARRAY:
            assert mine.type_length == leaf["length"]
        if mine.logical_type is not None:
            want = logical_as_pyarrow(mine.logical_type)
            assert {k: leaf["logical"].get(k) for k in want} == want, (c, mine.logical_type, leaf["logical"])
    assert R == len(exp["row_groups"])
    for r, rg in enumerate(exp["row_groups"]):
        assert footer.rg_num_rows[r] == rg["num_rows"]
        assert footer.rg_total_byte_size[r] == rg["total_byte_size"]
        assert footer.sorting_columns[r] == rg["sorting_columns"]
    for (r, c), e in exp["chunks"].items():
        ch = footer.chunks[r, c]
        where = f"chunk ({r}, {c})"
        assert footer.leaves[c].path == e["path"], where
        assert footer.physical_types[r, c] == e["physical_type"], where
        assert ch["codec"] == e["codec"], where
        assert footer.encodings(r, c) == sorted(set(e["encodings"])), where
        assert ch["encodings"] == pm_encodings(e["encodings"]), where
        assert ch["num_values"] == e["num_values"], where
        assert footer.data_page_offset[r, c] == e["data_page_offset"], where
        d = e["dictionary_page_offset"]
        assert footer.dictionary_page_offset[r, c] == (d if d is not None else -1), where
        assert ch["byte_range_start"] == (d if d is not None else e["data_page_offset"]), where
        assert ch["total_compressed"] == e["total_compressed"], where
        assert footer.total_uncompressed[r, c] == e["total_uncompressed"], where
        bo, bl = e["bloom_offset"], e["bloom_length"]
        assert footer.bloom_offset[r, c] == (bo if bo is not None else -1), where
        assert footer.bloom_length[r, c] == (bl if bl is not None else -1), where
        assert (footer.column_index_offset[r, c] >= 0) == e["has_column_index"], where
        assert (footer.offset_index_offset[r, c] >= 0) == e["has_offset_index"], where
        flags = int(ch["stat_flags"])
        if e["null_count"] is not None:
            assert flags & L.STAT_NULL_COUNT_PRESENT and ch["null_count"] == e["null_count"], where
        if e["distinct_count"] is not None:
            assert flags & L.STAT_DISTINCT_COUNT_PRESENT and ch["distinct_count"] == e["distinct_count"], where
        mine = footer.min_max(r, c)
        if e["min_max"] is None:
            # parquet-cpp drops statistics it does not trust (old writers, undefined sort
            # orders); ours stay verbatim.
            if mine != (None, None):
                seen["pyarrow_dropped"].append((r, c))
            continue
        pt = footer.leaves[c].physical_type
        lo, hi = (plain_bytes(v, pt) for v in e["min_max"])
        if mine[0] is not None or mine[1] is not None or (lo == b"" and hi == b""):
            # min_value / max_value: the same bytes, except that an empty value is absent for us.
            assert same_stat(mine[0], lo) and same_stat(mine[1], hi), where
            seen["raw"] += 1
        else:
            legacy = footer.stat_legacy
            assert same_stat(legacy.get((r, c, 0)) or None, lo) and same_stat(legacy.get((r, c, 1)) or None, hi), where
            seen["legacy"] += 1
        # Decoding our bytes back gives pyarrow's typed values for plain numeric columns.
        if footer.leaves[c].logical_type is None and footer.leaves[c].converted_type is None and mine[0]:
            tlo, thi = e["typed_min_max"]
            for raw, typed in ((mine[0], tlo), (mine[1], thi)):
                v = _typed(raw, pt)
                if v is not None and not (isinstance(v, float) and np.isnan(v)):
                    assert v == typed, where
                    seen["typed"] += 1
    return seen


def compare_duckdb_stats(footer, path, chunks) -> int:
    """Min/max of `chunks` decoded back and compared with DuckDB's parquet_metadata(): for the
    statistics parquet-cpp does not expose (it drops those of writers it does not trust)."""
    import duckdb

    if not chunks:
        return 0
    rows = duckdb.connect().execute(
        "select row_group_id, column_id, stats_min_value, stats_max_value from parquet_metadata(?)", [path]).fetchall()
    theirs = {(r, c): (lo, hi) for r, c, lo, hi in rows}
    n = 0
    for r, c in chunks:
        leaf = footer.leaves[c]
        if leaf.converted_type not in (None, 0, *range(11, 19)) or (leaf.logical_type or ("INTEGER",))[0] not in (
                "INTEGER", "STRING"):
            continue  # DuckDB prints those as dates, decimals...: compare plain ints and strings only
        lt = leaf.logical_type or ("",)
        unsigned = leaf.converted_type in (11, 12, 13, 14) or (lt[0] == "INTEGER" and not lt[2])
        fmt = {L.PT_INT32: "<I" if unsigned else "<i", L.PT_INT64: "<Q" if unsigned else "<q"}.get(leaf.physical_type)
        for raw, text in zip(footer.min_max(r, c), theirs[r, c]):
            if fmt is not None:
                assert str(struct.unpack(fmt, raw)[0]) == text, (r, c)
            elif leaf.physical_type == L.PT_BYTE_ARRAY:
                assert raw.decode() == text, (r, c)
            else:
                continue
            n += 1
    return n
