"""A known Thrift field id with an unexpected wire type is skipped, exactly as an unknown id.

Apache Thrift's rule, which parquet-cpp follows: older writers used ids the spec later gave
another meaning, so a reader skips a field whose wire type is not the declared one, and the field
is then absent. Real footers (pyarrow and DuckDB files with statistics, bloom filters, sorting
columns, page indexes and logical types; Apache parquet-testing files) are rewritten field by
field, struct by struct, to every other wire type by `thrift_rewrite` (a tree codec independent of
qdbpm), and each reader must see exactly what it sees with the field deleted:

* the Cython kernel (qdbpm.parquet.parse_footer) and qdbpm.generate: same footer / `_pm`, or, for
  a required field, the same ParquetFormatError, which then says the field was skipped;
* the Python codec (qdbpm.thrift): decodes and re-encodes it byte for byte, `Struct.typed` sees
  the field as absent, `rebase_row_group` leaves it alone;
* pyarrow (parquet-cpp's Thrift reader) accepts the rewritten footer exactly when it accepts the
  footer without the field;
* the BloomFilterHeader reader (qdbpm.bloom), on real filter headers.
"""

import decimal
import io
import os
import re

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.parquet import compact as T
from qdbpm.parquet.splice import append_row_groups, rebase_row_group
from qdbpm.parquet.bloom_header import parse_bloom_header
from qdbpm.errors import ParquetFormatError
from qdbpm.sync.generate import generate
from qdbpm.parquet.footer import parse_footer

from support import thrift_rewrite as W
from conftest import PEER_DATA, read_bytes
from support.thrift_rewrite import BINARY, BYTE, DOUBLE, I16, I32, I64, LIST, MAP, SET, STRUCT, TRUE

# parquet.thrift, for the structs qdbpm reads: kind -> {field id: (name, wire type, element type)}.
_EMPTY = (STRUCT, None)
SPEC = {
    "FileMetaData": {1: ("version", I32, None), 2: ("schema", LIST, STRUCT), 3: ("num_rows", I64, None),
                     4: ("row_groups", LIST, STRUCT), 5: ("key_value_metadata", LIST, STRUCT),
                     6: ("created_by", BINARY, None), 7: ("column_orders", LIST, STRUCT),
                     8: ("encryption_algorithm", STRUCT, None), 9: ("footer_signing_key_metadata", BINARY, None)},
    "RowGroup": {1: ("columns", LIST, STRUCT), 2: ("total_byte_size", I64, None), 3: ("num_rows", I64, None),
                 4: ("sorting_columns", LIST, STRUCT), 5: ("file_offset", I64, None),
                 6: ("total_compressed_size", I64, None), 7: ("ordinal", I16, None)},
    "ColumnChunk": {1: ("file_path", BINARY, None), 3: ("meta_data", STRUCT, None),
                    4: ("offset_index_offset", I64, None), 5: ("offset_index_length", I32, None),
                    6: ("column_index_offset", I64, None), 7: ("column_index_length", I32, None),
                    8: ("crypto_metadata", STRUCT, None), 9: ("encrypted_column_metadata", BINARY, None)},
    "ColumnMetaData": {1: ("type", I32, None), 2: ("encodings", LIST, I32), 3: ("path_in_schema", LIST, BINARY),
                       4: ("codec", I32, None), 5: ("num_values", I64, None),
                       6: ("total_uncompressed_size", I64, None), 7: ("total_compressed_size", I64, None),
                       9: ("data_page_offset", I64, None), 10: ("index_page_offset", I64, None),
                       11: ("dictionary_page_offset", I64, None), 12: ("statistics", STRUCT, None),
                       14: ("bloom_filter_offset", I64, None), 15: ("bloom_filter_length", I32, None)},
    "Statistics": {1: ("max", BINARY, None), 2: ("min", BINARY, None), 3: ("null_count", I64, None),
                   4: ("distinct_count", I64, None), 5: ("max_value", BINARY, None), 6: ("min_value", BINARY, None),
                   7: ("is_max_value_exact", TRUE, None), 8: ("is_min_value_exact", TRUE, None),
                   9: ("nan_count", I64, None)},
    "SchemaElement": {1: ("type", I32, None), 2: ("type_length", I32, None), 3: ("repetition_type", I32, None),
                      4: ("name", BINARY, None), 5: ("num_children", I32, None), 6: ("converted_type", I32, None),
                      7: ("scale", I32, None), 8: ("precision", I32, None), 9: ("field_id", I32, None),
                      10: ("logicalType", STRUCT, None)},
    # Unions: every member is a struct.
    "LogicalType": {i: (n, *_EMPTY) for i, n in {
        1: "STRING", 2: "MAP", 3: "LIST", 4: "ENUM", 5: "DECIMAL", 6: "DATE", 7: "TIME", 8: "TIMESTAMP",
        10: "INTEGER", 11: "UNKNOWN", 12: "JSON", 13: "BSON", 14: "UUID", 15: "FLOAT16", 16: "VARIANT",
        17: "GEOMETRY", 18: "GEOGRAPHY"}.items()},
    "DecimalType": {1: ("scale", I32, None), 2: ("precision", I32, None)},
    "TimeType": {1: ("isAdjustedToUTC", TRUE, None), 2: ("unit", STRUCT, None)},
    "TimestampType": {1: ("isAdjustedToUTC", TRUE, None), 2: ("unit", STRUCT, None)},
    "TimeUnit": {1: ("MILLIS", *_EMPTY), 2: ("MICROS", *_EMPTY), 3: ("NANOS", *_EMPTY)},
    "IntType": {1: ("bitWidth", BYTE, None), 2: ("isSigned", TRUE, None)},
    "KeyValue": {1: ("key", BINARY, None), 2: ("value", BINARY, None)},
    "SortingColumn": {1: ("column_idx", I32, None), 2: ("descending", TRUE, None), 3: ("nulls_first", TRUE, None)},
    "ColumnOrder": {1: ("TYPE_ORDER", *_EMPTY)},
}
# Which kind of struct a field holds (directly or as list elements).
CHILD = {("FileMetaData", 2): "SchemaElement", ("FileMetaData", 4): "RowGroup", ("FileMetaData", 5): "KeyValue",
         ("FileMetaData", 7): "ColumnOrder", ("RowGroup", 1): "ColumnChunk", ("RowGroup", 4): "SortingColumn",
         ("ColumnChunk", 3): "ColumnMetaData", ("ColumnMetaData", 12): "Statistics",
         ("SchemaElement", 10): "LogicalType", ("LogicalType", 5): "DecimalType", ("LogicalType", 7): "TimeType",
         ("LogicalType", 8): "TimestampType", ("LogicalType", 10): "IntType", ("TimeType", 2): "TimeUnit",
         ("TimestampType", 2): "TimeUnit"}
INT_TYPES = (BYTE, I16, I32, I64)


def instances(root):
    """{kind: [path, ...]} of every struct of the footer, depth first."""
    out = {}

    def visit(kind, fields, path):
        out.setdefault(kind, []).append(path)
        for fid, t, v in fields:
            child = CHILD.get((kind, fid))
            if child is None:
                continue
            if t == STRUCT:
                visit(child, v, path + (fid,))
            elif t == LIST and v[0] == STRUCT:
                for i, s in enumerate(v[1]):
                    visit(child, s, path + (fid, i))

    visit("FileMetaData", root, ())
    return out


def wrong_values(wire, elem):
    """{label: (wire type, value)} of every other wire type: struct, list (for a list field: of
    other elements, and a set), binary, each other integer width, both bool nibbles, double."""
    elem_value = {STRUCT: [], I32: 0, BINARY: b"x"}
    out = {"struct": (STRUCT, [[1, I32, 7]]), "binary": (BINARY, b"mistyped"), "double": (DOUBLE, 1.5),
           "bool-true": (TRUE, True), "bool-false": (TRUE, False), "list": (LIST, (I32, [1, 2]))}
    out.update({W.NAMES[t]: (t, 3) for t in INT_TYPES if t != wire})
    if wire == LIST:
        other = BINARY if elem != BINARY else I64
        out["list"] = (LIST, (other, [b"x"] if other == BINARY else [1, 2]))
        out["set"] = (SET, (elem, [elem_value[elem]]))
    return {k: v for k, v in out.items() if v[0] != wire}


def variants(meta):
    """(kind, path, fid, present) for every field its kind declares, in the first and last struct
    of each kind and in any other that holds a field id those lack (e.g. each LogicalType member
    the footer uses): present fields are rewritten, absent ones inserted (with a wrong type only)."""
    root, _ = W.decode(meta)
    for kind, paths in instances(root).items():
        chosen, covered = [], set()
        for path in [paths[0], paths[-1], *paths[1:-1]]:
            have = {f[0] for f in W.walk(root, path)}
            if path not in chosen and (len(chosen) < 2 or have - covered):
                chosen.append(path)
                covered |= have
        for path in chosen:
            have = {f[0] for f in W.walk(root, path)}
            for fid in SPEC[kind]:
                yield kind, path, fid, fid in have


# --- sources: real files -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("mistyped")
    n = 2000
    t = pa.table({
        "a": np.arange(n, dtype=np.int64),
        "s": [f"v{i % 300}" for i in range(n)],
        "ts": pa.array(np.arange(n, dtype=np.int64) * 1000, pa.timestamp("us", tz="UTC")),
        "d": pa.array([decimal.Decimal(i).scaleb(-2) for i in range(n)], pa.decimal128(9, 2)),
        "i8": pa.array((np.arange(n) % 100).astype(np.int8)),
        "t": pa.array(np.arange(n, dtype=np.int64), pa.time64("us")),
    }, metadata={"k": "v"})
    pa_path = str(d / "pyarrow.parquet")
    pq.write_table(t, pa_path, row_group_size=n // 2, bloom_filter_options={"a": {"ndv": n}, "s": {"ndv": 300}},
                   sorting_columns=[pq.SortingColumn(0)], write_page_index=True)
    duck_path = str(d / "duckdb.parquet")
    # A dictionary-encoded column: DuckDB writes a bloom filter for it.
    duckdb.sql(f"COPY (SELECT range::BIGINT AS k, 'v' || (range % 50) AS s, (range % 7)::TINYINT AS t "
               f"FROM range(5000)) TO '{duck_path}' (FORMAT parquet, ROW_GROUP_SIZE 2500)")
    peers = {n: os.path.join(PEER_DATA, n) for n in (
        "data_index_bloom_encoding_stats.parquet", "int32_decimal.parquet", "alltypes_tiny_pages.parquet",
        "nan_in_stats.parquet")}
    return {"pyarrow": pa_path, "duckdb": duck_path, **peers}


SOURCES = ["pyarrow", "duckdb", "data_index_bloom_encoding_stats.parquet", "int32_decimal.parquet",
           "alltypes_tiny_pages.parquet", "nan_in_stats.parquet"]


def split(data):
    n = int.from_bytes(data[-8:-4], "little")
    return len(data) - 8 - n, data[-8 - n : -8]


def with_footer(data, off, meta):
    return data[:off] + meta + len(meta).to_bytes(4, "little") + b"PAR1"


# --- what each reader sees -----------------------------------------------------------------------

_WHERE = re.compile(r" at footer byte \d+( \(file offset \d+\))?$")
_I64_VIEW = ("data_page_offset", "dictionary_page_offset", "index_page_offset", "total_uncompressed",
             "bloom_offset", "bloom_length", "column_index_offset", "column_index_length", "offset_index_offset",
             "offset_index_length", "nan_count")


def outcome(fn):
    """("ok", value) or ("error", message without its footer position)."""
    try:
        return "ok", fn()
    except ParquetFormatError as e:
        return "error", _WHERE.sub("", str(e))


def footer_view(meta, off):
    f = parse_footer(meta, footer_offset=off)
    R, C = f.chunks.shape
    return (f.version, f.num_rows, f.created_by, f.key_value_metadata, f.column_orders, f.schema, f.leaves,
            [a.tolist() for a in (f.rg_num_rows, f.rg_total_byte_size, f.rg_file_offset, f.rg_total_compressed_size,
                                  f.rg_ordinal)],
            f.sorting_columns, f.chunks.tobytes(), [getattr(f, n).tolist() for n in _I64_VIEW],
            (f.statistics_offset >= 0).tolist(), f.physical_types.tolist(), f.encodings_raw.tolist(),
            [[f.min_max(r, c) for c in range(C)] for r in range(R)],
            [[(f.stat_legacy.get((r, c, 0)), f.stat_legacy.get((r, c, 1))) for c in range(C)] for r in range(R)])


def pm_view(parquet_path, pm_path):
    generate(parquet_path, pm_path)
    with qdbpm.open(pm_path) as pm:
        R, C = pm.row_group_count, pm.column_count
        return (pm.column_names, pm.columns.tobytes(), [int(x) for x in pm.num_rows], pm.chunks.tobytes(),
                [[pm.stat_bytes(r, c) for c in range(C)] for r in range(R)],
                [[pm.bloom_filter(r, c) for c in range(C)] for r in range(R)],
                [int(b) for b in pm.bloom_columns], int(pm.feature_flags),
                [int(i) for i in pm.sorting_column_indices], pm.designated_timestamp, pm.unused_bytes)


def pyarrow_accepts(data) -> bool:
    try:
        md = pq.ParquetFile(io.BytesIO(data)).metadata
        md.schema.to_arrow_schema()
        return True
    except (OSError, pa.ArrowException):
        return False


def q_walk(s, path):
    for step in path:
        s = s.values[step] if isinstance(s, T.TList) else s.get(step)
    return s


def same(mine, absent, what):
    """The rewritten footer's outcome equals the one without the field; a required field's error
    says why the field there does not count."""
    assert mine[0] == absent[0], (what, mine, absent)
    if mine[0] == "ok":
        assert mine[1] == absent[1], what
        return
    assert mine[1].startswith(absent[1]), (what, mine[1], absent[1])
    if re.search(r"has no \w+ \(field \d+\)$", absent[1]):
        assert "is skipped" in mine[1] and "Thrift type" in mine[1], (what, mine[1])


# --- the rule, per source and struct ---------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_mistyped_fields_are_absent(sources, source, tmp_path):
    data = read_bytes(sources[source])
    off, meta = split(data)
    root, _ = W.decode(meta)
    assert W.encode(root) == meta  # the rewriter reproduces the real footer exactly
    pq_path, pm_path = str(tmp_path / "f.parquet"), str(tmp_path / "_pm")

    def run(m):
        d = with_footer(data, off, m)
        with open(pq_path, "wb") as f:
            f.write(d)
        return outcome(lambda: footer_view(m, off)), outcome(lambda: pm_view(pq_path, pm_path)), pyarrow_accepts(d)

    original = run(meta)
    assert original[0][0] == original[1][0] == "ok" and original[2]
    counts = {"rewritten": 0, "required": 0, "inserted": 0}
    for kind, path, fid, present in variants(meta):
        name, wire, elem = SPEC[kind][fid]
        absent_meta = W.rewrite(meta, path, fid, W.DELETE)
        absent = run(absent_meta) if present else original
        if present:
            # Non-vacuous: qdbpm reads this field. Dropping it changes what qdbpm sees (or is
            # refused); for a bool holding its default, flipping it does.
            probe = absent
            if (kind, fid) in BOOL_DEFAULTS and W.field(W.walk(root, path), fid)[2] == BOOL_DEFAULTS[kind, fid]:
                probe = run(W.rewrite(meta, path, fid, (TRUE, not BOOL_DEFAULTS[kind, fid])))
            assert probe[:2] != original[:2], (source, kind, path, name)
        for label, value in wrong_values(wire, elem).items():
            what = (source, kind, path, name, label)
            mis = W.rewrite(meta, path, fid, value)
            got = run(mis)
            same(got[0], absent[0], what + ("kernel",))
            same(got[1], absent[1], what + ("generate",))
            assert got[2] == absent[2], what + ("pyarrow",)
            # The Python codec: decodes it, re-encodes it byte for byte, and sees the field as absent.
            s, end = T.decode_struct(mis)
            assert end == len(mis) and T.encode_struct(s) == mis, what
            holder = q_walk(s, path)
            assert holder.get(fid) is not None and holder.typed(fid, wire, elem=elem) is None, what
            if present:
                assert q_walk(T.decode_struct(meta)[0], path).typed(fid, wire, elem=elem) is not None, what
            if path[:1] == (4,) and len(path) >= 2:
                check_rebase(mis, absent_meta, path, fid, what)
        counts["rewritten" if present else "inserted"] += 1
        counts["required"] += present and absent[0][0] == "error"
    assert counts["rewritten"] >= 30 and counts["inserted"] >= 5 and counts["required"] >= 5, counts


# Bools and the value qdbpm takes when they are absent.
BOOL_DEFAULTS = {("Statistics", 7): True, ("Statistics", 8): True, ("SortingColumn", 2): False,
                 ("SortingColumn", 3): False}


def check_rebase(mis, absent, path, fid, what):
    """rebase_row_group moves the offsets of a row group with a mistyped field exactly as of the
    row group without it, and leaves the mistyped field as it is."""
    rg_path, rest = path[:2], path[2:]
    a = q_walk(T.decode_struct(mis)[0], rg_path)
    b = q_walk(T.decode_struct(absent)[0], rg_path)
    before = q_walk(a, rest).fields[fid]
    rebase_row_group(a, 1000)
    rebase_row_group(b, 1000)
    holder = q_walk(a, rest)
    assert holder.fields[fid] == before, what
    holder.pop(fid)
    assert T.encode_struct(a) == T.encode_struct(b), what


def test_every_struct_and_field_is_covered(sources):
    """The sources between them hold every struct kind qdbpm reads, and every field each declares
    is rewritten (present) or inserted somewhere."""
    seen = {}
    for source in SOURCES:
        _, meta = split(read_bytes(sources[source]))
        for kind, _path, fid, present in variants(meta):
            seen.setdefault(kind, {}).setdefault(fid, set()).add(present)
    assert set(seen) == set(SPEC)
    for kind, fields in SPEC.items():
        assert set(seen[kind]) == set(fields), kind
    # Present (a real field rewritten), not only inserted, for what real writers write.
    rewritten = {(k, f) for k, fs in seen.items() for f, p in fs.items() if True in p}
    must = {("FileMetaData", f) for f in (1, 2, 3, 4, 5, 6, 7)} | {("RowGroup", f) for f in (1, 2, 3, 4, 5, 6)} \
        | {("ColumnChunk", f) for f in (3, 4, 5, 6, 7)} | {("ColumnMetaData", f) for f in (1, 2, 3, 4, 5, 6, 7, 9, 11,
                                                                                          12, 14, 15)} \
        | {("Statistics", f) for f in (1, 2, 3, 5, 6, 7, 8)} | {("SchemaElement", f) for f in (1, 3, 4, 5, 6, 7, 8,
                                                                                              10)} \
        | {("LogicalType", f) for f in (1, 5, 7, 8, 10)} | {("DecimalType", 1), ("DecimalType", 2),
                                                           ("TimeType", 1), ("TimeType", 2), ("TimestampType", 1),
                                                           ("TimestampType", 2), ("TimeUnit", 2), ("IntType", 1),
                                                           ("IntType", 2), ("KeyValue", 1), ("KeyValue", 2),
                                                           ("SortingColumn", 1), ("SortingColumn", 2),
                                                           ("SortingColumn", 3), ("ColumnOrder", 1)}
    assert must <= rewritten, sorted(must - rewritten)


# --- BloomFilterHeader ---------------------------------------------------------------------------

HEADER_SPEC = {1: ("numBytes", I32), 2: ("algorithm", STRUCT), 3: ("hash", STRUCT), 4: ("compression", STRUCT)}


def real_headers(sources):
    """(source, file bytes, footer, chunk, header bytes, bitset) of every bloom filter in the sources."""
    out = []
    for source in ("pyarrow", "duckdb", "data_index_bloom_encoding_stats.parquet"):
        data = read_bytes(sources[source])
        off, meta = split(data)
        f = parse_footer(meta, footer_offset=off)
        for r, c in zip(*np.nonzero(f.bloom_offset > 0)):
            start = int(f.bloom_offset[r, c])
            nbytes, hlen = parse_bloom_header(data, start)
            out.append((source, data, f, (int(r), int(c)), data[start:start + hlen],
                        data[start + hlen:start + hlen + nbytes]))
    assert {h[0] for h in out} == {"pyarrow", "duckdb", "data_index_bloom_encoding_stats.parquet"}
    return out


def test_bloom_header_mistyped_fields(sources):
    """Every field of real filter headers and the member of each of its unions, rewritten to each
    other wire type: read as absent (so the header is refused exactly as without the field, saying
    why); a mistyped extra union member or field is skipped and the header still reads."""
    checked = 0
    for source, _data, _f, _rc, header, bitset in real_headers(sources):
        fields, end = W.decode(header)
        assert end == len(header) and W.encode(fields) == header
        nbytes = len(bitset)
        assert parse_bloom_header(header + bitset) == (nbytes, len(header))
        targets = [((), fid, wire) for fid, (_, wire) in HEADER_SPEC.items()]
        targets += [((fid,), 1, STRUCT) for fid in (2, 3, 4)]  # BLOCK, XXHASH, UNCOMPRESSED
        for path, fid, wire in targets:
            with pytest.raises(ParquetFormatError) as absent:
                parse_bloom_header(W.rewrite(header, path, fid, W.DELETE) + bitset)
            for label, value in wrong_values(wire, None).items():
                with pytest.raises(ParquetFormatError) as mis:
                    parse_bloom_header(W.rewrite(header, path, fid, value) + bitset)
                assert str(mis.value).startswith(str(absent.value)), (source, path, fid, label, str(mis.value))
                if not path:  # the message says what the field there is
                    got, want = ({STRUCT: "a union"}.get(t, W.NAMES[t]) for t in (value[0], wire))
                    assert str(mis.value).endswith(f"has compact type {got}, expected {want}, and is skipped"), \
                        (source, fid, label, str(mis.value))
                checked += 1
            # Extra mistyped content next to the real one: skipped.
            for extra_path, extra_fid in (((2,), 2), ((3,), 5), ((4,), 2), ((), 5), ((), 1000)):
                for label, value in wrong_values(STRUCT, None).items():
                    h = W.rewrite(header, extra_path, extra_fid, value)
                    assert parse_bloom_header(h + bitset) == (nbytes, len(h)), (source, extra_path, label)
    assert checked >= 3 * 7 * 8


def test_generate_drops_only_the_filter_with_a_mistyped_header(sources, tmp_path):
    """A chunk whose filter header has a mistyped required field has no filter in the `_pm`; one
    whose header has a mistyped extra union member keeps it; other chunks keep theirs."""
    first = {}
    for h in real_headers(sources):
        first.setdefault(h[0], h)
    for source, data, f, (r, c), header, bitset in first.values():
        off, meta = split(data)
        cmd = (4, r, 1, c, 3)
        for h, kept in ((W.rewrite(header, (), 1, (I64, len(bitset))), False),
                        (W.rewrite(header, (2,), 1, (I32, 1)), False),
                        (W.rewrite(header, (3,), 2, (BINARY, b"x")), True)):
            m = W.rewrite(W.rewrite(meta, cmd, 14, (I64, off)), cmd, 15, (I32, len(h) + len(bitset)))
            new = data[:off] + h + bitset + m + len(m).to_bytes(4, "little") + b"PAR1"
            path, pm_path = str(tmp_path / "b.parquet"), str(tmp_path / "_pm")
            with open(path, "wb") as out:
                out.write(new)
            generate(path, pm_path)
            with qdbpm.open(pm_path) as pm:
                assert pm.bloom_filter(r, c) == (bitset if kept else None), (source, r, c, kept)
                others = [(rr, cc) for rr, cc in zip(*np.nonzero(f.bloom_offset > 0)) if (rr, cc) != (r, c)]
                for rr, cc in others:
                    assert pm.bloom_filter(int(rr), int(cc)) is not None, (source, rr, cc)


# --- skipping stays bounded ------------------------------------------------------------------------

MARKER = b"\x5a" * 9


def splice(meta, path, fid, ttype, payload):
    """`meta` with field `fid` of the struct at `path` given wire type `ttype` and the raw value
    bytes `payload`, which may be malformed (the rewriter writes only well-formed values)."""
    m = W.rewrite(meta, path, fid, (BINARY, MARKER))
    at = m.index(bytes([len(MARKER)]) + MARKER)
    assert m.count(MARKER) == 1 and m[at - 1] & 0x0F == BINARY and m[at - 1] >> 4  # a short header
    return m[:at - 1] + bytes([m[at - 1] & 0xF0 | ttype]) + payload + m[at + 1 + len(MARKER):]


def nested(depth):
    v = []
    for _ in range(depth):
        v = [[1, STRUCT, v]]
    return v


@pytest.mark.parametrize("ttype, payload, kernel, codec", [
    (STRUCT, W.encode(nested(70))[:-1], "nesting deeper than 64", "nesting deeper than 64"),
    (LIST, b"\xf5\x80\x80\x40", "list of 1048576 elements exceeds", "collection of 1048576 elements exceeds"),
    (LIST, b"\x1c" + W.encode(nested(70)), "nesting deeper than 64", "nesting deeper than 64"),
    (I64, b"\xff" * 10 + b"\x01", "varint longer than 10 bytes", "varint longer than 10 bytes"),
    (I64, b"\xff" * 9 + b"\x7f", "varint overflows 64 bits", "varint overflows 64 bits"),
    (BINARY, b"\x80\x80\x40", "of 1048576 bytes runs past the end", "binary of 1048576 bytes exceeds"),
    (MAP, b"\x80\x80\x40", "map of 1048576 entries exceeds", "map of 1048576 entries exceeds"),
])
@pytest.mark.parametrize("where", [((4, 0, 1, 0, 3), 15), ((4, 0, 1, 0, 3, 12), 6), ((2, 1), 10), ((), 1)])
def test_skipping_a_mistyped_field_keeps_the_caps(sources, ttype, payload, kernel, codec, where):
    """A mistyped field is skipped with the same checks as any skipped value: nesting depth, list
    and map sizes against the bytes left, varint length, binary length."""
    data = read_bytes(sources["pyarrow"])
    off, meta = split(data)
    path, fid = where
    bad = splice(meta, path, fid, ttype, payload)
    with pytest.raises(ParquetFormatError, match=kernel):
        parse_footer(bad, footer_offset=off)
    with pytest.raises(ParquetFormatError, match=codec):
        T.decode_struct(bad)


def test_bloom_header_skipping_keeps_the_caps(sources):
    _, _, _, _, header, bitset = real_headers(sources)[0]
    deep = W.rewrite(header, (), 1, (STRUCT, nested(20)))
    with pytest.raises(ParquetFormatError, match="nested deeper"):
        parse_bloom_header(deep + bitset)
    with pytest.raises(ParquetFormatError, match="varint longer than 10 bytes"):
        parse_bloom_header(splice(header, (), 1, I64, b"\xff" * 10 + b"\x01") + bitset)
    with pytest.raises(ParquetFormatError, match="truncated"):
        parse_bloom_header(splice(header, (), 1, BINARY, b"\x80\x80\x40"))


def test_a_well_typed_i32_out_of_range_is_still_refused(sources):
    data = read_bytes(sources["pyarrow"])
    off, meta = split(data)
    with pytest.raises(ParquetFormatError, match="ColumnMetaData.codec = 1099511627776 does not fit i32"):
        parse_footer(W.rewrite(meta, (4, 0, 1, 0, 3), 4, (I32, 1 << 40)), footer_offset=off)


# --- the Python codec's footer builders ---------------------------------------------------------------


def test_append_counts_only_well_typed_num_rows_and_row_groups(sources):
    data = read_bytes(sources["pyarrow"])
    off, meta = split(data)
    rg = T.decode_struct(meta)[0].get(4).values[0]
    # A mistyped field elsewhere is copied as it is and still absent to the kernel.
    m = W.rewrite(meta, (), 6, (I32, 5))
    out = append_row_groups(m, [rg], offset_delta=0)
    f = parse_footer(out, footer_offset=off)
    assert f.row_group_count == 3 and f.num_rows == 3000 and f.created_by is None
    assert T.decode_struct(out)[0].fields[6] == (T.T.I32, 5)
    # A mistyped ordinal in a new row group is not renumbered into a well-typed one.
    rg2 = T.decode_struct(T.encode_struct(rg))[0].set(7, T.T.I32, 0)
    out = append_row_groups(meta, [rg2], offset_delta=0)
    assert T.decode_struct(out)[0].get(4).values[2].fields[7] == (T.T.I32, 0)
    assert parse_footer(out, footer_offset=off).rg_ordinal.tolist() == [-1, -1, -1]
    # num_rows / row_groups of another wire type are absent: no footer to append to.
    for fid, value in ((3, (I32, 2000)), (4, (LIST, (I32, [1]))), (4, (SET, (STRUCT, [[]])))):
        with pytest.raises(ParquetFormatError, match="has no row_groups or num_rows"):
            append_row_groups(W.rewrite(meta, (), fid, value), [rg], offset_delta=0)
