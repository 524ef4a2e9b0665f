"""The comparator of generated `_pm` files: every field of a snapshot against the Parquet file it
was generated from (pyarrow's view of the footer and the generic Thrift decoder's raw values).

`check_pm` is what the generate, writer, append and CLI tests check their output with.
"""

import datetime as dt
import decimal
import json
import struct

import numpy as np
import pyarrow.parquet as pq

import qdbpm
from qdbpm.pm import layout as L
from qdbpm.parquet.bloom_header import parse_bloom_header
from qdbpm.errors import ParquetFormatError

from conftest import read_bytes as file_bytes
from support.parquet_oracle import (from_pyarrow, from_thrift, footer_meta, plain_bytes, pm_encodings,
                                    pyarrow_reads, same_stat)

_EXACT = decimal.Context(prec=100)
UTC = dt.timezone.utc


def decode_typed(raw: bytes, physical: str, logical: dict, converted: str):
    """Our verbatim stat bytes as the Python value pyarrow's Statistics.min / max gives, from the
    column's Parquet types alone. NotImplemented where pyarrow's value is not reproduced here."""
    kind = logical.get("Type")
    if physical == "BOOLEAN":
        return bool(raw[0])
    if physical in ("INT32", "INT64"):
        signed = logical["isSigned"] if kind == "Int" else not converted.startswith("UINT")
        v = int.from_bytes(raw, "little", signed=signed)
        if kind == "Timestamp":
            unit = logical["timeUnit"]
            tz = UTC if logical["isAdjustedToUTC"] else None
            if unit == "nanoseconds":
                import pandas as pd

                return pd.Timestamp(v, unit="ns", tz="UTC" if tz else None)
            us = v * 1000 if unit == "milliseconds" else v
            return (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=us)).replace(tzinfo=tz)
        if kind == "Date":
            return dt.date(1970, 1, 1) + dt.timedelta(days=v)
        if kind == "Time":
            us = {"milliseconds": v * 1000, "microseconds": v}.get(logical["timeUnit"])
            if us is None:
                return NotImplemented
            return (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=us)).time()
        if kind == "Decimal":
            return decimal.Decimal(v).scaleb(-logical["scale"], _EXACT)
        return v
    if physical == "FLOAT":
        return struct.unpack("<f", raw)[0]
    if physical == "DOUBLE":
        return struct.unpack("<d", raw)[0]
    if physical in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"):
        if kind == "Decimal":
            return decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-logical["scale"], _EXACT)
        if kind in ("String", "Enum", "JSON"):
            return raw.decode()
        return raw
    return NotImplemented  # INT96


def same_value(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return a == b


def stat_flags_for(e) -> int:
    """STAT_FLAGS docs/format.md#generation-from-parquet prescribes from the raw Thrift values of
    one chunk (`from_thrift`)."""
    f = 0
    for raw, exact, present, inl, ex in ((e["min_value"], e["is_min_value_exact"], L.STAT_MIN_PRESENT,
                                          L.STAT_MIN_INLINED, L.STAT_MIN_EXACT),
                                         (e["max_value"], e["is_max_value_exact"], L.STAT_MAX_PRESENT,
                                          L.STAT_MAX_INLINED, L.STAT_MAX_EXACT)):
        if raw:
            f |= present | (inl if len(raw) <= 8 else 0) | (0 if exact is False else ex)
    if e["null_count"] is not None and e["null_count"] >= 0:
        f |= L.STAT_NULL_COUNT_PRESENT
    if e["distinct_count"] is not None and e["distinct_count"] >= 0:
        f |= L.STAT_DISTINCT_COUNT_PRESENT
    return f


def check_pm(pm_path, parquet_path, *, bloom="inline", parquet_size=None) -> dict:
    """Every field of the `_pm` snapshot against the Parquet file it was generated from.

    Raw Thrift values (generic decoder) for every chunk; pyarrow's metadata (offsets, sizes,
    codec, encodings, counts, min/max bytes and min/max decoded back to typed values) whenever
    pyarrow can read the footer; bloom filters: inline bitsets equal the file's bytes after the
    filter's Thrift header, external entries address exactly those bytes. `parquet_size` pins
    an older snapshot (the file's prefix of that size). Returns counters of what was compared.
    """
    data = file_bytes(parquet_path)
    if parquet_size is not None:
        data = data[:parquet_size]
    f_off, f_len, meta = footer_meta(data)
    raw = from_thrift(meta)
    seen = {"chunks": 0, "pyarrow": 0, "typed": 0, "stats": 0, "blooms": 0}
    with qdbpm.open(pm_path, parquet_size=parquet_size) as pm:
        assert pm.parquet_size == len(data)
        assert (pm.parquet_footer_offset, pm.parquet_footer_length) == (f_off, f_len)
        R, C = pm.row_group_count, pm.column_count
        assert R == len(raw["row_groups"])
        assert [int(n) for n in pm.num_rows] == [rg["num_rows"] for rg in raw["row_groups"]]
        for (r, c), e in raw["chunks"].items():
            ch = pm.chunks[r, c]
            where = (parquet_path, r, c)
            if r == 0:
                desc = pm.columns[c]
                assert pm.column_names[c] == ".".join(e["path"]), where
                assert desc["physical_type"] == e["physical_type"], where
            assert ch["codec"] == e["codec"], where
            assert ch["encodings"] == pm_encodings(e["encodings"]), where
            assert ch["num_values"] == e["num_values"], where
            # docs/format.md#chunk-records: the dictionary page offset if any, else the data page.
            start = e["dictionary_page_offset"] if e["dictionary_page_offset"] >= 0 else e["data_page_offset"]
            assert ch["byte_range_start"] == start, where
            assert ch["total_compressed"] == e["total_compressed"], where
            assert ch["stat_flags"] == stat_flags_for(e), where
            assert ch["null_count"] == (e["null_count"] if ch["stat_flags"] & L.STAT_NULL_COUNT_PRESENT else 0)
            assert ch["distinct_count"] == (e["distinct_count"] if ch["stat_flags"] & L.STAT_DISTINCT_COUNT_PRESENT
                                            else 0)
            mn, mx = pm.stat_bytes(r, c)
            assert (mn, mx) == (e["min_value"] or None, e["max_value"] or None), where
            sizes = (len(mn) if mn and len(mn) <= 8 else 0) | (len(mx) if mx and len(mx) <= 8 else 0) << 4
            assert ch["stat_sizes"] == sizes and ch["reserved"] == 0, where
            seen["chunks"] += 1
            seen["stats"] += mn is not None
            seen["blooms"] += _check_bloom(pm, data, r, c, e, bloom)
        if pyarrow_reads(parquet_path) and parquet_size is None:
            seen.update(_check_pyarrow(pm, parquet_path))
    return seen


def _check_bloom(pm, data, r, c, e, bloom) -> int:
    """1 when the chunk's bloom filter is in the `_pm` and was checked against the file."""
    off, ln = e["bloom_offset"], e["bloom_length"]
    usable = None
    if off > 0 and ln > 0:
        try:
            nbytes, hlen = parse_bloom_header(data[off : off + ln], 0)
            if hlen + nbytes <= ln:
                usable = (off + hlen, nbytes)
        except ParquetFormatError:
            pass
    inline, ref = pm.bloom_filter(r, c), pm.bloom_ref(r, c)
    in_list = c in [int(b) for b in pm.bloom_columns]
    if bloom == "inline":
        assert ref is None
        if usable is not None:
            assert in_list and inline == data[usable[0] : usable[0] + usable[1]], (r, c)
            return 1
        return 0
    assert inline is None
    if bloom == "external":
        assert ref == usable or (ref is None and usable is None), (r, c, ref, usable)
        return int(usable is not None)
    assert ref is None and not in_list  # bloom=None
    return 0


def _check_pyarrow(pm, path) -> dict:
    exp = from_pyarrow(path)
    md = pq.ParquetFile(path).metadata
    seen = {"pyarrow": 0, "typed": 0}
    for c, leaf in enumerate(exp["leaves"]):
        desc = pm.columns[c]
        assert pm.column_names[c] == ".".join(leaf["path"])
        assert desc["physical_type"] == leaf["physical_type"]
        assert (desc["max_def_level"], desc["max_rep_level"]) == (leaf["max_def_level"], leaf["max_rep_level"])
        if leaf["physical_type"] == L.PT_FIXED_LEN_BYTE_ARRAY:
            assert desc["fixed_byte_len"] == leaf["length"]
        else:
            assert desc["fixed_byte_len"] == 0
    for (r, c), e in exp["chunks"].items():
        ch = pm.chunks[r, c]
        where = (path, r, c)
        assert pm.num_rows[r] == exp["row_groups"][r]["num_rows"]
        if e["codec"] != 5:  # pyarrow cannot name Hadoop LZ4
            assert ch["codec"] == e["codec"], where
        assert ch["encodings"] == pm_encodings(e["encodings"]), where
        assert ch["num_values"] == e["num_values"], where
        d = e["dictionary_page_offset"]
        assert ch["byte_range_start"] == (d if d is not None else e["data_page_offset"]), where
        assert ch["total_compressed"] == e["total_compressed"], where
        flags = int(ch["stat_flags"])
        if e["null_count"] is not None:
            assert flags & L.STAT_NULL_COUNT_PRESENT and ch["null_count"] == e["null_count"], where
        if e["distinct_count"] is not None:
            assert flags & L.STAT_DISTINCT_COUNT_PRESENT and ch["distinct_count"] == e["distinct_count"], where
        seen["pyarrow"] += 1
        if e["min_max"] is None:
            continue
        mine = pm.stat_bytes(r, c)
        if mine == (None, None):
            continue  # pyarrow fell back to the deprecated min / max, which _pm does not copy
        pt = int(pm.columns[c]["physical_type"])
        lo, hi = (plain_bytes(v, pt) for v in e["min_max"])
        assert same_stat(mine[0], lo) and same_stat(mine[1], hi), where
        s = md.schema.column(c)
        logical = json.loads(s.logical_type.to_json())
        for raw, typed in zip(mine, e["typed_min_max"]):
            if raw is None:
                assert typed in (b"", ""), where  # an empty stat is absent in _pm
                continue
            v = decode_typed(raw, s.physical_type, logical, s.converted_type)
            if v is not NotImplemented:
                assert same_value(v, typed), (where, v, typed)
                seen["typed"] += 1
    return seen
