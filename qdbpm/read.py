"""`read_table`: prune with `_pm`, fetch only the surviving chunks' byte ranges, decode them with a
Parquet footer synthesised from `_pm` alone, then filter rows exactly.

The original Parquet footer is never read. What the footer would add beyond `_pm` (an embedded
Arrow schema: time zones other than UTC, unsigned 8/16-bit widths, large_string...) is what a
caller passes as `schema=` to get those exact Arrow types back.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import layout as L
from . import thrift as T
from .errors import PmError, StorageError
from .expr import parse
from .filter import filter_table
from .io import DEFAULT_MAX_GAP, fetch, plan
from .table import open_table

# ENCODINGS bit -> Parquet Encoding enum value; RLE (3) carries the levels of every data page.
_BIT_TO_ENCODING = {L.ENC_PLAIN: 0, L.ENC_RLE_DICTIONARY: 8, L.ENC_DELTA_BINARY_PACKED: 5,
                    L.ENC_DELTA_LENGTH_BYTE_ARRAY: 6, L.ENC_DELTA_BYTE_ARRAY: 7, L.ENC_BYTE_STREAM_SPLIT: 9}
CT_UTF8, CT_DECIMAL = 0, 5


def schema_element(pm, c) -> T.SchemaElement:
    """The Parquet SchemaElement of a flat `_pm` column, from its descriptor and QuestDB type."""
    d = pm.columns[c]
    name = pm.column_names[c]
    if int(d["max_rep_level"]) > 0 or int(d["max_def_level"]) > 1:
        raise PmError(f"column {name!r} is nested (levels rep={int(d['max_rep_level'])}, def="
                      f"{int(d['max_def_level'])}); its tree is not in _pm, so it cannot be decoded without "
                      "the Parquet footer")
    pt, tc = int(d["physical_type"]), int(d["type"])
    tag = L.qdb_type_tag(tc)
    rep = L.REPETITION_REQUIRED if int(d["max_def_level"]) == 0 else L.REPETITION_OPTIONAL
    lt = ct = scale = precision = None
    if L.QDB_DECIMAL8 <= tag <= L.QDB_DECIMAL256:
        precision = (tc >> L.QDB_DECIMAL_PRECISION_SHIFT) & 0x3FF
        scale = (tc >> L.QDB_DECIMAL_SCALE_SHIFT) & 0x3F
        lt, ct = ("DECIMAL", scale, precision), CT_DECIMAL
    elif tag == L.QDB_BYTE and pt == L.PT_INT32:
        lt = ("INTEGER", 8, True)
    elif tag == L.QDB_SHORT and pt == L.PT_INT32:
        lt = ("INTEGER", 16, True)
    elif tag == L.QDB_IPV4 and pt == L.PT_INT32:
        lt = ("INTEGER", 32, False)
    elif tag == L.QDB_DATE and pt == L.PT_INT32:
        lt = ("DATE",)
    elif tag == L.QDB_DATE and pt == L.PT_INT64:
        lt = ("TIMESTAMP", "MILLIS", True)
    elif tag == L.QDB_TIMESTAMP and pt == L.PT_INT64:
        lt = ("TIMESTAMP", "NANOS" if tc & L.QDB_FLAG_TIMESTAMP_NANOS else "MICROS", True)
    elif tag in (L.QDB_STRING, L.QDB_SYMBOL, L.QDB_VARCHAR) and pt == L.PT_BYTE_ARRAY:
        lt, ct = ("STRING",), CT_UTF8
    elif tag == L.QDB_UUID and pt == L.PT_FIXED_LEN_BYTE_ARRAY and int(d["fixed_byte_len"]) == 16:
        lt = ("UUID",)
    return T.SchemaElement(
        name=name, type=pt, repetition_type=rep,
        type_length=int(d["fixed_byte_len"]) if pt == L.PT_FIXED_LEN_BYTE_ARRAY else None,
        converted_type=ct, scale=scale, precision=precision,
        field_id=int(d["id"]) if int(d["id"]) >= 0 else None, logical_type=lt,
    )


def _encodings(bits: int) -> list:
    return [3] + [e for b, e in _BIT_TO_ENCODING.items() if bits & b]


def decode_chunks(pm, row_groups, columns, blobs) -> pa.Table:
    """Decode fetched chunks (row_groups x columns, all present in `blobs`) into one Arrow table
    by wrapping them in a Parquet file whose footer is built from `_pm` alone."""
    schema = [T.SchemaElement(name="schema", num_children=len(columns))] + [schema_element(pm, c) for c in columns]
    parts, pos = [b"PAR1"], 4
    rgs = []
    for r in row_groups:
        specs = []
        for c in columns:
            ch = pm.chunks[r, c]
            blob = blobs[(r, c)]
            specs.append(T.ColumnChunkSpec(
                type=int(pm.columns[c]["physical_type"]), path=[pm.column_names[c]], codec=int(ch["codec"]),
                num_values=int(ch["num_values"]), total_uncompressed_size=len(blob),
                total_compressed_size=len(blob), data_page_offset=pos, encodings=_encodings(int(ch["encodings"])),
            ))
            parts.append(blob)
            pos += len(blob)
        rgs.append(T.RowGroupSpec(columns=specs, num_rows=int(pm.num_rows[r])))
    meta = T.build_file_metadata(schema, rgs, created_by="qdbpm (synthesised from _pm)")
    parts.append(T.frame_footer(meta))
    buf = pa.py_buffer(b"".join(parts))
    try:
        return pq.read_table(pa.BufferReader(buf), use_pandas_metadata=False)
    except (pa.ArrowException, OSError) as e:
        raise StorageError(f"{pm.path}: chunks of row groups {list(row_groups)} do not decode with the layout "
                           f"the _pm describes: {e}") from None


def _arrow_type(pm, c) -> pa.DataType:
    """Arrow type pyarrow gives a column of the synthesised footer (for all-null chunks)."""
    el = schema_element(pm, c)
    fake = T.build_file_metadata([T.SchemaElement(name="schema", num_children=1), el],
                                 [], created_by="qdbpm")
    return pq.read_schema(pa.BufferReader(pa.py_buffer(b"PAR1" + T.frame_footer(fake)))).field(0).type


def _partition_table(pm, fs, parquet_path, rgs, cols, max_gap) -> pa.Table:
    p = plan(pm, rgs, cols, max_gap=max_gap)
    blobs = fetch(fs, parquet_path, p.ranges)
    all_null = set(p.all_null)
    names = [pm.column_names[c] for c in cols]
    # Row groups with the same set of all-null columns decode together in one synthetic file.
    groups = {}
    for r in rgs:
        key = tuple(c for c in cols if (r, c) in all_null)
        groups.setdefault(key, []).append(r)
    pieces = {}
    for nulls, members in groups.items():
        live = [c for c in cols if c not in nulls]
        if live:
            t = decode_chunks(pm, members, live, blobs)
        else:
            t = pa.table({"__rows": pa.nulls(int(sum(int(pm.num_rows[r]) for r in members)))})
        n = t.num_rows
        arrays, fields = [], []
        for c in cols:
            name = pm.column_names[c]
            if c in nulls:
                arrays.append(pa.nulls(n, _arrow_type(pm, c)))
                fields.append(pa.field(name, arrays[-1].type))
            else:
                arrays.append(t.column(name))
                fields.append(t.schema.field(name))  # keeps NOT NULL of REQUIRED columns
        tbl = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
        # split back per row group so the partition's rows stay in row-group order
        off = 0
        for r in members:
            k = int(pm.num_rows[r])
            pieces[r] = tbl.slice(off, k)
            off += k
    if not pieces:
        return None
    return pa.concat_tables([pieces[r] for r in rgs]).select(names)


def read_table(root, columns=None, where=None, filesystem=None, *, schema=None, max_gap=DEFAULT_MAX_GAP) -> pa.Table:
    """Rows of a partitioned table matching `where`, reading only surviving chunks' byte ranges.

    root: a local directory, or a path / URI on the fsspec `filesystem` (e.g. s3://bucket/table).
    columns: names to return (default: all). where: a predicate or SQL WHERE text.
    schema: optional Arrow schema to cast the result to (types `_pm` cannot express).
    """
    import fsspec

    fs = filesystem or fsspec.filesystem("file")
    pred = parse(where) if isinstance(where, str) else where
    # Local tables map their _pm files; remote ones fetch each in one request.
    with open_table(root, filesystem) as table:
        if not table.partitions:
            raise PmError(f"no partitions under {root!r}")
        first = table.meta(table.partitions[0])
        want = list(first.column_names) if columns is None else list(columns)
        masks = table.prune_masks(pred) if pred is not None else None
        out = []
        for part in table.partitions:
            pm = table.meta(part)
            for name in want:
                pm.column_index(name)
            need = list(want) + sorted(pred.columns() - set(want)) if pred is not None else list(want)
            cols = [pm.column_index(n) for n in need]
            rgs = np.nonzero(masks[part])[0] if masks is not None else np.arange(pm.row_group_count)
            rgs = [int(r) for r in rgs if int(pm.num_rows[r]) > 0]
            if not rgs:
                continue
            t = _partition_table(pm, fs, table.parquet_path(part), rgs, cols, max_gap)
            if t is None:
                continue
            if pred is not None:
                t = filter_table(t, pred)
            out.append(t.select(want))
        if not out:
            empty = pa.schema([pa.field(n, _arrow_type(first, first.column_index(n))) for n in want])
            result = empty.empty_table()
        else:
            result = pa.concat_tables(out, promote_options="permissive") if len(out) > 1 else out[0]
    if schema is not None:
        result = result.cast(schema)
    return result
