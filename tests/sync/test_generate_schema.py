"""qdbpm.generate's schema mapping: QuestDB-written files (their JSON types, designated timestamp,
UNUSED_BYTES) and external files (docs/format.md#type-inference, field ids, sorting columns,
nested leaves)."""

import decimal
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.pm import layout as L
from qdbpm.pm.qdb_types import type_name
from qdbpm.parquet import compact as T
from qdbpm.parquet.build import frame_footer
from qdbpm.sync.generate import generate

from conftest import read_bytes as file_bytes
from support.generate_checks import check_pm
from support.parquet_oracle import footer_meta
from support.questdb_files import QDB_COLUMNS, dec_code, questdb_file, write_questdb

# --- schema mapping: QuestDB-written files -------------------------------------------------------------

@pytest.mark.parametrize("sorting,rule", [(True, None), (False, None), (True, "parquet"), (True, "encoder")])
def test_questdb_written_file(tmp_path, sorting, rule):
    path, _ = questdb_file(str(tmp_path / "data.parquet"), sorting=sorting)
    pm = str(tmp_path / "_pm")
    generate(path, pm, repetition=rule)
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
        # QuestDB's encoder rule (the default for its files) describes the REQUIRED timestamp
        # OPTIONAL; the Parquet rule (its migration path) copies the schema.
        assert flags["ts"] == (req if rule == "parquet" else opt) and flags["l"] == opt
        # DECIMAL codes with scale 4 have bit 20 set: a scale bit, not the descending flag.
        assert not flags["dec2"] & L.COLUMN_FLAG_DESCENDING and not flags["dec"] & L.COLUMN_FLAG_DESCENDING
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

D = dec_code
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
        assert int(m.columns["type"][0]) == want, (name, type_name(int(m.columns["type"][0])))
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
        f.write(data[:f_off] + frame_footer(T.encode_struct(s)))
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
