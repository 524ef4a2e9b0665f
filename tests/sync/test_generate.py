"""qdbpm.generate end to end: Parquet file -> `_pm` -> qdbpm.open, checked against pyarrow's view of
the same footer (and the generic Thrift decoder's raw values), the peer data, corrupt inputs,
schema mapping (QuestDB-written and external files), built bloom filters and update mode's
UNUSED_BYTES.

`check_pm` is the comparator the writer, append and CLI tests reuse.
"""

import datetime as dt
import decimal
import glob
import json
import os
import random
import struct
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import col
from qdbpm.pm import layout as L
from qdbpm.parquet import compact as T
from qdbpm.bloom.sbbf import SplitBlockBloomFilter, parse_bloom_header
from qdbpm.errors import ParquetFormatError, PmError
from qdbpm.sync.generate import generate, update

from conftest import PEER_DATA
from parquet_oracle import from_pyarrow, from_thrift, plain_bytes, pm_encodings, same_stat

_EXACT = decimal.Context(prec=100)
UTC = dt.timezone.utc

# --- the comparator ----------------------------------------------------------------------------------


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def footer_meta(data: bytes):
    """(footer offset, footer length, FileMetaData bytes) of a whole Parquet file."""
    n = int.from_bytes(data[-8:-4], "little")
    return len(data) - 8 - n, n, data[-8 - n : -8]


def pyarrow_reads(path) -> bool:
    try:
        pq.ParquetFile(path).metadata
        return True
    except Exception:
        return False


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


# --- peer data -----------------------------------------------------------------------------------------

PEER_FILES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(PEER_DATA, "*"))
                    if not p.endswith((".md", ".csv")))


def test_peer_data_is_there():
    assert len([f for f in PEER_FILES if f.endswith(".parquet")]) >= 50


@pytest.mark.parametrize("name", PEER_FILES)
def test_peer_file_generates(tmp_path, name):
    path = os.path.join(PEER_DATA, name)
    pm = str(tmp_path / "_pm")
    if not name.endswith(".parquet"):  # the two bloom filter blobs: not Parquet files
        for mode in ("inline", "external", None):
            with pytest.raises(ParquetFormatError):
                generate(path, pm, bloom=mode)
        assert not os.path.exists(pm)
        return
    for mode in ("inline", "external", None):
        size = generate(path, pm, bloom=mode)
        assert size == os.path.getsize(pm)
        seen = check_pm(pm, path, bloom=mode)
        assert seen["chunks"] > 0 or name == "null_list.parquet" or seen["chunks"] == 0
        if pyarrow_reads(path):
            assert seen["pyarrow"] == seen["chunks"]
        else:
            assert name == "incorrect_map_schema.parquet"  # see test_parquet_footer.PYARROW_REJECTS


def test_peer_files_together_cover_the_comparisons(tmp_path):
    """Across the peer files the comparator really compares typed stats, OOL stats and nested levels."""
    totals = {"chunks": 0, "typed": 0, "stats": 0}
    ool = nested = 0
    for name in PEER_FILES:
        if not name.endswith(".parquet"):
            continue
        path, pm = os.path.join(PEER_DATA, name), str(tmp_path / name)
        generate(path, pm, bloom=None)
        seen = check_pm(pm, path, bloom=None)
        for k in totals:
            totals[k] += seen[k]
        with qdbpm.open(pm) as m:
            ool += int(((m.chunks["stat_flags"] & L.STAT_MIN_PRESENT) != 0).sum()
                       - ((m.chunks["stat_flags"] & L.STAT_MIN_INLINED) != 0).sum())
            nested += int((m.columns["max_rep_level"] > 0).sum())
    assert totals["chunks"] > 450 and totals["typed"] > 300 and totals["stats"] > 350
    assert ool >= 10 and nested > 30


# --- corrupt inputs: ParquetFormatError, never another exception -------------------------------------


def write_questdb(path, table, doc, *, row_group_size=None, **writer_options):
    """Write `table` as QuestDB does: no ARROW:schema, a `questdb` JSON in the key-value metadata."""
    with pq.ParquetWriter(path, table.schema, store_schema=False, **writer_options) as w:
        w.write_table(table, row_group_size=row_group_size)
        w.add_key_value_metadata({"questdb": doc if isinstance(doc, str) else json.dumps(doc)})
    return path


def bloom_questdb_file(path):
    """A small file with bloom filters and a QuestDB JSON: the parts peer data lacks."""
    n = 300
    t = pa.table({"ts": pa.array(np.arange(n) * 1000, pa.timestamp("us")), "x": np.arange(n) % 17,
                  "s": [f"v{i % 23}" for i in range(n)]})
    doc = {"version": 1, "schema": [{"column_type": L.QDB_TIMESTAMP | L.QDB_FLAG_DESIGNATED_TIMESTAMP, "column_top": 0},
                                    {"column_type": L.QDB_LONG, "column_top": 0},
                                    {"column_type": L.QDB_VARCHAR, "column_top": 0, "ascii": True}],
           "unused_bytes": 77}
    return write_questdb(path, t, doc, row_group_size=100, bloom_filter_options={"x": True, "s": True})


def corrupt_cases(tmp_path, count, seed=7):
    rng = random.Random(seed)
    sources = [os.path.join(PEER_DATA, n) for n in PEER_FILES if n.endswith(".parquet")
               and os.path.getsize(os.path.join(PEER_DATA, n)) < 100_000]
    special = bloom_questdb_file(str(tmp_path / "special.parquet"))
    sources += [special] * (len(sources) // 2)
    for i in range(count):
        src = rng.choice(sources)
        data = bytearray(file_bytes(src))
        f_off, f_len, _ = footer_meta(bytes(data))
        how = rng.random()
        if how < 0.55:  # bytes of the footer
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(f_off, len(data) - 8)] = rng.randrange(256)
        elif how < 0.7:  # truncation anywhere
            data = data[: rng.randrange(len(data))]
        elif how < 0.85:  # the footer length / magic
            k = rng.randrange(len(data) - 8, len(data))
            data[k] = rng.randrange(256)
        else:  # the data region: bloom filter headers and bitsets
            for _ in range(rng.randint(1, 30)):
                data[rng.randrange(4, f_off)] = rng.randrange(256)
        yield i, bytes(data), rng.choice(["inline", "external", None])


def test_corrupt_files_raise_only_parquet_format_error(tmp_path):
    path, pm = str(tmp_path / "x.parquet"), str(tmp_path / "_pm")
    outcomes = {"ok": 0, "error": 0}
    for i, data, mode in corrupt_cases(tmp_path, 1500):
        with open(path, "wb") as f:
            f.write(data)
        try:
            generate(path, pm, bloom=mode)
        except ParquetFormatError as e:
            assert str(e), i
            outcomes["error"] += 1
            continue
        # Whatever generated is a valid _pm of the file as it is.
        with qdbpm.open(pm) as m:
            assert m.parquet_size == len(data)
        outcomes["ok"] += 1
    assert outcomes["ok"] > 100 and outcomes["error"] > 500, outcomes


@pytest.mark.parametrize("plaintext_footer", [False, True])
def test_encrypted_files_raise_parquet_format_error(tmp_path, plaintext_footer):
    """Modular encryption, footer encrypted (PARE) or plaintext with encrypted columns."""
    import base64

    import pyarrow.parquet.encryption as pe

    class Kms(pe.KmsClient):
        def __init__(self, config):
            pe.KmsClient.__init__(self)

        def wrap_key(self, key_bytes, master_key_identifier):
            return base64.b64encode(key_bytes)

        def unwrap_key(self, wrapped_key, master_key_identifier):
            return base64.b64decode(wrapped_key)

    cfg = pe.EncryptionConfiguration(footer_key="f", column_keys={"c": ["a"]}, plaintext_footer=plaintext_footer,
                                     double_wrapping=False)
    props = pe.CryptoFactory(lambda config: Kms(config)).file_encryption_properties(pe.KmsConnectionConfig(), cfg)
    path, pm = str(tmp_path / "enc.parquet"), str(tmp_path / "_pm")
    pq.write_table(pa.table({"a": np.arange(10), "b": np.arange(10)}), path, encryption_properties=props)
    for mode in ("inline", "external", None):
        with pytest.raises(ParquetFormatError, match="encrypt"):
            generate(path, pm, bloom=mode)
    assert not os.path.exists(pm)


@pytest.mark.parametrize("doc, message", [
    ("{not json", "not valid JSON"),
    ("[" * 100_000, "not valid JSON"),
    (json.dumps({"schema": 5}), "no 'schema' list"),
    (json.dumps({"schema": [{"column_type": 6}]}), "lists 1 columns"),
    (json.dumps({"schema": [{"column_type": 6}, {"column_type": 1e400}]}), "i32 column_type"),
    (json.dumps({"schema": [{"column_type": 6}, {"column_type": 2 ** 40}]}), "i32 column_type"),
    (json.dumps({"schema": [{"column_type": 6}, {"column_type": "6"}]}), "i32 column_type"),
    (json.dumps({"schema": [{"column_type": 6}, {}]}), "i32 column_type"),
    (json.dumps({"schema": [{"column_type": 6}, {"column_type": 6}], "unused_bytes": 2 ** 64}), "unused_bytes"),
    (json.dumps({"schema": [{"column_type": 6}, {"column_type": 6}], "unused_bytes": 1.5}), "unused_bytes"),
])
def test_bad_questdb_json_is_a_format_error(tmp_path, doc, message):
    path = str(tmp_path / "q.parquet")
    write_questdb(path, pa.table({"a": [1, 2], "b": [3, 4]}), doc)
    with pytest.raises(ParquetFormatError, match=message):
        generate(path, str(tmp_path / "_pm"))


def test_unusable_bloom_filters_are_left_out(tmp_path):
    """A chunk whose filter header is not BLOCK / XXHASH / UNCOMPRESSED has no filter; others keep theirs."""
    path = bloom_questdb_file(str(tmp_path / "b.parquet"))
    data = bytearray(file_bytes(path))
    _, _, meta = footer_meta(bytes(data))
    chunks = from_thrift(meta)["chunks"]
    off = chunks[1, 1]["bloom_offset"]
    nbytes, hlen = parse_bloom_header(bytes(data[off : off + 64]), 0)
    data[off] = 0x16  # num_bytes becomes a field of another type: the header no longer parses
    with open(path, "wb") as f:
        f.write(bytes(data))
    pm = str(tmp_path / "_pm")
    generate(path, pm)
    with qdbpm.open(pm) as m:
        assert m.bloom_filter(1, "x") is None
        assert m.bloom_filter(0, "x") is not None and m.bloom_filter(1, "s") is not None
    check_pm(pm, path)


# --- schema mapping: QuestDB-written files -------------------------------------------------------------

GEO = L.QDB_FLAG_GEOHASH


def _dec_code(tag, p, s):
    return tag | p << L.QDB_DECIMAL_PRECISION_SHIFT | s << L.QDB_DECIMAL_SCALE_SHIFT


# (name, QuestDB column_type, Arrow type QuestDB's own encoding gives it, values, JSON extras)
QDB_COLUMNS = [
    ("ts", L.QDB_TIMESTAMP | L.QDB_FLAG_DESIGNATED_TIMESTAMP, pa.timestamp("us"), lambda i: i * 1000, {}),
    ("b", L.QDB_BOOLEAN, pa.bool_(), lambda i: i % 2 == 0, {}),
    ("by", L.QDB_BYTE, pa.int32(), lambda i: i % 100 - 50, {}),
    ("sh", L.QDB_SHORT, pa.int32(), lambda i: i * 7, {}),
    ("ch", L.QDB_CHAR, pa.int32(), lambda i: 65 + i % 26, {}),
    ("i", L.QDB_INT, pa.int32(), lambda i: i * 1000, {"column_top": 256}),
    ("l", L.QDB_LONG, pa.int64(), lambda i: i * 10 ** 10, {}),
    ("d8", L.QDB_DATE, pa.timestamp("ms"), lambda i: i * 86_400_000, {}),
    ("f", L.QDB_FLOAT, pa.float32(), lambda i: i / 3, {}),
    ("d", L.QDB_DOUBLE, pa.float64(), lambda i: i / 7, {}),
    ("str", L.QDB_STRING, pa.string(), lambda i: f"s{i}", {}),
    ("sym", L.QDB_SYMBOL, pa.string(), lambda i: f"k{i % 4}", {"format": 1}),
    ("sym2", L.QDB_SYMBOL, pa.string(), lambda i: f"k{i % 3}", {}),
    ("l256", L.QDB_LONG256, pa.binary(32), lambda i: bytes([i % 256]) * 32, {}),
    ("gb", L.QDB_GEOBYTE | 5 << L.QDB_GEOHASH_BITS_SHIFT | GEO, pa.int32(), lambda i: i % 32, {}),
    ("gs", L.QDB_GEOSHORT | 12 << L.QDB_GEOHASH_BITS_SHIFT | GEO, pa.int32(), lambda i: i, {}),
    ("gi", L.QDB_GEOINT | 30 << L.QDB_GEOHASH_BITS_SHIFT | GEO, pa.int32(), lambda i: i * 99, {}),
    ("gl", L.QDB_GEOLONG | 60 << L.QDB_GEOHASH_BITS_SHIFT | GEO, pa.int64(), lambda i: i * 10 ** 9, {}),
    ("bin", L.QDB_BINARY, pa.binary(), lambda i: bytes(range(i % 9)), {}),
    ("u", L.QDB_UUID, pa.uuid(), lambda i: uuid.UUID(int=i * 104729).bytes, {}),
    ("l128", L.QDB_LONG128, pa.binary(16), lambda i: i.to_bytes(16, "little"), {}),
    ("ip", L.QDB_IPV4, pa.uint32(), lambda i: 0xC0A80000 + i, {}),
    ("vc", L.QDB_VARCHAR, pa.string(), lambda i: f"ascii-{i}", {"ascii": True}),
    ("vcu", L.QDB_VARCHAR, pa.string(), lambda i: f"é-{i}", {"ascii": False}),
    ("tsn", L.QDB_TIMESTAMP_NS, pa.timestamp("ns"), lambda i: i * 10 ** 9 + 1, {}),
    ("dec", _dec_code(L.QDB_DECIMAL64, 18, 3), pa.decimal128(18, 3),
     lambda i: decimal.Decimal(i * 1001).scaleb(-3), {}),
    ("dec2", _dec_code(L.QDB_DECIMAL256, 70, 4), pa.decimal256(70, 4),
     lambda i: decimal.Decimal(i * 10 ** 40).scaleb(-4), {}),
]


def questdb_file(path, n=500, *, unused=4096, sorting=True, field_ids=False, rows=100):
    fields, arrays, schema_json = [], [], []
    for k, (name, code, typ, fn, extra) in enumerate(QDB_COLUMNS):
        designated = bool(code & L.QDB_FLAG_DESIGNATED_TIMESTAMP)
        meta = {"PARQUET:field_id": str(100 + k)} if field_ids else None
        fields.append(pa.field(name, typ, nullable=not designated, metadata=meta))
        values = [fn(i) for i in range(n)]
        if not designated:
            values = [None if i % 13 == 5 else v for i, v in enumerate(values)]
        if typ == pa.uuid():
            arrays.append(pa.array(values, pa.binary(16)).cast(pa.uuid()))
        else:
            arrays.append(pa.array(values, typ))
        schema_json.append({"column_type": code, "column_top": 0, **extra})
    doc = {"version": 1, "schema": schema_json, "unused_bytes": unused}
    t = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    write_questdb(path, t, doc, row_group_size=rows, sorting_columns=[pq.SortingColumn(0)] if sorting else None)
    return path, t


@pytest.mark.parametrize("sorting", [True, False])
def test_questdb_written_file(tmp_path, sorting):
    path, _ = questdb_file(str(tmp_path / "data.parquet"), sorting=sorting)
    pm = str(tmp_path / "_pm")
    generate(path, pm)
    check_pm(pm, path)
    with qdbpm.open(pm) as m:
        assert m.column_names == [c[0] for c in QDB_COLUMNS]
        assert m.columns["type"].tolist() == [c[1] for c in QDB_COLUMNS]
        assert m.columns["id"].tolist() == list(range(len(QDB_COLUMNS)))
        assert m.designated_timestamp == 0
        assert m.feature_flags & L.FEATURE_SORTING_IS_DTS_ASC
        assert m.sorting_columns == [(0, False)]  # implied by the flag: no list on disk
        assert m.unused_bytes == 4096
        flags = dict(zip(m.column_names, m.columns["flags"].tolist()))
        req, opt = L.column_flags(repetition=L.REPETITION_REQUIRED), L.column_flags()
        assert flags["ts"] == req and flags["l"] == opt
        assert flags["vc"] == opt | L.COLUMN_FLAG_IS_ASCII and flags["vcu"] == opt
        assert flags["sym"] == opt | L.COLUMN_FLAG_LOCAL_KEY_IS_GLOBAL and flags["sym2"] == opt
        assert m.columns["fixed_byte_len"][m.column_names.index("l256")] == 32
        assert m.columns["fixed_byte_len"][m.column_names.index("u")] == 16
        assert m.columns["max_def_level"].tolist() == [0] + [1] * (len(QDB_COLUMNS) - 1)
        # The 4-byte header slot for SORTING_COLUMN_COUNT is 0 with the flag.
        assert np.frombuffer(file_bytes(pm)[:32], L.HEADER_DTYPE)[0]["sorting_column_count"] == 0


def test_questdb_field_ids_and_no_unused(tmp_path):
    path, _ = questdb_file(str(tmp_path / "data.parquet"), field_ids=True, unused=0)
    pm = str(tmp_path / "_pm")
    generate(path, pm)
    with qdbpm.open(pm) as m:
        assert m.columns["id"].tolist() == [100 + k for k in range(len(QDB_COLUMNS))]
        assert m.unused_bytes == 0


def test_questdb_descending_timestamp_is_not_dts_asc(tmp_path):
    path = str(tmp_path / "d.parquet")
    code = L.QDB_TIMESTAMP | L.QDB_FLAG_DESIGNATED_TIMESTAMP | L.QDB_FLAG_DESCENDING
    doc = {"version": 1, "schema": [{"column_type": code, "column_top": 0}, {"column_type": L.QDB_LONG}]}
    t = pa.Table.from_arrays([pa.array([3000, 2000, 1000], pa.timestamp("us")), pa.array([1, 2, 3])],
                             schema=pa.schema([pa.field("ts", pa.timestamp("us"), nullable=False), ("x", pa.int64())]))
    write_questdb(path, t, doc, sorting_columns=[pq.SortingColumn(0, descending=True)])
    generate(path, str(tmp_path / "_pm"))
    with qdbpm.open(str(tmp_path / "_pm")) as m:
        assert m.designated_timestamp == 0 and not m.feature_flags & L.FEATURE_SORTING_IS_DTS_ASC
        assert m.columns["flags"][0] & L.COLUMN_FLAG_DESCENDING and m.sorting_columns == [(0, True)]


# --- schema mapping: external files, docs/format.md#type-inference -------------------------

D = _dec_code
# (Arrow type, write options, expected TYPE) — one row of docs/format.md#type-inference each
# (plus qdbpm's documented deviations for unsigned 32/64-bit and the types no QuestDB type fits).
INFERENCE = {
    "ts_us": (pa.timestamp("us"), {}, L.QDB_TIMESTAMP),
    "ts_us_tz": (pa.timestamp("us", "UTC"), {}, L.QDB_TIMESTAMP),
    "ts_ns": (pa.timestamp("ns"), {}, L.QDB_TIMESTAMP_NS),
    "ts_ns_tz": (pa.timestamp("ns", "Asia/Tokyo"), {}, L.QDB_TIMESTAMP_NS),
    "ts_ms": (pa.timestamp("ms"), {}, L.QDB_DATE),
    "ts_ms_tz": (pa.timestamp("ms", "UTC"), {}, L.QDB_DATE),
    "ts_s": (pa.timestamp("s"), {}, L.QDB_DATE),  # pyarrow stores seconds as milliseconds
    "int64": (pa.int64(), {}, L.QDB_LONG),
    "time64": (pa.time64("us"), {}, L.QDB_LONG),
    "duration": (pa.duration("ns"), {}, L.QDB_LONG),
    "int8": (pa.int8(), {}, L.QDB_BYTE),
    "int16": (pa.int16(), {}, L.QDB_SHORT),
    "date32": (pa.date32(), {}, L.QDB_DATE),
    "int32": (pa.int32(), {}, L.QDB_INT),
    "time32": (pa.time32("ms"), {}, L.QDB_INT),
    "uint8": (pa.uint8(), {}, L.QDB_INT),
    "uint16": (pa.uint16(), {}, L.QDB_INT),
    "uint32": (pa.uint32(), {}, L.QDB_IPV4),  # deviation: compared unsigned
    "uint64": (pa.uint64(), {}, -1),  # deviation: no unsigned 64-bit QuestDB type
    "bool": (pa.bool_(), {}, L.QDB_BOOLEAN),
    "float": (pa.float32(), {}, L.QDB_FLOAT),
    "double": (pa.float64(), {}, L.QDB_DOUBLE),
    "uuid": (pa.uuid(), {}, L.QDB_UUID),
    "flba16": (pa.binary(16), {}, L.QDB_LONG128),
    "flba32": (pa.binary(32), {}, L.QDB_LONG256),
    "flba5": (pa.binary(5), {}, -1),
    "float16": (pa.float16(), {}, -1),
    "dec_2": (pa.decimal128(2, 1), {}, D(L.QDB_DECIMAL8, 2, 1)),
    "dec_4": (pa.decimal128(4, 2), {}, D(L.QDB_DECIMAL16, 4, 2)),
    "dec_9": (pa.decimal128(9, 2), {}, D(L.QDB_DECIMAL32, 9, 2)),
    "dec_18": (pa.decimal128(18, 6), {}, D(L.QDB_DECIMAL64, 18, 6)),
    "dec_38": (pa.decimal128(38, 10), {}, D(L.QDB_DECIMAL128, 38, 10)),
    "dec_76": (pa.decimal256(76, 20), {}, D(L.QDB_DECIMAL256, 76, 20)),
    "dec_int32": (pa.decimal128(9, 2), {"store_decimal_as_integer": True}, D(L.QDB_DECIMAL32, 9, 2)),
    "dec_int64": (pa.decimal128(15, 2), {"store_decimal_as_integer": True}, D(L.QDB_DECIMAL64, 15, 2)),
    "string": (pa.string(), {}, L.QDB_VARCHAR),
    "large_string": (pa.large_string(), {}, L.QDB_VARCHAR),
    "binary": (pa.binary(), {}, L.QDB_BINARY),
    "int96": (pa.timestamp("ns"), {"use_deprecated_int96_timestamps": True}, L.QDB_TIMESTAMP_NS),
}


def sample(typ, n=50):
    if pa.types.is_decimal(typ):
        return pa.array([decimal.Decimal(i).scaleb(-typ.scale) for i in range(n)], typ)
    if typ == pa.uuid():
        return pa.array([uuid.UUID(int=i).bytes for i in range(n)], pa.binary(16)).cast(typ)
    if pa.types.is_fixed_size_binary(typ):
        return pa.array([bytes([i]) * typ.byte_width for i in range(n)], typ)
    if pa.types.is_binary(typ) or pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return pa.array([str(i) if not pa.types.is_binary(typ) else str(i).encode() for i in range(n)], typ)
    if pa.types.is_boolean(typ):
        return pa.array([i % 2 == 0 for i in range(n)])
    if pa.types.is_float16(typ):
        return pa.array(np.arange(n, dtype=np.float16))
    if pa.types.is_floating(typ):
        return pa.array(np.arange(n, dtype=float)).cast(typ)
    if pa.types.is_date32(typ) or pa.types.is_time32(typ):
        return pa.array(np.arange(n), pa.int32()).cast(typ)
    return pa.array(np.arange(n), pa.int64()).cast(typ)


@pytest.mark.parametrize("name", sorted(INFERENCE))
def test_inference_table(tmp_path, name):
    typ, opts, want = INFERENCE[name]
    path, pm = str(tmp_path / "e.parquet"), str(tmp_path / "_pm")
    pq.write_table(pa.table({name: sample(typ)}), path, **opts)
    generate(path, pm)
    check_pm(pm, path)
    with qdbpm.open(pm) as m:
        assert int(m.columns["type"][0]) == want, (name, L.qdb_type_name(int(m.columns["type"][0])))
        assert m.columns["id"][0] == -1 and m.designated_timestamp == -1 and m.unused_bytes == 0
        assert not m.feature_flags & L.FEATURE_SORTING_IS_DTS_ASC


def test_field_ids_become_ids(tmp_path):
    path, pm = str(tmp_path / "f.parquet"), str(tmp_path / "_pm")
    schema = pa.schema([pa.field("a", pa.int64(), metadata={"PARQUET:field_id": "7"}), pa.field("b", pa.int32()),
                        pa.field("s", pa.struct([pa.field("x", pa.int32(), metadata={"PARQUET:field_id": "42"})]))])
    pq.write_table(pa.table({"a": [1], "b": [2], "s": [{"x": 3}]}, schema=schema), path)
    generate(path, pm)
    with qdbpm.open(pm) as m:
        assert m.column_names == ["a", "b", "s.x"] and m.columns["id"].tolist() == [7, -1, 42]


def ts_table(n=200, nullable=False, ts_type=pa.timestamp("us")):
    return pa.Table.from_arrays(
        [pa.array(np.arange(n) * 10, pa.int64()), pa.array(np.arange(n) * 1_000_000, pa.int64()).cast(ts_type),
         pa.array([f"s{i}" for i in range(n)])],
        schema=pa.schema([("x", pa.int64()), pa.field("ts", ts_type, nullable=nullable), ("s", pa.string())]))


@pytest.mark.parametrize("case, sorting, table, dts", [
    ("first ascending required timestamp", [pq.SortingColumn(1), pq.SortingColumn(0)], ts_table(), 1),
    ("nanoseconds", [pq.SortingColumn(1)], ts_table(ts_type=pa.timestamp("ns")), 1),
    ("optional", [pq.SortingColumn(1)], ts_table(nullable=True), -1),
    ("descending", [pq.SortingColumn(1, descending=True)], ts_table(), -1),
    ("not first", [pq.SortingColumn(0), pq.SortingColumn(1)], ts_table(), -1),
    ("not a timestamp", [pq.SortingColumn(0)], ts_table(), -1),
    ("milliseconds map to DATE", [pq.SortingColumn(1)], ts_table(ts_type=pa.timestamp("ms")), -1),
    ("no sorting columns", None, ts_table(), -1),
])
def test_external_designated_timestamp(tmp_path, case, sorting, table, dts):
    path, pm = str(tmp_path / "s.parquet"), str(tmp_path / "_pm")
    pq.write_table(table, path, sorting_columns=sorting, row_group_size=50)
    generate(path, pm)
    with qdbpm.open(pm) as m:
        assert m.designated_timestamp == dts, case
        assert not m.feature_flags & L.FEATURE_SORTING_IS_DTS_ASC
        want = [(s.column_index, s.descending) for s in sorting or []]
        assert m.sorting_columns == want, case
        for c in range(3):
            assert bool(m.columns["flags"][c] & L.COLUMN_FLAG_DESCENDING) == ((c, True) in want)


def test_sorting_columns_that_disagree_between_row_groups_are_dropped(tmp_path):
    path, pm = str(tmp_path / "s.parquet"), str(tmp_path / "_pm")
    with pq.ParquetWriter(path, ts_table().schema, sorting_columns=[pq.SortingColumn(1)]) as w:
        w.write_table(ts_table(50))
    data = file_bytes(path)
    f_off, _, meta = footer_meta(data)
    s, _ = T.decode_struct(meta)
    rg = s.get(T.FMD_ROW_GROUPS).values[0]
    other, _ = T.decode_struct(T.encode_struct(rg))
    other.pop(T.RG_SORTING_COLUMNS)
    s.get(T.FMD_ROW_GROUPS).values.append(other)
    s.set(T.FMD_NUM_ROWS, T.T.I64, 100)
    with open(path, "wb") as f:
        f.write(data[:f_off] + T.frame_footer(T.encode_struct(s)))
    generate(path, pm)
    with qdbpm.open(pm) as m:
        assert m.row_group_count == 2 and m.sorting_columns == [] and m.designated_timestamp == -1


def test_nested_columns_map_to_leaves_with_levels(tmp_path):
    path, pm = str(tmp_path / "n.parquet"), str(tmp_path / "_pm")
    t = pa.table({
        "lst": pa.array([[1, 2], None, [], [3]], pa.list_(pa.int32())),
        "st": pa.array([{"a": 1, "b": "x"}, None, {"a": None, "b": "y"}, {"a": 4, "b": None}],
                       pa.struct([("a", pa.int64()), ("b", pa.string())])),
        "req": pa.array([1, 2, 3, 4], pa.int64()),
        "m": pa.array([[("k", 1)], [], None, [("j", 2)]], pa.map_(pa.string(), pa.int32())),
        "ll": pa.array([[[1], [2, 3]], None, [[]], [[4]]], pa.list_(pa.list_(pa.int16()))),
    }, schema=pa.schema([("lst", pa.list_(pa.int32())), ("st", pa.struct([("a", pa.int64()), ("b", pa.string())])),
                         pa.field("req", pa.int64(), nullable=False), ("m", pa.map_(pa.string(), pa.int32())),
                         ("ll", pa.list_(pa.list_(pa.int16())))]))
    pq.write_table(t, path)
    generate(path, pm)
    check_pm(pm, path)
    with qdbpm.open(pm) as m:
        got = {n: (int(c["max_def_level"]), int(c["max_rep_level"]), L.flags_repetition(int(c["flags"])),
                   int(c["type"])) for n, c in zip(m.column_names, m.columns)}
    assert got == {
        "lst.list.element": (3, 1, L.REPETITION_OPTIONAL, L.QDB_INT),
        "st.a": (2, 0, L.REPETITION_OPTIONAL, L.QDB_LONG),
        "st.b": (2, 0, L.REPETITION_OPTIONAL, L.QDB_VARCHAR),
        "req": (0, 0, L.REPETITION_REQUIRED, L.QDB_LONG),
        "m.key_value.key": (2, 1, L.REPETITION_REQUIRED, L.QDB_VARCHAR),
        "m.key_value.value": (3, 1, L.REPETITION_OPTIONAL, L.QDB_INT),
        "ll.list.element.list.element": (5, 2, L.REPETITION_OPTIONAL, L.QDB_SHORT),
    }


# --- bloom_columns: filters built from the data ---------------------------------------------------------

N_BUILT = 1200


def built_table(n=N_BUILT):
    rng = np.random.default_rng(5)
    ints = rng.integers(0, 10 ** 9, n)
    ints[::7] = 0  # repeats
    null = rng.random(n) < 0.1
    f64 = rng.normal(size=n)
    f64[::50] = np.nan
    f64[1::50] = -0.0
    return pa.table({
        "i64": pa.array(ints, pa.int64(), mask=null),
        "i32": pa.array((ints % 100_000).astype(np.int32), pa.int32(), mask=null),
        "i8": pa.array((ints % 200 - 100).astype(np.int8), pa.int8()),
        "u32": pa.array((ints * 5).astype(np.uint32), pa.uint32()),
        "f64": pa.array(f64, pa.float64(), mask=null),
        "f32": pa.array(f64.astype(np.float32), pa.float32()),
        "s": pa.array([None if m else f"str-{v}" for v, m in zip(ints, null)]),
        "bin": pa.array([v.tobytes() for v in ints], pa.binary()),
        "ts_s": pa.array(ints, pa.timestamp("s")),
        "ts_ms": pa.array(ints, pa.timestamp("ms", "UTC")),
        "ts_ns": pa.array(ints * 1000, pa.timestamp("ns")),
        "date": pa.array((ints % 40000).astype(np.int32), pa.date32()),
        "time_s": pa.array((ints % 86400).astype(np.int32), pa.time32("s")),
        "dec": pa.array([decimal.Decimal(int(v)).scaleb(-3) for v in ints], pa.decimal128(18, 3)),
        "dec_big": pa.array([decimal.Decimal(int(v) * 10 ** 30).scaleb(-5) for v in ints], pa.decimal256(60, 5)),
        "u": pa.array([uuid.UUID(int=int(v)).bytes for v in ints], pa.binary(16)).cast(pa.uuid()),
        "fsb": pa.array([v.tobytes() for v in ints], pa.binary(8)),
        "dict": pa.array([f"k{v % 50}" for v in ints]).dictionary_encode(),
        "f16": pa.array((ints % 1000).astype(np.float16)),
    })


def stored_values(t, name, rows, width=None):
    """The values of one column in rows [a, b) as the Parquet file stores them (the SBBF's
    input): non-null, temporal in the stored unit, decimals unscaled big-endian in `width`
    bytes (the FIXED_LEN_BYTE_ARRAY length), UUIDs as 16 bytes."""
    a, b = rows
    arr = t.column(name).combine_chunks().slice(a, b - a).drop_null()
    typ = arr.type
    if pa.types.is_dictionary(typ):
        arr = arr.dictionary_decode()
    if name == "ts_s":
        return arr.cast(pa.timestamp("ms")).cast(pa.int64()).to_numpy()
    if name == "time_s":
        return (arr.cast(pa.int32()).to_numpy() * 1000).astype(np.int32)
    if pa.types.is_timestamp(typ):
        return arr.cast(pa.int64()).to_numpy()
    if pa.types.is_date32(typ):
        return arr.cast(pa.int32()).to_numpy()
    if pa.types.is_decimal(typ):
        return [int(v.scaleb(typ.scale, _EXACT)).to_bytes(width, "big", signed=True) for v in arr.to_pylist()]
    if typ == pa.uuid():
        return arr.storage.to_pylist()
    if pa.types.is_float16(typ):
        v = arr.to_numpy(zero_copy_only=False)
        return [x.tobytes() for x in v[~np.isnan(v)].astype("<f2")]
    if pa.types.is_integer(typ):
        wide = np.int64 if typ.bit_width == 64 else np.int32
        return arr.to_numpy().astype(wide)
    if pa.types.is_floating(typ):
        v = arr.to_numpy(zero_copy_only=False)
        return v[~np.isnan(v)]  # NaN is never inserted (and never contained)
    return arr.to_pylist()


BUILT = ["i64", "i32", "i8", "u32", "f64", "f32", "s", "bin", "ts_s", "ts_ms", "ts_ns", "date", "time_s", "dec",
         "dec_big", "u", "fsb", "dict", "f16"]


def test_bloom_columns_built_from_the_data(tmp_path):
    t = built_table()
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    rows = 300
    pq.write_table(t, path, row_group_size=rows)
    generate(path, pm, bloom_columns=BUILT)
    check_pm(pm, path)
    with qdbpm.open(pm) as m:
        assert [m.column_names[int(b)] for b in m.bloom_columns] == BUILT
        R = m.row_group_count
        assert R == N_BUILT // rows
        for name in BUILT:
            for r in range(R):
                bits = m.bloom_filter(r, name)
                assert bits is not None and len(bits) % 32 == 0, (name, r)
                sbbf = SplitBlockBloomFilter.from_bytes(bits)
                width = int(m.columns["fixed_byte_len"][m.column_index(name)])
                values = stored_values(t, name, (r * rows, (r + 1) * rows), width)
                assert len(values) > 0
                assert sbbf.contains(values).all(), (name, r)


def test_built_filters_prune_absent_values_and_keep_present_ones(tmp_path):
    t = built_table()
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    pq.write_table(t, path, row_group_size=100)
    generate(path, pm, bloom_columns=["i64", "s", "ts_s", "dec", "u", "date", "f64"])
    with qdbpm.open(pm) as m:
        R = m.row_group_count
        i64 = t.column("i64").to_pylist()
        ts_s = t.column("ts_s").to_pylist()
        for name, values in (("i64", i64), ("s", t.column("s").to_pylist()), ("ts_s", ts_s),
                             ("dec", t.column("dec").to_pylist()),
                             ("u", [uuid.UUID(bytes=b) for b in t.column("u").cast(pa.binary(16)).to_pylist()]),
                             ("date", t.column("date").to_pylist()), ("f64", t.column("f64").to_pylist())):
            # Every present value: its row group survives.
            for k in range(0, N_BUILT, 37):
                v = values[k]
                if v is None or (isinstance(v, float) and np.isnan(v)):
                    continue
                assert m.prune(col(name) == v)[k // 100], (name, k, v)
        # Absent values: min/max cannot drop the row groups (the values lie inside their ranges),
        # the filters do.
        lo, hi = min(v for v in i64 if v is not None), max(v for v in i64 if v is not None)
        present = set(i64)
        absent = [v for v in range(lo + 1, hi, (hi - lo) // 500) if v not in present][:40]
        kept = sum(int(m.prune(col("i64") == v).sum()) for v in absent)
        assert kept <= 0.1 * len(absent) * R, kept
        s_absent = [f"str-{v}" for v in absent]
        assert sum(int(m.prune(col("s") == v).sum()) for v in s_absent) <= 0.1 * len(absent) * R
        assert m.prune(col("i64").isin(absent[:3])).sum() <= 1
        # Nulls were not inserted: IS NULL still keeps the row groups that have nulls.
        assert m.prune(col("i64").is_null()).all()


def test_bloom_columns_do_not_replace_the_files_filters(tmp_path):
    t = built_table(400)
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    pq.write_table(t, path, row_group_size=100, bloom_filter_options={"i64": {"ndv": 1000, "fpp": 0.001}})
    generate(path, pm, bloom_columns=["i64", "s"])
    check_pm(pm, path)  # i64: the file's own bitsets, byte for byte
    with qdbpm.open(pm) as m:
        assert len(m.bloom_filter(0, "i64")) != len(SplitBlockBloomFilter.for_ndv(100).to_bytes())
        assert m.bloom_filter(0, "s") is not None


@pytest.mark.parametrize("kwargs, message", [
    ({"bloom_columns": ["nope"]}, "no column 'nope'"),
    ({"bloom_columns": ["i64"], "bloom": None}, "inline"),
    ({"bloom_columns": ["i64"], "bloom": "external"}, "inline"),
    ({"bloom_columns": ["st.a"]}, "nested"),
    ({"bloom_columns": ["lst.list.element"]}, "nested"),
    ({"bloom_columns": ["flag"]}, "BOOLEAN"),
    ({"bloom": "sometimes"}, "bloom must be"),
])
def test_bloom_argument_errors(tmp_path, kwargs, message):
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    pq.write_table(pa.table({"i64": [1, 2], "flag": [True, False], "st": [{"a": 1}, {"a": 2}],
                             "lst": [[1], [2]]}), path)
    with pytest.raises(PmError, match=message):
        generate(path, pm, **kwargs)
    assert not os.path.exists(pm)


def test_bloom_columns_with_empty_and_all_null_row_groups(tmp_path):
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    schema = pa.schema([("x", pa.int64())])
    with pq.ParquetWriter(path, schema) as w:
        w.write_table(pa.table({"x": pa.array([None, None], pa.int64())}))
        w.write_table(pa.table({"x": pa.array([5, None, 6], pa.int64())}))
    generate(path, pm, bloom_columns=["x"])
    with qdbpm.open(pm) as m:
        assert not SplitBlockBloomFilter.from_bytes(m.bloom_filter(0, "x")).contains(np.array([5], np.int64))[0]
        assert SplitBlockBloomFilter.from_bytes(m.bloom_filter(1, "x")).contains(np.array([5, 6], np.int64)).all()
        assert m.prune(col("x") == 5).tolist() == [False, True]


# --- update: UNUSED_BYTES of external files, by hand -----------------------------------------------------


def grow(path, table, *, replace_last=False):
    """Append `table` as new row groups after the footer, with the thrift builders (independent of
    qdbpm.append); with replace_last, the file's last row group is rewritten there too and the new
    footer lists the copy in its place (QuestDB's O3 merge). Returns the dead bytes this adds."""
    data = file_bytes(path)
    f_off, f_len, meta = footer_meta(data)
    s, _ = T.decode_struct(meta)
    rgs = s.get(T.FMD_ROW_GROUPS).values
    out = bytearray(data)
    dead = f_len + 8
    if replace_last:
        last = rgs[-1]
        cols = last.get(T.RG_COLUMNS).values
        start = min(cc.get(T.CC_META_DATA).get(11) or cc.get(T.CC_META_DATA).get(9) for cc in cols)
        end = max((cc.get(T.CC_META_DATA).get(11) or cc.get(T.CC_META_DATA).get(9)) + cc.get(T.CC_META_DATA).get(7)
                  for cc in cols)
        copy, _ = T.decode_struct(T.encode_struct(last))
        T.rebase_row_group(copy, len(out) - start)
        out += data[start:end]
        rgs[-1] = copy
        dead += sum(cc.get(T.CC_META_DATA).get(7) for cc in cols)
    buf = pa.BufferOutputStream()
    pq.write_table(table, buf)
    new = buf.getvalue().to_pybytes()
    n_off, _, n_meta = footer_meta(new)
    n, _ = T.decode_struct(n_meta)
    delta = len(out) - 4
    for rg in n.get(T.FMD_ROW_GROUPS).values:
        rgs.append(T.rebase_row_group(rg, delta))
    out += new[4:n_off]
    s.set(T.FMD_NUM_ROWS, T.T.I64, sum(rg.get(T.RG_NUM_ROWS) for rg in rgs))
    with open(path, "wb") as f:
        f.write(bytes(out) + T.frame_footer(T.encode_struct(s)))
    return dead


def piece(lo, n):
    return pa.table({"a": np.arange(lo, lo + n, dtype=np.int64), "s": [f"v{i}" for i in range(lo, lo + n)]})


def test_update_unused_bytes_by_hand(tmp_path):
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    pq.write_table(piece(0, 100), path, row_group_size=50)
    generate(path, pm)
    snaps = [os.path.getsize(path)]
    expect = 0
    with qdbpm.open(pm) as m:
        assert m.unused_bytes == 0
    for k, replace in enumerate([False, True, False, True]):
        old_size = os.path.getsize(path)
        old_footer_len = int.from_bytes(file_bytes(path)[-8:-4], "little")
        with qdbpm.open(pm) as m:
            last = m.chunks[m.row_group_count - 1]
            replaced = int(last["total_compressed"].sum()) if replace else 0
        dead = grow(path, piece(1000 * (k + 1), 30), replace_last=replace)
        # By hand: the old footer + its u32 length + PAR1, plus the replaced chunks.
        assert dead == old_footer_len + 8 + replaced
        expect += old_footer_len + 8 + replaced
        update(path, pm)
        snaps.append(os.path.getsize(path))
        with qdbpm.open(pm) as m:
            assert m.unused_bytes == expect
            assert m.snapshots() == snaps[::-1]
        check_pm(pm, path)
        assert old_size < os.path.getsize(path)
    # A second update without a change adds nothing.
    update(path, pm)
    with qdbpm.open(pm) as m:
        assert m.unused_bytes == expect
    for size in snaps:
        with qdbpm.open(pm, parquet_size=size):
            pass
        check_pm(pm, path, parquet_size=size)
    assert pq.read_table(path).num_rows == 100 + 4 * 30


def test_update_copies_and_builds_filters_for_new_row_groups(tmp_path):
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    pq.write_table(piece(0, 100), path, row_group_size=50, bloom_filter_options={"a": True})
    generate(path, pm, bloom_columns=["s"])
    grow(path, piece(500, 40))  # written without filters
    update(path, pm)
    with qdbpm.open(pm) as m:
        assert m.row_group_count == 3
        assert [m.column_names[int(b)] for b in m.bloom_columns] == ["a", "s"]
        # The file has no filter for 'a' in the new row group: qdbpm builds one; 's' too.
        for name, values in (("a", np.arange(500, 540)), ("s", [f"v{i}" for i in range(500, 540)])):
            assert SplitBlockBloomFilter.from_bytes(m.bloom_filter(2, name)).contains(values).all()
        assert not m.prune(col("a") == 520).tolist()[:2] == [True, True]
        assert m.prune(col("a") == 520)[2]


def test_update_refuses_fewer_row_groups(tmp_path):
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    pq.write_table(piece(0, 100), path, row_group_size=50)
    generate(path, pm)
    pq.write_table(piece(0, 100), path, row_group_size=100)
    with pytest.raises(PmError, match="fewer"):
        update(path, pm)


# --- the streaming writer ----------------------------------------------------------------------------


def test_streamed_pm_is_byte_identical_to_encode_file(tmp_path, monkeypatch):
    """write_new streams dense files piece by piece (writeback started per piece): the same bytes
    as encode_file, for files with and without out-of-line stats and filters."""
    from qdbpm.pm import writer

    class Counting(writer.FileOps):
        def __init__(self):
            self.calls = []

        def pwrite(self, fd, data, offset):
            self.calls.append(("pwrite", offset, len(data)))
            super().pwrite(fd, data, offset)

        def start_writeback(self, fd, offset, length):
            self.calls.append(("writeback", offset, length))
            super().start_writeback(fd, offset, length)

    monkeypatch.setattr(writer, "STREAM_PIECE_BYTES", 4096)
    n = 400
    short = pa.table({"a": np.arange(n), "ts": pa.array(np.arange(n) * 1000, pa.timestamp("us")),
                      "s": [f"v{i % 9}" for i in range(n)]})
    long = short.append_column("long", pa.array([f"a long string value {i}" for i in range(n)]))
    for name, table, kw, streamed in (("short", short, {}, True), ("long", long, {}, False),
                                      ("bloom", short, {"bloom_filter_options": {"a": {"ndv": 10}}}, False)):
        path, pm = str(tmp_path / f"{name}.parquet"), str(tmp_path / f"_pm.{name}")
        pq.write_table(table, path, row_group_size=1, **kw)
        ops = Counting()
        size = generate(path, pm, ops=ops)
        want = writer.encode_file(generate_description(path))
        assert file_bytes(pm) == want and size == len(want), name
        kinds = [c[0] for c in ops.calls]
        assert (kinds.count("writeback") >= 3) == streamed and (kinds.count("pwrite") > 3) == streamed, name
        # The pieces tile the file: every byte written exactly once.
        writes = sorted((o, o + k) for kind, o, k in ops.calls if kind == "pwrite")
        assert writes[0][0] == 0 and writes[-1][1] == len(want)
        assert all(a[1] == b[0] for a, b in zip(writes, writes[1:]))
        check_pm(pm, path)


def generate_description(path):
    """The Description generate() writes for `path` (bloom="inline"), rebuilt independently."""
    import dataclasses

    from qdbpm.sync.generate import describe_footer, parquet_blooms
    from qdbpm.parquet.footer import read_footer

    with open(path, "rb") as f:
        footer = read_footer(f)
        d = describe_footer(footer)
        blooms = parquet_blooms(f, footer, range(footer.row_group_count), range(footer.column_count), False)
    if blooms is not None:
        have = sorted(np.nonzero((blooms.length >= 0).any(axis=0))[0].tolist())
        d = dataclasses.replace(d, blooms=blooms, bloom_columns=have)
    return d
