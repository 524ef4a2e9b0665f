"""qdbpm.parquet / the _thrift kernel against pyarrow, DuckDB and the generic Thrift decoder."""

import base64
import decimal
import glob
import io
import os
import re
import uuid

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qdbpm.parquet import _thrift
from qdbpm.pm import layout as L
from qdbpm.parquet import compact as T
from qdbpm.parquet.build import frame_footer
from qdbpm.errors import ParquetFormatError
from qdbpm.parquet.constants import MAGIC
from qdbpm.parquet.footer import PARQUET_ENCODING_TO_BIT, TAIL_READ, ParquetFooter, parse_footer, read_footer

from conftest import PEER_DATA
from conftest import read_bytes as file_bytes
from support.parquet_oracle import compare_duckdb_stats, compare_pyarrow, compare_thrift, footer_of, pyarrow_reads

# --- peer data ---------------------------------------------------------------------------------

PEER_FILES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(PEER_DATA, "*")))
# Files pyarrow cannot read the metadata of, and what qdbpm does with each.
PYARROW_REJECTS = {
    # Not Parquet at all: ParquetFormatError.
    **{f: "reject" for f in PEER_FILES if not f.endswith(".parquet")},
    # A valid footer whose MAP keys are optional: parquet-cpp refuses to build an *Arrow* schema
    # for it ("Map keys must be annotated as required"), which is no concern of the footer.
    # qdbpm parses it; checked against DuckDB and the generic decoder instead.
    "incorrect_map_schema.parquet": "parse",
}


def peer(name):
    return os.path.join(PEER_DATA, name)


def test_peer_data_directory_is_there():
    assert len([f for f in PEER_FILES if f.endswith(".parquet")]) >= 50


@pytest.mark.parametrize("name", PEER_FILES)
def test_peer_file(name):
    path = peer(name)
    if pyarrow_reads(path):
        footer = read_footer(path)
        assert compare_thrift(footer) == footer.row_group_count * footer.column_count
        dropped = compare_pyarrow(footer, path)["pyarrow_dropped"]
        assert compare_duckdb_stats(footer, path, dropped) >= (1 if dropped else 0)
        assert footer.file_size == os.path.getsize(path)
        assert footer.footer_offset + footer.footer_length + 8 == footer.file_size
        return
    assert name in PYARROW_REJECTS, f"pyarrow cannot read {name}: decide what qdbpm does with it"
    if PYARROW_REJECTS[name] == "reject":
        with pytest.raises(ParquetFormatError):
            read_footer(path)
    else:
        footer = read_footer(path)
        compare_thrift(footer)
        compare_duckdb(footer, path)


def compare_duckdb(footer, path):
    rows = duckdb.connect().execute(
        "select row_group_id, column_id, num_values, path_in_schema, type, compression, data_page_offset, "
        "dictionary_page_offset, total_compressed_size, total_uncompressed_size, stats_min_value, stats_max_value "
        "from parquet_metadata(?)", [path]).fetchall()
    assert len(rows) == footer.row_group_count * footer.column_count
    for r, c, nv, p, t, codec, dpo, dict_po, tcs, tus, lo, hi in rows:
        ch = footer.chunks[r, c]
        assert ch["num_values"] == nv and ".".join(footer.leaves[c].path) == p.replace(", ", ".")
        assert L.PHYSICAL_TYPE_NAMES[footer.physical_types[r, c]] == t
        assert L.CODEC_NAMES[ch["codec"]] == codec
        assert footer.data_page_offset[r, c] == dpo
        assert footer.dictionary_page_offset[r, c] == (dict_po if dict_po is not None else -1)
        assert ch["total_compressed"] == tcs and footer.total_uncompressed[r, c] == tus
        mn, mx = footer.min_max(r, c)
        assert (mn.decode() if mn else None, mx.decode() if mx else None) == (lo, hi)


def test_peer_special_cases():
    f = read_footer(peer("data_index_bloom_encoding_stats.parquet"))
    # parquet-java wrote a bloom filter offset but no length.
    assert f.bloom_offset[0, 0] == 192 and f.bloom_length[0, 0] == -1
    assert f.column_index_offset[0, 0] > 0 and f.offset_index_offset[0, 0] > 0
    f = read_footer(peer("column_chunk_key_value_metadata.parquet"))
    # data_page_offset 0 with a dictionary page: the byte range starts at the dictionary.
    assert f.data_page_offset[0, 0] == 0 and f.chunks["byte_range_start"][0, 0] == 4
    f = read_footer(peer("unknown-logical-type.parquet"))
    assert ("OTHER", 2555) in [s.logical_type for s in f.schema] or any(
        s.logical_type and s.logical_type[0] == "OTHER" for s in f.schema)
    f = read_footer(peer("nested_structs.rust.parquet"))
    assert f.column_count == 216 and max(len(leaf.path) for leaf in f.leaves) == 2
    f = read_footer(peer("nested_maps.snappy.parquet"))
    levels = [(leaf.max_def_level, leaf.max_rep_level) for leaf in f.leaves]
    assert levels[:3] == [(2, 1), (4, 2), (4, 2)]  # as pyarrow says
    f = read_footer(peer("int96_from_spark.parquet"))
    assert f.leaves[0].physical_type == L.PT_INT96


def test_kernel_constants_match_layout():
    assert _thrift.STAT_BITS == {k: getattr(L, k) for k in _thrift.STAT_BITS}
    assert {e: b for e, b in enumerate(_thrift.ENCODING_BITS) if b} == PARQUET_ENCODING_TO_BIT
    assert tuple((n, L.CHUNK_DTYPE.fields[n][1], L.CHUNK_DTYPE[n].itemsize) for n in L.CHUNK_DTYPE.names) \
        == _thrift.CHUNK_LAYOUT


# --- files written here --------------------------------------------------------------------------


def decimals(ints, nulls, exponent, type_):
    return pa.array([None if m else decimal.Decimal(int(i)).scaleb(exponent) for i, m in zip(ints, nulls)], type_)


def typed_table(n=300, seed=1):
    rng = np.random.default_rng(seed)
    nulls = rng.random(n) < 0.1
    ints = rng.integers(-100, 100, n)

    def arr(values, type_):
        return pa.array(values, type_, mask=nulls)

    f64 = rng.normal(size=n)
    f64[::17] = np.nan
    ts = rng.integers(0, 2 * 10 ** 9, n)
    return pa.table({
        "i8": arr(ints, pa.int8()), "i16": arr(ints * 300, pa.int16()), "i32": arr(ints * 70000, pa.int32()),
        "i64": arr(ints * 10 ** 12, pa.int64()),
        "u8": arr(np.abs(ints), pa.uint8()), "u16": arr(np.abs(ints) * 600, pa.uint16()),
        "u32": arr(np.abs(ints) * 4 * 10 ** 7, pa.uint32()),
        "u64": arr(np.abs(ints).astype(np.uint64) << 60, pa.uint64()),
        "f32": arr(f64.astype(np.float32), pa.float32()), "f64": arr(f64, pa.float64()),
        "f16": arr(f64.astype(np.float16), pa.float16()),
        "ts_s": arr(ts, pa.timestamp("s")), "ts_ms": arr(ts * 1000, pa.timestamp("ms", "UTC")),
        "ts_us": arr(ts * 10 ** 6, pa.timestamp("us")),
        "ts_us_tz": arr(ts * 10 ** 6, pa.timestamp("us", "Europe/Paris")),
        "ts_ns": arr(ts * 10 ** 9, pa.timestamp("ns")), "ts_ns_tz": arr(ts * 10 ** 9, pa.timestamp("ns", "UTC")),
        "date": arr((ts // 86400).astype(np.int32), pa.date32()),
        "time_ms": arr((ts % 86400).astype(np.int32) * 1000, pa.time32("ms")),
        "time_us": arr((ts % 86400) * 10 ** 6, pa.time64("us")),
        "dec9": decimals(ints * 1000, nulls, -2, pa.decimal128(9, 2)),
        "dec38": decimals(ints, nulls, 20, pa.decimal128(38, 5)),
        "dec76": decimals(ints, nulls, 50, pa.decimal256(76, 10)),
        "str": pa.array([None if m else f"s{i % 37}" for i, m in zip(range(n), nulls)]),
        "bin": pa.array([None if m else bytes([i % 251]) * (i % 5) for i, m in zip(range(n), nulls)], pa.binary()),
        "fsb": pa.array([bytes([i % 256]) * 16 for i in range(n)], pa.binary(16)),
        "uuid": pa.array([uuid.UUID(int=i * 7919).bytes for i in range(n)], pa.binary(16)).cast(pa.uuid()),
        "bool": arr(ints > 0, pa.bool_()),
        "lst": pa.array([None if i % 11 == 0 else list(range(i % 4)) for i in range(n)], pa.list_(pa.int32())),
        "st": pa.array([{"a": i, "b": f"x{i}"} for i in range(n)], pa.struct([("a", pa.int64()), ("b", pa.string())])),
        "dict": pa.array([f"k{i % 5}" for i in range(n)]).dictionary_encode(),
    })


PYARROW_VARIANTS = {
    "defaults": {},
    "rowgroups_zstd": {"row_group_size": 64, "compression": "zstd"},
    "gzip_v1": {"row_group_size": 100, "compression": "gzip", "version": "1.0"},
    "brotli_pageindex": {"row_group_size": 128, "compression": "brotli", "write_page_index": True},
    "lz4_nodict": {"compression": "lz4", "use_dictionary": False, "row_group_size": 150},
    "none_nostats": {"compression": "none", "write_statistics": False},
    "per_column": {"compression": {"i64": "snappy", "str": "zstd", "f64": "gzip"}, "use_dictionary": ["str"],
                   "use_byte_stream_split": ["f32", "f64"], "row_group_size": 90},
    "datapage_v2": {"data_page_version": "2.0", "row_group_size": 200},
    "bloom_sorted": {"bloom_filter_options": {"i64": True, "str": {"ndv": 100, "fpp": 0.01}},
                     "sorting_columns": [pq.SortingColumn(3), pq.SortingColumn(0, descending=True, nulls_first=True)],
                     "row_group_size": 120},
}


@pytest.mark.parametrize("variant", sorted(PYARROW_VARIANTS))
def test_pyarrow_written(tmp_path, variant):
    path = str(tmp_path / "t.parquet")
    pq.write_table(typed_table(), path, **PYARROW_VARIANTS[variant])
    footer = read_footer(path)
    assert compare_thrift(footer) == footer.row_group_count * footer.column_count
    seen = compare_pyarrow(footer, path)
    if variant != "none_nostats":
        assert seen["raw"] > 0
    if variant.startswith("bloom"):
        assert (footer.bloom_offset[:, 3] > 0).all() and (footer.bloom_length[:, 3] > 0).all()
        assert footer.sorting_columns[0] == [(3, False, False), (0, True, True)]
    if variant == "brotli_pageindex":
        assert (footer.column_index_offset >= 0).any() and (footer.offset_index_offset >= 0).all()


def test_pyarrow_typed_leaves(tmp_path):
    path = str(tmp_path / "t.parquet")
    pq.write_table(typed_table(), path)
    leaves = {leaf.name: leaf for leaf in read_footer(path).leaves}
    assert leaves["i8"].logical_type == ("INTEGER", 8, True) and leaves["u64"].logical_type == ("INTEGER", 64, False)
    assert leaves["ts_ms"].logical_type == ("TIMESTAMP", "MILLIS", True)
    assert leaves["ts_us"].logical_type == ("TIMESTAMP", "MICROS", False)
    assert leaves["ts_ns_tz"].logical_type == ("TIMESTAMP", "NANOS", True)
    assert leaves["time_us"].logical_type == ("TIME", "MICROS", False)
    assert leaves["date"].logical_type == ("DATE",)
    assert leaves["dec38"].logical_type == ("DECIMAL", 5, 38)
    assert leaves["dec38"].physical_type == L.PT_FIXED_LEN_BYTE_ARRAY
    assert leaves["uuid"].logical_type == ("UUID",) and leaves["uuid"].type_length == 16
    assert leaves["f16"].logical_type == ("FLOAT16",)
    assert leaves["str"].logical_type == ("STRING",) and leaves["str"].converted_type == 0
    assert leaves["lst.list.element"].max_rep_level == 1 and leaves["lst.list.element"].max_def_level == 3
    assert leaves["st.a"].max_def_level == 2 and leaves["st.b"].repetition == L.REPETITION_OPTIONAL
    assert leaves["fsb"].physical_type == L.PT_FIXED_LEN_BYTE_ARRAY and leaves["fsb"].logical_type is None


DUCKDB_SQL = """
    select (i % 100)::tinyint as i8, (i % 200)::utinyint as u8, (i * 1000)::integer as i32,
           (i * 10000000000)::bigint as i64,
           (i * 1.5)::double as d, (i * 1.5)::float as f, (i / 7)::decimal(9, 3) as dec9,
           (i * 123456789)::decimal(38, 2) as dec38, 'v' || (i % 13)::varchar as s, ('x' || i)::blob as b,
           timestamp '2024-01-01' + to_seconds(i) as ts, timestamptz '2024-01-01 00:00:00+00' + to_seconds(i) as tstz,
           date '2020-01-01' + (i % 400)::integer as dt, i % 3 = 0 as flag, gen_random_uuid() as u,
           [i, i + 1] as lst, {'a': i, 'b': 's' || i} as st,
           case when i % 5 = 0 then null else i end as nullable
    from range(0, 10000) t(i)
"""


@pytest.mark.parametrize("codec", ["zstd", "snappy", "uncompressed", "gzip"])
def test_duckdb_written(tmp_path, codec):
    path = str(tmp_path / "d.parquet")
    duckdb.connect().execute(
        f"copy ({DUCKDB_SQL}) to '{path}' (format parquet, row_group_size 1024, compression '{codec}')")
    footer = read_footer(path)
    assert footer.row_group_count >= 3
    assert compare_thrift(footer) == footer.row_group_count * footer.column_count
    compare_pyarrow(footer, path)
    assert (footer.chunks["codec"] == L.CODEC_NAMES.index(codec.upper())).all()


# --- reading: sources, I/O count, magic and lengths --------------------------------------------------


class CountingFile(io.BytesIO):
    def __init__(self, data):
        super().__init__(data)
        self.reads = []

    def read(self, n=-1):
        self.reads.append((self.tell(), n))
        return super().read(n)

    def readinto(self, b):
        self.reads.append((self.tell(), len(b)))
        return super().readinto(b)


def small_file(tmp_path, rows=100, row_group_size=None):
    path = str(tmp_path / "s.parquet")
    pq.write_table(pa.table({"a": np.arange(rows), "s": [str(i) for i in range(rows)]}), path,
                   row_group_size=row_group_size)
    return path


def test_file_like_sources_and_io_count(tmp_path):
    path = small_file(tmp_path)
    data = file_bytes(path)
    expected = read_footer(path)
    f = CountingFile(data)
    got = read_footer(f)
    assert f.reads == [(0, len(data))]  # a small file is one read, leading magic included
    assert got.footer_offset == expected.footer_offset and got.buffer.tobytes() == expected.buffer.tobytes()
    with pa.OSFile(path) as nf:
        assert read_footer(nf).chunks.tobytes() == expected.chunks.tobytes()
    with pa.memory_map(path) as mm:
        assert read_footer(mm).chunks.tobytes() == expected.chunks.tobytes()
    import fsspec

    with fsspec.open(path, "rb") as ff:
        assert read_footer(ff).chunks.tobytes() == expected.chunks.tobytes()
    assert read_footer(pa.BufferReader(data)).num_rows == 100


def test_large_footer_takes_two_reads(tmp_path):
    path = small_file(tmp_path, rows=20000, row_group_size=20)
    data = file_bytes(path)
    offset, meta = footer_of(data)
    assert len(meta) > TAIL_READ
    f = CountingFile(data)
    footer = read_footer(f, file_size=len(data), check_header=False)
    assert f.reads == [(len(data) - TAIL_READ, TAIL_READ), (offset, len(meta) + 8 - TAIL_READ)]
    assert footer.buffer.tobytes() == meta and footer.row_group_count == 1000
    f = CountingFile(data)
    read_footer(f)
    assert f.reads[-1] == (0, 4)  # the leading magic costs one small read when asked for
    compare_pyarrow(footer, path)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d[:11], "fewer than the 12"),
    (lambda d: d[:-4] + b"PAR2", "last 4 bytes"),
    (lambda d: b"PAR2" + d[4:], "first 4 bytes"),
    (lambda d: d[:-4] + b"PARE", "encrypted"),
    (lambda d: d[:-8] + (len(d)).to_bytes(4, "little") + MAGIC, "footer length"),
    (lambda d: d[:-8] + (0).to_bytes(4, "little") + MAGIC, "footer length"),
    (lambda d: d[:4] + d[-8:], "footer length"),
])
def test_magic_and_length_errors(tmp_path, mutate, message):
    data = mutate(file_bytes(small_file(tmp_path)))
    with pytest.raises(ParquetFormatError, match=message):
        read_footer(io.BytesIO(data))
    p = tmp_path / "bad.parquet"
    p.write_bytes(data)
    with pytest.raises(ParquetFormatError, match="bad.parquet"):
        read_footer(str(p))


def test_short_read_is_a_format_error(tmp_path):
    data = file_bytes(small_file(tmp_path))
    with pytest.raises(ParquetFormatError, match="short read"):
        read_footer(io.BytesIO(data[:-100]), file_size=len(data))


def test_error_messages_give_footer_and_file_offsets(tmp_path):
    data = bytearray(file_bytes(small_file(tmp_path)))
    offset, meta = footer_of(bytes(data))
    data[offset + 1] = 0xFF  # inside the first field's value: schema list header
    with pytest.raises(ParquetFormatError) as e:
        read_footer(io.BytesIO(bytes(data)))
    m = re.search(r"at footer byte (\d+) \(file offset (\d+)\)$", str(e.value))
    assert m and int(m.group(2)) == offset + int(m.group(1)) and int(m.group(1)) <= 4, str(e.value)


# --- structural validation (footers edited with the generic codec) ----------------------------------


def edit(data: bytes, fn) -> bytes:
    """The file with its FileMetaData decoded, changed by fn(meta Struct) and re-encoded."""
    offset, meta = footer_of(data)
    s, _ = T.decode_struct(meta)
    fn(s)
    return data[:offset] + frame_footer(T.encode_struct(s))


def chunk_md(s, r=0, c=0):
    return s.get(4).values[r].get(1).values[c].get(3)


def set_stats(s, r, c, **fields):
    ids = {"max": 1, "min": 2, "null_count": 3, "distinct_count": 4, "max_value": 5, "min_value": 6,
           "is_max_value_exact": 7, "is_min_value_exact": 8, "nan_count": 9}
    stats = T.Struct()
    for k, v in fields.items():
        stats.set(ids[k], T.T.BINARY if isinstance(v, bytes) else T.T.BOOL if isinstance(v, bool) else T.T.I64, v)
    chunk_md(s, r, c).set(12, T.T.STRUCT, stats)


def two_row_groups(tmp_path):
    path = str(tmp_path / "two.parquet")
    pq.write_table(pa.table({"a": np.arange(10), "s": [str(i) for i in range(10)]}), path, row_group_size=5)
    return file_bytes(path)


BAD_EDITS = {
    "file_path": (lambda s: s.get(4).values[1].get(1).values[0].set(1, T.T.BINARY, b"other.parquet"),
                  r"row group 1, column chunk 0: has file_path 'other.parquet': external column chunks"),
    "codec": (lambda s: chunk_md(s).set(4, T.T.I32, 8), "unsupported compression codec 8"),
    "negative_offset": (lambda s: chunk_md(s).set(9, T.T.I64, -5), "negative ColumnMetaData.data_page_offset"),
    "negative_size": (lambda s: chunk_md(s, 1, 1).set(7, T.T.I64, -1), "negative ColumnMetaData.total_compressed_size"),
    "negative_rows": (lambda s: s.get(4).values[0].set(3, T.T.I64, -1), "negative RowGroup.num_rows"),
    "range_past_footer": (lambda s: chunk_md(s, 1, 1).set(7, T.T.I64, 10 ** 6), "outside the data region"),
    "range_overflows": (lambda s: chunk_md(s, 1, 1).set(7, T.T.I64, (1 << 63) - 1), "outside the data region"),
    "bloom_overflows": (lambda s: chunk_md(s).set(14, T.T.I64, 100).set(15, T.T.I32, (1 << 31) - 1),
                        "bloom filter .* outside the data region"),
    "range_before_magic": (lambda s: chunk_md(s).pop(11) and chunk_md(s).set(9, T.T.I64, 2), "outside the data region"),
    "bloom_past_footer": (lambda s: chunk_md(s).set(14, T.T.I64, 10 ** 6), "bloom filter .* outside the data region"),
    "physical_type": (lambda s: chunk_md(s).set(1, T.T.I32, 9), "invalid physical type 9"),
    "type_vs_schema": (lambda s: [chunk_md(s, r, 0).set(1, T.T.I32, 1) for r in (0, 1)], "schema leaf is INT64"),
    "type_changes": (lambda s: chunk_md(s, 1, 0).set(1, T.T.I32, 1), "differs from row group 0's"),
    "path": (lambda s: chunk_md(s, 1, 1).set(3, T.T.LIST, T.TList(T.T.BINARY, [b"zz"])), "path_in_schema 'zz'"),
    "path_rg0": (lambda s: chunk_md(s, 0, 1).set(3, T.T.LIST, T.TList(T.T.BINARY, [b"a"])),
                 "does not match schema leaf 's'"),
    "column_count": (lambda s: s.get(4).values[1].get(1).values.pop(), "1 column chunks, row group 0 has 2"),
    "leaf_count": (lambda s: [rg.get(1).values.pop() for rg in s.get(4).values], "schema has 2 leaf columns"),
    "num_children": (lambda s: s.get(2).values[0].set(5, T.T.I32, 3), "num_children counts need more"),
    "extra_elements": (lambda s: s.get(2).values[0].set(5, T.T.I32, 1), "tree under the root covers 2"),
    "leaf_without_type": (lambda s: s.get(2).values[1].pop(1), "has no physical type"),
    "no_repetition": (lambda s: s.get(2).values[1].pop(3), "has no repetition_type"),
    "no_meta_data": (lambda s: s.get(4).values[0].get(1).values[0].pop(3), "ColumnChunk has no meta_data"),
    "no_codec": (lambda s: chunk_md(s).pop(4), "ColumnMetaData has no codec"),
    "no_row_groups": (lambda s: s.pop(4), "FileMetaData has no row_groups"),
    "no_num_rows": (lambda s: s.get(4).values[1].pop(3), "RowGroup has no num_rows"),
    "encryption_algorithm": (lambda s: s.set(8, T.T.STRUCT, T.Struct().set(1, T.T.STRUCT, T.Struct())),
                             "encrypted Parquet file"),
    "column_crypto": (lambda s: s.get(4).values[0].get(1).values[1].set(8, T.T.STRUCT, T.Struct()),
                      "encrypted Parquet file"),
    "sorting_column_index": (lambda s: s.get(4).values[0].set(4, T.T.LIST, T.TList(T.T.STRUCT, [
        T.Struct().set(1, T.T.I32, 7).set(2, T.T.BOOL, False).set(3, T.T.BOOL, False)])), "sorts by column 7"),
    "wrong_type": (lambda s: chunk_md(s).set(5, T.T.BINARY, b"x"), "num_values has Thrift type binary"),
    "codec_as_i64": (lambda s: chunk_md(s).set(4, T.T.I64, 1 << 40), "no codec .* has Thrift type i64, expected i32"),
    "vector_repetition": (lambda s: s.get(2).values[1].set(3, T.T.I32, 3), "VECTOR repetition"),
}


@pytest.mark.parametrize("name", sorted(BAD_EDITS))
def test_structural_errors(tmp_path, name):
    fn, message = BAD_EDITS[name]
    data = edit(two_row_groups(tmp_path), fn)
    with pytest.raises(ParquetFormatError, match=message) as e:
        read_footer(io.BytesIO(data))
    # Every message says where: the footer byte and, the footer's position being known, the file offset.
    m = re.search(r"at footer byte (\d+) \(file offset (\d+)\)$", str(e.value))
    assert m and int(m.group(2)) == footer_of(data)[0] + int(m.group(1)), str(e.value)


def test_edit_roundtrip_is_identity(tmp_path):
    data = two_row_groups(tmp_path)
    assert edit(data, lambda s: None) == data


def test_statistics_rules(tmp_path):
    def stats(s):
        set_stats(s, 0, 0, min_value=b"\x01" * 8, max_value=b"\x09" * 8, null_count=3, distinct_count=-2,
                  is_min_value_exact=False)
        set_stats(s, 0, 1, min_value=b"", max_value=b"zz", null_count=-1, distinct_count=4, is_max_value_exact=True,
                  min=b"a", max=b"")
        set_stats(s, 1, 0, nan_count=2)
        chunk_md(s, 1, 1).pop(12)
    f = read_footer(io.BytesIO(edit(two_row_groups(tmp_path), stats)))
    ch = f.chunks
    assert ch["stat_flags"][0, 0] == (L.STAT_MIN_PRESENT | L.STAT_MAX_PRESENT | L.STAT_MAX_EXACT
                                      | L.STAT_NULL_COUNT_PRESENT)
    assert (ch["null_count"][0, 0], ch["distinct_count"][0, 0]) == (3, 0)
    assert f.min_max(0, 0) == (b"\x01" * 8, b"\x09" * 8)
    assert ch["stat_flags"][0, 1] == L.STAT_MAX_PRESENT | L.STAT_MAX_EXACT | L.STAT_DISTINCT_COUNT_PRESENT
    assert f.min_max(0, 1) == (None, b"zz") and ch["distinct_count"][0, 1] == 4 and ch["null_count"][0, 1] == 0
    assert f.stat_legacy.get((0, 1, 0)) == b"a" and f.stat_legacy.get((0, 1, 1)) == b""
    assert ch["stat_flags"][1, 0] == 0 and f.nan_count[1, 0] == 2 and f.min_max(1, 0) == (None, None)
    assert ch["stat_flags"][1, 1] == 0 and f.statistics_offset[1, 1] == -1
    assert (ch["stat_sizes"] == 0).all() and (ch["min_stat"] == 0).all() and (ch["max_stat"] == 0).all()


def test_dictionary_offset_decides_byte_range_start(tmp_path):
    def fn(s):
        chunk_md(s, 0, 0).pop(11)
        chunk_md(s, 1, 0).set(11, T.T.I64, 4)
    data = two_row_groups(tmp_path)
    before = read_footer(io.BytesIO(data))
    f = read_footer(io.BytesIO(edit(data, fn)))
    assert f.chunks["byte_range_start"][0, 0] == before.data_page_offset[0, 0]
    assert f.chunks["byte_range_start"][1, 0] == 4 and f.dictionary_page_offset[1, 0] == 4


def test_zero_row_groups_and_parse_footer_alone(tmp_path):
    path = str(tmp_path / "empty.parquet")
    pq.ParquetWriter(path, pa.schema([("a", pa.int64()), ("b", pa.string())])).close()
    f = read_footer(path)
    assert f.chunks.shape == (0, 2) and f.stats.start.shape == (0, 2, 2) and f.sorting_columns == []
    assert f.bloom_offset.shape == (0, 2) and f.stat_legacy.length.shape == (0, 2, 2)
    offset, meta = footer_of(file_bytes(small_file(tmp_path)))
    g = parse_footer(meta)  # no file position: no range checks, footer-relative messages only
    assert g.footer_offset == 0 and g.file_size is None and g.row_group_count == 1
    assert parse_footer(np.frombuffer(meta, np.uint8)).chunks.tobytes() == g.chunks.tobytes()
    assert isinstance(g, ParquetFooter) and "1 row groups x 2 columns" in repr(g)


def test_empty_table_has_empty_chunks_at_offset_zero(tmp_path):
    # parquet-cpp writes one row group of 0 rows whose chunks have data_page_offset 0, size 0.
    path = str(tmp_path / "zero.parquet")
    pq.write_table(pa.table({"b": pa.array([], pa.bool_()), "s": pa.array([], pa.string())}), path)
    f = read_footer(path)
    assert f.chunks.shape == (1, 2) and f.rg_num_rows.tolist() == [0]
    assert f.chunks["byte_range_start"][0, 0] == 0 and f.chunks["total_compressed"][0, 0] == 0
    compare_pyarrow(f, path)
    bad = edit(file_bytes(path), lambda s: chunk_md(s).set(7, T.T.I64, 1))
    with pytest.raises(ParquetFormatError, match=r"byte range \[0, 1\) is outside the data region"):
        read_footer(io.BytesIO(bad))


def test_trailing_bytes_after_the_struct_are_kept_out(tmp_path):
    data = file_bytes(small_file(tmp_path))
    offset, meta = footer_of(data)
    f = read_footer(io.BytesIO(data[:offset] + frame_footer(meta + b"\x00" * 5)))
    assert f.metadata_length == len(meta) and f.footer_length == len(meta) + 5
    assert f.metadata_bytes() == meta


# --- encryption ----------------------------------------------------------------------------------


def encrypted_file(tmp_path, plaintext_footer):
    import pyarrow.parquet.encryption as pe

    class Kms(pe.KmsClient):
        def __init__(self, config):
            pe.KmsClient.__init__(self)

        def wrap_key(self, key_bytes, master_key_identifier):
            return base64.b64encode(key_bytes)

        def unwrap_key(self, wrapped_key, master_key_identifier):
            return base64.b64decode(wrapped_key)

    factory = pe.CryptoFactory(lambda config: Kms(config))
    conn = pe.KmsConnectionConfig()
    cfg = pe.EncryptionConfiguration(footer_key="f", column_keys={"c": ["a"]}, plaintext_footer=plaintext_footer,
                                     double_wrapping=False)
    path = str(tmp_path / f"enc{plaintext_footer}.parquet")
    pq.write_table(pa.table({"a": np.arange(10), "b": np.arange(10)}), path,
                   encryption_properties=factory.file_encryption_properties(conn, cfg))
    return path


@pytest.mark.parametrize("plaintext_footer", [False, True])
def test_encrypted_files_are_refused(tmp_path, plaintext_footer):
    path = encrypted_file(tmp_path, plaintext_footer)
    assert file_bytes(path)[-4:] == (b"PAR1" if plaintext_footer else b"PARE")
    with pytest.raises(ParquetFormatError, match="encrypt"):
        read_footer(path)


# --- fuzzing -------------------------------------------------------------------------------------


def fuzz_footers():
    out = []
    for name in ("alltypes_plain.parquet", "nested_maps.snappy.parquet", "data_index_bloom_encoding_stats.parquet",
                 "nested_lists.snappy.parquet", "datapage_v2.snappy.parquet", "unknown-logical-type.parquet"):
        out.append(footer_of(file_bytes(peer(name))))
    return out


FUZZ = fuzz_footers()


def parse_or_format_error(meta, offset):
    try:
        parse_footer(meta, footer_offset=offset)
    except ParquetFormatError as e:
        assert "footer byte" in str(e) or "schema" in str(e) or "row group" in str(e), str(e)


@settings(max_examples=400, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(FUZZ))), st.data())
def test_fuzz_mutated_footers(which, data):
    offset, meta = FUZZ[which]
    buf = bytearray(meta)
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, 0x15, 0x19, 0x1C, 0xF9, buf[i] ^ 0x01,
                                            data.draw(st.integers(0, 255))]))
    cut = data.draw(st.integers(0, len(buf)))
    parse_or_format_error(bytes(buf[:cut] if data.draw(st.booleans()) else buf), offset)


@settings(max_examples=200, deadline=2000)
@given(st.sampled_from(range(len(FUZZ))), st.data())
def test_fuzz_spliced_footers(which, data):
    offset, meta = FUZZ[which]
    a = data.draw(st.integers(0, len(meta)))
    b = data.draw(st.integers(a, len(meta)))
    junk = data.draw(st.binary(max_size=32))
    parse_or_format_error(meta[:a] + junk + meta[b:], offset)


@settings(max_examples=300, deadline=2000)
@given(st.binary(max_size=200))
def test_fuzz_random_bytes(raw):
    parse_or_format_error(raw, 0)
    try:
        _thrift.scan_struct(raw)
    except ParquetFormatError:
        pass


def test_hostile_sizes_are_refused_before_allocating():
    # FileMetaData{1: version 1, 4: list<struct> of 2^31 - 1 elements} in a few bytes.
    meta = bytes([0x15, 0x02, 0x39, 0xFC, 0xFF, 0xFF, 0xFF, 0xFF, 0x07, 0x00, 0x00])
    with pytest.raises(ParquetFormatError, match="row_groups of 2147483647 elements exceeds the 2 bytes left"):
        parse_footer(meta)
    # Deep nesting of unknown fields (struct in struct in ...) stops at the depth cap.
    deep = bytes([0x15, 0x02, 0x9C]) + bytes([0x1C]) * 200 + b"\x00" * 201
    with pytest.raises(ParquetFormatError, match="nesting deeper than 64"):
        parse_footer(deep)
    # A varint of 11 bytes.
    with pytest.raises(ParquetFormatError, match="varint longer than 10 bytes"):
        parse_footer(bytes([0x15]) + b"\x80" * 10 + b"\x01")
    with pytest.raises(ParquetFormatError, match="varint overflows 64 bits"):
        parse_footer(bytes([0x16]) + b"\xff" * 9 + b"\x02")


def test_row_group_chunk_bound(tmp_path):
    # A row group list claiming more chunks than there are bytes left is refused.
    offset, meta = footer_of(two_row_groups(tmp_path))
    s, _ = T.decode_struct(meta)
    rg_list = s.get(4)
    rg_list.values = rg_list.values[:1]
    rg_list.long_header = True
    raw = bytearray(T.encode_struct(s))
    fields, _ = _thrift.scan_struct(bytes(raw))
    start = next(f[2] for f in fields if f[0] == 4)
    assert raw[start] == 0xFC and raw[start + 1] == 1
    raw[start + 1 : start + 2] = bytes([0xFF, 0xFF, 0x7F])  # 2^21 - 1 row groups
    with pytest.raises(ParquetFormatError, match="cannot fit in the|exceeds the"):
        parse_footer(bytes(raw))


def test_gil_released_parses_agree_across_threads(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    path = small_file(tmp_path, rows=5000, row_group_size=50)
    offset, meta = footer_of(file_bytes(path))
    ref = parse_footer(meta, footer_offset=offset).chunks.tobytes()
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda _: parse_footer(meta, footer_offset=offset).chunks.tobytes(), range(16)))
    assert all(g == ref for g in got)

