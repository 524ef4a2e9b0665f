"""Parquet files as QuestDB writes them: no ARROW:schema, a `questdb` JSON in the key-value
metadata; `questdb_file` covers every QuestDB column type (QDB_COLUMNS)."""

import decimal
import json
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from qdbpm.pm import layout as L


def write_questdb(path, table, doc, *, row_group_size=None, **writer_options):
    """Write `table` as QuestDB does: no ARROW:schema, a `questdb` JSON in the key-value metadata."""
    with pq.ParquetWriter(path, table.schema, store_schema=False, **writer_options) as w:
        w.write_table(table, row_group_size=row_group_size)
        w.add_key_value_metadata({"questdb": doc if isinstance(doc, str) else json.dumps(doc)})
    return path


GEO = L.QDB_FLAG_GEOHASH


def dec_code(tag, p, s):
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
    ("dec", dec_code(L.QDB_DECIMAL64, 18, 3), pa.decimal128(18, 3),
     lambda i: decimal.Decimal(i * 1001).scaleb(-3), {}),
    ("dec2", dec_code(L.QDB_DECIMAL256, 70, 4), pa.decimal256(70, 4),
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
