"""qdbpm.thrift: the generic compact-protocol codec, the append builder and footer synthesis."""

import glob
import io
import os
import struct

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qdbpm.parquet import _thrift
from qdbpm.pm import layout as L
from qdbpm.parquet import compact as T
from qdbpm.parquet.build import (
    ColumnChunkSpec, RowGroupSpec, SchemaElement, build_file_metadata, frame_footer, schema_element_struct,
)
from qdbpm.parquet.splice import append_footer, append_row_groups, rebase_row_group
from qdbpm.errors import ParquetFormatError
from qdbpm.parquet.footer import read_footer
from qdbpm.parquet.compact import Struct, TList, TMap
from qdbpm.parquet.compact import T as TT

from conftest import PEER_DATA
from support.parquet_oracle import compare_pyarrow, compare_thrift, footer_of


def parquet_bytes(table, **kw) -> bytes:
    b = io.BytesIO()
    pq.write_table(table, b, **kw)
    return b.getvalue()


# --- the compact protocol, byte for byte -----------------------------------------------------------

VECTORS = [
    # (struct, bytes) worked out by hand from the compact protocol spec.
    (Struct().set(1, TT.I32, 1), b"\x15\x02\x00"),
    (Struct().set(1, TT.I32, -1), b"\x15\x01\x00"),
    (Struct().set(1, TT.BOOL, True).set(2, TT.BOOL, False), b"\x11\x12\x00"),
    (Struct().set(1, TT.I64, 300), b"\x16\xd8\x04\x00"),
    (Struct().set(1, TT.BYTE, -1), b"\x13\xff\x00"),
    (Struct().set(1, TT.I16, 2), b"\x14\x04\x00"),
    (Struct().set(20, TT.I32, 0), b"\x05\x28\x00\x00"),  # delta 20 > 15: long form, zigzag id
    (Struct().set(1, TT.I32, 0).set(16, TT.I32, 0), b"\x15\x00\xf5\x00\x00"),  # delta 15 still fits
    (Struct().set(-1, TT.I32, 0), b"\x05\x01\x00\x00"),
    (Struct().set(1, TT.BINARY, b"ab"), b"\x18\x02ab\x00"),
    (Struct().set(1, TT.BINARY, b""), b"\x18\x00\x00"),
    (Struct().set(1, TT.DOUBLE, 1.5), b"\x17" + struct.pack("<d", 1.5) + b"\x00"),
    (Struct().set(1, TT.LIST, TList(TT.I32, [1, 2, 3])), b"\x19\x35\x02\x04\x06\x00"),
    (Struct().set(1, TT.LIST, TList(TT.BOOL, [True, False])), b"\x19\x21\x01\x02\x00"),
    (Struct().set(1, TT.LIST, TList(TT.I32, [0] * 15)), b"\x19\xf5\x0f" + b"\x00" * 15 + b"\x00"),
    (Struct().set(1, TT.SET, TList(TT.I64, [5], is_set=True)), b"\x1a\x16\x0a\x00"),
    (Struct().set(1, TT.MAP, TMap(TT.BINARY, TT.I32, [(b"a", 1)])), b"\x1b\x01\x85\x01a\x02\x00"),
    (Struct().set(1, TT.MAP, TMap(0, 0)), b"\x1b\x00\x00"),
    (Struct().set(1, TT.STRUCT, Struct().set(1, TT.I32, 7)), b"\x1c\x15\x0e\x00\x00"),
    (Struct().set(1, TT.I64, -(1 << 63)), b"\x16" + b"\xff" * 9 + b"\x01\x00"),
    (Struct().set(1, TT.I64, (1 << 63) - 1), b"\x16\xfe" + b"\xff" * 8 + b"\x01\x00"),
]


@pytest.mark.parametrize("s, raw", VECTORS)
def test_compact_vectors(s, raw):
    assert T.encode_struct(s) == raw
    back, end = T.decode_struct(raw)
    assert back == s and end == len(raw)
    fields, end = _thrift.scan_struct(raw)
    assert end == len(raw) and [f[0] for f in fields] == list(s.fields)


def test_long_forms_are_kept():
    raw = b"\x05\x02\x02\x19\xf5\x01\x02\x00"  # field 1 in long form; list<i32> of 1 in long form
    s, _ = T.decode_struct(raw)
    assert s.get(1) == 1 and s.get(2).values == [1] and s.long_ids == {1}
    assert T.encode_struct(s) == raw


def test_wire_order_is_kept():
    raw = b"\x35\x02\x05\x02\x04\x00"  # field 3, then field 1 (long form: a negative delta)
    s, _ = T.decode_struct(raw)
    assert list(s.fields) == [3, 1] and T.encode_struct(s) == raw


def test_set_keeps_id_order():
    s = Struct().set(5, TT.I32, 1).set(1, TT.I32, 2).set(3, TT.I32, 3)
    assert list(s.fields) == [1, 3, 5]
    s.set(3, TT.I32, 4)
    assert list(s.fields) == [1, 3, 5] and s.get(3) == 4 and s.pop(3) == 4 and 3 not in s


# Random Thrift values, nested.
SCALARS = {
    TT.BOOL: st.booleans(),
    TT.BYTE: st.integers(-128, 127),
    TT.I16: st.integers(-(1 << 15), (1 << 15) - 1),
    TT.I32: st.integers(-(1 << 31), (1 << 31) - 1),
    TT.I64: st.integers(-(1 << 63), (1 << 63) - 1),
    TT.DOUBLE: st.floats(allow_nan=False),
    TT.BINARY: st.binary(max_size=20),
}


def values(depth):
    scalar = st.sampled_from(sorted(SCALARS)).flatmap(lambda t: SCALARS[t].map(lambda v: (t, v)))
    if depth == 0:
        return scalar
    inner = values(depth - 1)
    lists = st.sampled_from(sorted(SCALARS)).flatmap(
        lambda t: st.lists(SCALARS[t], max_size=18).map(lambda vs: (TT.LIST, TList(t, vs))))
    struct_lists = st.lists(structs(depth - 1), max_size=3).map(lambda vs: (TT.LIST, TList(TT.STRUCT, vs)))
    maps = st.lists(st.tuples(SCALARS[TT.BINARY], SCALARS[TT.I32]), max_size=3).map(
        lambda kv: (TT.MAP, TMap(TT.BINARY, TT.I32, kv) if kv else TMap(0, 0)))
    return st.one_of(scalar, lists, struct_lists, maps, structs(depth - 1).map(lambda s: (TT.STRUCT, s)), inner)


def structs(depth):
    return st.dictionaries(st.integers(-40, 300), values(depth) if depth >= 0 else st.nothing(), max_size=5).map(
        lambda d: Struct({k: d[k] for k in sorted(d)}))


@settings(max_examples=300, deadline=None)
@given(structs(3))
def test_random_structs_round_trip(s):
    raw = T.encode_struct(s)
    back, end = T.decode_struct(raw)
    assert end == len(raw) and back == s and T.encode_struct(back) == raw
    fields, end = _thrift.scan_struct(raw)  # the kernel's skipper walks the same bytes
    assert end == len(raw) and [f[0] for f in fields] == list(s.fields)


@settings(max_examples=300, deadline=2000)
@given(structs(3), st.data())
def test_decoder_mutations_only_format_errors(s, data):
    raw = bytearray(T.encode_struct(s) + b"\x00" * 4)
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    raw = bytes(raw[: data.draw(st.integers(0, len(raw)))])
    for fn in (T.decode_struct, _thrift.scan_struct):
        try:
            fn(raw)
        except ParquetFormatError as e:
            assert "footer byte" in str(e)


def test_decoder_limits():
    with pytest.raises(ParquetFormatError, match="nesting deeper than 64"):
        T.decode_struct(b"\x1c" * 100 + b"\x00" * 100)
    with pytest.raises(ParquetFormatError, match="varint longer than 10 bytes"):
        T.decode_struct(b"\x16" + b"\x80" * 10 + b"\x01\x00")
    with pytest.raises(ParquetFormatError, match="varint overflows 64 bits"):
        T.decode_struct(b"\x16" + b"\xff" * 9 + b"\x02\x00")
    with pytest.raises(ParquetFormatError, match="collection of 1000 elements exceeds"):
        T.decode_struct(b"\x19\xf5\xe8\x07\x00")
    with pytest.raises(ParquetFormatError, match="invalid Thrift compact type 13"):
        T.decode_struct(b"\x1d\x00")
    with pytest.raises(ParquetFormatError, match=r"at footer byte 1 \(file offset 101\)"):
        T.decode_struct(b"\x18\x09ab", base_offset=100)


# --- real footers ---------------------------------------------------------------------------------


PEER = sorted(glob.glob(os.path.join(PEER_DATA, "*.parquet")))


@pytest.mark.parametrize("path", PEER, ids=os.path.basename)
def test_peer_footers_round_trip_byte_identical(path):
    with open(path, "rb") as f:
        data = f.read()
    offset, meta = footer_of(data)
    s, end = T.decode_struct(meta, base_offset=offset)
    assert end == len(meta) and T.encode_struct(s) == meta
    # Struct elements of lists know where they came from.
    rgs = s.get(4)
    assert [rg.span for rg in rgs.values] == [tuple(x) for x in read_footer(path).rg_spans.tolist()]
    fields, end = _thrift.scan_struct(meta)
    assert end == len(meta) and [f[0] for f in fields] == list(s.fields)


def test_generated_footers_round_trip(tmp_path):
    t = pa.table({"a": np.arange(500), "s": [f"s{i % 7}" for i in range(500)],
                  "l": [[i, None] for i in range(500)], "m": [{"k": i} for i in range(500)]})
    blobs = [parquet_bytes(t, row_group_size=100, write_page_index=True, bloom_filter_options={"a": True},
                           sorting_columns=[pq.SortingColumn(0)])]
    path = str(tmp_path / "d.parquet")
    duckdb.connect().execute(f"copy (select i, 'v' || i as s, [i] as l, {{'x': i}} as st from range(3000) t(i)) "
                             f"to '{path}' (format parquet, row_group_size 1000)")
    with open(path, "rb") as f:
        blobs.append(f.read())
    for data in blobs:
        _, meta = footer_of(data)
        s, _ = T.decode_struct(meta)
        assert T.encode_struct(s) == meta


# --- appending row groups ---------------------------------------------------------------------------


def table(lo, n):
    return pa.table({
        "a": np.arange(lo, lo + n, dtype=np.int64),
        "s": [f"x{i % 13}" for i in range(lo, lo + n)],
        "d": np.arange(lo, lo + n) * 0.5,
        "ts": pa.array(np.arange(lo, lo + n) * 10 ** 6, pa.timestamp("us", "UTC")),
        "l": pa.array([[i, i + 1] if i % 3 else None for i in range(lo, lo + n)], pa.list_(pa.int64())),
    })


WRITE = dict(row_group_size=300, write_page_index=True, bloom_filter_options={"a": True},
             sorting_columns=[pq.SortingColumn(0)])


def append_file(a: bytes, b: bytes) -> bytes:
    """A's bytes, then B's chunks, then A's footer + B's row groups (rebased)."""
    _, a_meta = footer_of(a)
    b_off, b_meta = footer_of(b)
    meta = append_footer(a_meta, b_meta, offset_delta=len(a) - 4)
    return a + b[4:b_off] + frame_footer(meta)


def test_append_builds_a_file_pyarrow_reads(tmp_path):
    a, b = parquet_bytes(table(0, 1000), **WRITE), parquet_bytes(table(1000, 700), **WRITE)
    out = append_file(a, b)
    assert pq.read_table(io.BytesIO(out)).equals(pa.concat_tables([table(0, 1000), table(1000, 700)]))
    path = tmp_path / "ab.parquet"
    path.write_bytes(out)
    f = read_footer(str(path))
    compare_thrift(f)
    compare_pyarrow(f, str(path))
    fa, fb = read_footer(io.BytesIO(a)), read_footer(io.BytesIO(b))
    assert f.row_group_count == fa.row_group_count + fb.row_group_count and f.num_rows == 1700
    # Old row groups: the very same bytes; new ones: B's, every offset moved by len(A) - 4.
    old = f.rg_spans[: fa.row_group_count]
    assert f.buffer[old[0, 0] : old[-1, 1]].tobytes() == fa.buffer[fa.rg_spans[0, 0] : fa.rg_spans[-1, 1]].tobytes()
    delta = len(a) - 4
    new = slice(fa.row_group_count, None)
    for name in ("data_page_offset", "dictionary_page_offset", "bloom_offset", "column_index_offset",
                 "offset_index_offset"):
        mine, theirs = getattr(f, name)[new], getattr(fb, name)
        assert (mine == np.where(theirs > 0, theirs + delta, theirs)).all(), name
        assert (theirs > 0).any(), name
    assert (f.rg_file_offset[new] == fb.rg_file_offset + delta).all()
    assert (f.bloom_length[new] == fb.bloom_length).all()
    # The rebased bloom filters and page indexes point at the same bytes as in B.
    for off_name, len_name in (("bloom_offset", "bloom_length"), ("column_index_offset", "column_index_length"),
                               ("offset_index_offset", "offset_index_length")):
        for (r, c) in zip(*np.nonzero(getattr(fb, off_name) > 0)):
            o, n = int(getattr(fb, off_name)[r, c]), int(getattr(fb, len_name)[r, c])
            assert out[o + delta : o + delta + n] == b[o : o + n]
    assert f.sorting_columns == fa.sorting_columns + fb.sorting_columns


def test_append_twice_and_to_an_empty_file():
    parts = [table(0, 500), table(500, 10), table(510, 900)]
    out = parquet_bytes(parts[0], **WRITE)
    for t in parts[1:]:
        out = append_file(out, parquet_bytes(t, **WRITE))
    assert pq.read_table(io.BytesIO(out)).equals(pa.concat_tables(parts))
    b = io.BytesIO()
    pq.ParquetWriter(b, table(0, 1).schema).close()
    empty = b.getvalue()
    assert read_footer(io.BytesIO(empty)).row_group_count == 0
    out = append_file(empty, parquet_bytes(parts[2], **WRITE))
    assert pq.read_table(io.BytesIO(out)).equals(parts[2])


def test_append_keeps_old_row_groups_raw_on_a_big_footer():
    a = parquet_bytes(pa.table({"a": np.arange(30000), "b": np.arange(30000) * 2.0}), row_group_size=10)
    _, a_meta = footer_of(a)
    b = parquet_bytes(pa.table({"a": np.arange(5), "b": np.arange(5) * 2.0}))
    _, b_meta = footer_of(b)
    meta = append_footer(a_meta, b_meta, offset_delta=len(a) - 4)
    fa = read_footer(io.BytesIO(a))
    region = fa.buffer[fa.rg_spans[0, 0] : fa.rg_spans[-1, 1]].tobytes()
    assert region in meta and len(meta) < len(a_meta) + len(b_meta)
    out = a + b[4 : footer_of(b)[0]] + frame_footer(meta)
    f = read_footer(io.BytesIO(out))
    assert f.row_group_count == 3001 and f.num_rows == 30005
    assert pq.read_table(io.BytesIO(out)).column("a").to_pylist()[-6:] == [29999, 0, 1, 2, 3, 4]


def test_append_renumbers_ordinals_and_refuses_other_schemas():
    a = parquet_bytes(table(0, 10))
    _, a_meta = footer_of(a)
    rg, _ = T.decode_struct(read_footer(io.BytesIO(a)).raw_row_group(0))
    rg.set(7, TT.I16, 0)
    meta = append_row_groups(a_meta, [rg, rg], offset_delta=0)
    s, _ = T.decode_struct(meta)
    assert [r.get(7) for r in s.get(4).values] == [None, 1, 2] and s.get(3) == 30
    assert append_row_groups(a_meta, [T.encode_struct(rg)]) .count(T.encode_struct(rg)) == 1
    other = parquet_bytes(pa.table({"z": [1]}))
    with pytest.raises(ValueError, match="different schema"):
        append_footer(a_meta, footer_of(other)[1], offset_delta=0)


def test_rebase_leaves_unset_offsets_alone():
    md = Struct().set(9, TT.I64, 100).set(11, TT.I64, 0)
    cc = Struct().set(2, TT.I64, 0).set(3, TT.STRUCT, md).set(4, TT.I64, 50)
    rg = Struct().set(1, TT.LIST, TList(TT.STRUCT, [cc])).set(5, TT.I64, 100)
    rebase_row_group(rg, 1000)
    assert (md.get(9), md.get(11), cc.get(2), cc.get(4), rg.get(5)) == (1100, 0, 0, 1050, 1100)


# --- footers synthesised for fetched chunks ---------------------------------------------------------


def fetched_file(data: bytes, footer, row_groups, columns) -> bytes:
    """PAR1 + the chosen chunks back to back + a synthesised footer, as the cold reader builds it."""
    parts, starts, pos = [b"PAR1"], [], 4
    for r in row_groups:
        row = []
        for c in columns:
            s, n = int(footer.chunks["byte_range_start"][r, c]), int(footer.chunks["total_compressed"][r, c])
            parts.append(data[s : s + n])
            row.append(pos)
            pos += n
        starts.append(row)
    return b"".join(parts) + frame_footer(footer.synthesize(row_groups, columns, starts))


@pytest.mark.parametrize("kw", [{}, {"use_dictionary": False, "compression": "zstd"},
                                {"data_page_version": "2.0", "compression": "gzip"}])
def test_synthesised_footer_decodes_chunks(kw):
    t = table(0, 1000)
    data = parquet_bytes(t, row_group_size=300, **kw)
    f = read_footer(io.BytesIO(data))
    names = [leaf.name for leaf in f.leaves]
    assert names == ["a", "s", "d", "ts", "l.list.element"]
    for rgs, cols in (([2], [0]), ([1], [1]), ([0, 3], [1, 3, 4]), ([3, 1], [0, 1, 2, 3, 4])):
        got = pq.read_table(io.BytesIO(fetched_file(data, f, rgs, cols)))
        want = pa.concat_tables([t.slice(r * 300, 300) for r in rgs]).select([names[c].split(".")[0] for c in cols])
        assert got.num_rows == want.num_rows
        for name in want.column_names:
            assert got.column(name).equals(want.column(name)), (rgs, cols, name)


def test_synthesised_footer_prunes_nested_groups():
    t = pa.table({"st": pa.array([{"x": i, "y": str(i), "z": float(i)} for i in range(50)]), "k": np.arange(50)})
    data = parquet_bytes(t)
    f = read_footer(io.BytesIO(data))
    got = pq.read_table(io.BytesIO(fetched_file(data, f, [0], [1, 3])))
    assert got.column_names == ["st", "k"] and got.column("st").type == pa.struct([("y", pa.string())])
    assert got.column("st").to_pylist() == [{"y": str(i)} for i in range(50)]
    s, _ = T.decode_struct(footer_of(fetched_file(data, f, [0], [1, 3]))[1])
    pruned = [(el.get(4), el.get(5)) for el in s.get(2).values]
    assert pruned == [(b"schema", 2), (b"st", 1), (b"y", None), (b"k", None)]
    with pytest.raises(ValueError):
        f.synthesize([0], [3, 1], [[4, 5]])


def test_build_file_metadata_from_specs():
    """A footer written from scratch (no original footer) for one chunk of a plain INT64 column."""
    t = pa.table({"v": pa.array(np.arange(100, dtype=np.int64))},
                 schema=pa.schema([pa.field("v", pa.int64(), nullable=False)]))
    data = parquet_bytes(t, use_dictionary=False, compression="snappy", store_schema=False)
    f = read_footer(io.BytesIO(data))
    start, n = int(f.chunks["byte_range_start"][0, 0]), int(f.chunks["total_compressed"][0, 0])
    spec = ColumnChunkSpec(type=L.PT_INT64, path=("value",), codec=L.CODEC_SNAPPY, num_values=100,
                             total_uncompressed_size=int(f.total_uncompressed[0, 0]), total_compressed_size=n,
                             data_page_offset=4 + int(f.data_page_offset[0, 0]) - start, encodings=(0, 3))
    schema = [SchemaElement("schema", num_children=1),
              SchemaElement("value", type=L.PT_INT64, repetition_type=0, logical_type=("INTEGER", 64, True),
                            field_id=7)]
    meta = build_file_metadata(schema, [RowGroupSpec(columns=[spec], num_rows=100)])
    out = b"PAR1" + data[start : start + n] + frame_footer(meta)
    assert pq.read_table(io.BytesIO(out)).column("value").to_pylist() == list(range(100))
    g = read_footer(io.BytesIO(out))
    assert g.leaves[0].field_id == 7 and g.leaves[0].repetition == 0 and g.rg_file_offset[0] == 4
    assert g.created_by == "qdbpm" and g.num_rows == 100


def test_schema_builder_logical_types_as_pyarrow_reads_them():
    els = [SchemaElement("schema", num_children=12)]
    leaf = lambda name, pt, lt=None, **kw: SchemaElement(name, type=pt, repetition_type=1, logical_type=lt, **kw)
    els += [
        leaf("i8", L.PT_INT32, ("INTEGER", 8, True), converted_type=15),
        leaf("u32", L.PT_INT32, ("INTEGER", 32, False), converted_type=13),
        leaf("ts", L.PT_INT64, ("TIMESTAMP", "NANOS", True)),
        leaf("ts_local", L.PT_INT64, ("TIMESTAMP", "MILLIS", False)),
        leaf("t", L.PT_INT64, ("TIME", "MICROS", False)),
        leaf("d", L.PT_INT32, ("DATE",), converted_type=6),
        leaf("dec", L.PT_FIXED_LEN_BYTE_ARRAY, ("DECIMAL", 3, 20), type_length=9, scale=3, precision=20,
             converted_type=5),
        leaf("s", L.PT_BYTE_ARRAY, ("STRING",), converted_type=0),
        leaf("j", L.PT_BYTE_ARRAY, ("JSON",), converted_type=19),
        leaf("u", L.PT_FIXED_LEN_BYTE_ARRAY, ("UUID",), type_length=16),
        leaf("h", L.PT_FIXED_LEN_BYTE_ARRAY, ("FLOAT16",), type_length=2),
        leaf("b", L.PT_BOOLEAN),
    ]
    out = b"PAR1" + frame_footer(build_file_metadata(els, []))
    schema = pq.read_schema(io.BytesIO(out))
    assert [str(schema.field(i).type) for i in range(len(schema))] == [
        "int8", "uint32", "timestamp[ns, tz=UTC]", "timestamp[ms]", "time64[us]", "date32[day]",
        "decimal128(20, 3)", "string", "extension<arrow.json>", "extension<arrow.uuid>", "halffloat", "bool"]
    f = read_footer(io.BytesIO(out))
    assert [el.logical_type for el in f.schema[1:]] == [el.logical_type for el in els[1:]]
    # Every tuple the reader produces encodes back to the same bytes.
    raw = f.buffer.tobytes()
    for (s, e), el in zip(f.schema_spans, f.schema):
        assert T.encode_struct(schema_element_struct(el)) == raw[s:e]


@settings(max_examples=600, deadline=2000)
@given(structs(3), st.data())
def test_skipper_and_decoder_agree_on_mutated_bytes(s, data):
    """The kernel's skipper (fast paths for scalar fields, short varint lists and struct lists,
    checked path for the rest) ends where the decoder ends, and fails where it fails."""
    raw = bytearray(T.encode_struct(s) + b"\x00" * 4)
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.sampled_from(
            [0x00, 0x80, 0xFF, 0x19, 0x1A, 0x29, 0xF6, 0x1C, data.draw(st.integers(0, 255))]))
    raw = bytes(raw[: data.draw(st.integers(0, len(raw)))])
    try:
        want = T.decode_struct(raw)[1]
    except ParquetFormatError:
        want = None
    try:
        got = _thrift.scan_struct(raw)[1]
    except ParquetFormatError:
        got = None
    assert got == want


@pytest.mark.parametrize("varint,ok", [
    (b"\x01", True), (b"\xff" * 9 + b"\x01", True),  # 10 bytes, the last one 1: the top bit of an i64
    (b"\xff" * 9 + b"\x02", False),  # overflows 64 bits
    (b"\x80" * 10 + b"\x01", False),  # 11 bytes
])
@pytest.mark.parametrize("n", [1, 14, 15])
def test_varint_lists_inside_skipped_structs(varint, ok, n):
    """struct{1: struct{1: list<i64> of n elements}} followed by slack: the skipper's short-list fast
    path (n < 15) and its checked path agree with the decoder on each varint shape."""
    header = bytes([(n << 4) | TT.I64]) if n < 15 else bytes([0xF0 | TT.I64, n])
    raw = bytes([0x1C, 0x19]) + header + b"\x02" * (n - 1) + varint + b"\x00\x00" + b"\x00" * 160
    if ok:
        assert T.decode_struct(raw)[1] == _thrift.scan_struct(raw)[1] == len(raw) - 160
    else:
        for fn in (T.decode_struct, _thrift.scan_struct):
            with pytest.raises(ParquetFormatError, match="varint"):
                fn(raw)
