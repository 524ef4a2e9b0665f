"""Fetched chunks to Arrow: decode them behind a synthesised Parquet footer, filter rows exactly.

The result is what `pyarrow.dataset` reads from the same files: values, types, nullability and
field order. The synthesised footer carries the original file's SchemaElements and ARROW:schema
(`read_schema.ColumnSchemas`), so pyarrow itself produces the types (uint64, naive timestamps,
string_view, ...). The original footer is read in one range request of [footer offset, Parquet
size): both come from `_pm`, never from a listing.

Strict footer-less mode takes the types from `_pm` alone (`ColumnSchemas.from_pm`) and refuses a
column whose values `_pm` cannot give exactly (`strict_views`) rather than return it different.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..pm import layout as L
from ..parquet import constants as PQ
from ..parquet.build import ColumnChunkSpec, RowGroupSpec, parquet_file
from ..parquet.footer import PARQUET_ENCODING_TO_BIT, parse_footer
from ..errors import ParquetFormatError, PmError, StorageError
from ..prune.arrow import to_arrow
from ..prune.staged import filtered
from .ranges import DEFAULT_MAX_GAP, fetch, fetch_footer, plan
from .read_schema import ColumnSchemas, schema_key, strict_refusal

# ENCODINGS bit -> a Parquet Encoding that sets it (parquet.footer's map inverted; the dictionary bit as
# RLE_DICTIONARY, not the deprecated PLAIN_DICTIONARY). RLE carries every data page's levels.
_BIT_TO_ENCODING = {bit: enc for enc, bit in PARQUET_ENCODING_TO_BIT.items()}
_BIT_TO_ENCODING[L.ENC_RLE_DICTIONARY] = PQ.ENCODING_RLE_DICTIONARY


def _encodings(bits: int) -> list:
    return [PQ.ENCODING_RLE] + [e for b, e in _BIT_TO_ENCODING.items() if bits & b]


def decode_chunks(pm, row_groups, columns, blobs, schemas=None, dictionary=()) -> pa.Table:
    """Decode fetched chunks (row_groups x columns, all present in `blobs`) into one Arrow table
    by wrapping them in a Parquet file whose footer carries `schemas` (a ColumnSchemas; default:
    from `_pm` alone) and the chunk layout from `_pm`. `dictionary`: names of BYTE_ARRAY columns
    to return as dictionary arrays (pyarrow's read_dictionary)."""
    schemas = schemas or ColumnSchemas.from_pm(pm)
    parts, pos = [], len(PQ.MAGIC)  # chunks follow the leading magic
    rgs = []
    for r in row_groups:
        specs = []
        for c in columns:
            ch = pm.chunks[r, c]
            blob = blobs[(r, c)]
            specs.append(ColumnChunkSpec(
                type=int(pm.columns[c]["physical_type"]), path=[pm.column_names[c]], codec=int(ch["codec"]),
                num_values=int(ch["num_values"]), total_uncompressed_size=len(blob),
                total_compressed_size=len(blob), data_page_offset=pos, encodings=_encodings(int(ch["encodings"])),
            ))
            parts.append(blob)
            pos += len(blob)
        rgs.append(RowGroupSpec(columns=specs, num_rows=int(pm.num_rows[r])))
    meta = schemas.file_metadata(pm, columns, rgs)
    buf = pa.py_buffer(parquet_file(meta, parts))
    try:
        # ParquetFile.read: the plain file reader, ~3x cheaper per call than read_table's dataset path
        return pq.ParquetFile(pa.BufferReader(buf), read_dictionary=list(dictionary) or None) \
            .read(use_pandas_metadata=False)
    except (pa.ArrowException, OSError) as e:
        raise StorageError(f"{pm.path}: chunks of row groups {list(row_groups)} do not decode with the layout "
                           f"the _pm describes: {e}") from None


def decode_partition(pm, rgs, cols, blobs, all_null=(), schemas=None, views=None, dictionary=()) -> pa.Table:
    """Row groups `rgs` (non-empty, ascending) of one partition, columns `cols` (indexes), from
    fetched `blobs`: an Arrow table in row-group order. `all_null`: the (row group, column)
    chunks that were not fetched because they hold only nulls. `schemas` gives the result types
    (default: from `_pm` alone); `views` maps a column to a type its raw values are viewed as.
    `dictionary`: columns (of `late_columns`) returned as dictionary<int32, their type>, for the
    caller to cast back once rows are filtered."""
    schemas = schemas or ColumnSchemas.from_pm(pm)
    views = views or {}
    if not cols:  # no column asked for: only the row count
        return pa.table({"_": pa.nulls(int(sum(int(pm.num_rows[r]) for r in rgs)))}).select([])
    all_null = set(all_null)
    names = [pm.column_names[c] for c in cols]
    fields = dict(zip(cols, schemas.fields(pm, cols)))  # pyarrow's own, also for all-null chunks
    for c in dictionary:
        fields[c] = fields[c].with_type(pa.dictionary(pa.int32(), fields[c].type))
    # Row groups with the same set of all-null columns decode together in one synthetic file.
    groups = {}
    for r in rgs:
        key = tuple(c for c in cols if (r, c) in all_null)
        groups.setdefault(key, []).append(r)
    pieces = {}
    for nulls, members in groups.items():
        live = [c for c in cols if c not in nulls]
        if live:
            t = decode_chunks(pm, members, live, blobs, schemas, [pm.column_names[c] for c in dictionary if c in live])
        else:
            t = pa.table({"__rows": pa.nulls(int(sum(int(pm.num_rows[r]) for r in members)))})
        n = t.num_rows
        arrays = [pa.nulls(n, fields[c].type) if c in nulls else t.column(pm.column_names[c]) for c in cols]
        tbl = pa.Table.from_arrays(arrays, schema=pa.schema([fields[c] for c in cols]))
        # split back per row group so the partition's rows stay in row-group order
        off = 0
        for r in members:
            k = int(pm.num_rows[r])
            pieces[r] = tbl.slice(off, k)
            off += k
    out = pa.concat_tables([pieces[r] for r in rgs])
    for c, target in views.items():
        if c in fields:
            i, name = cols.index(c), pm.column_names[c]
            out = out.set_column(i, pa.field(name, target), _view(out.column(i), target, name))
    return out.select(names)


# Arrow bytes per value of each Parquet physical type once decoded (BOOLEAN: a bit, rounded up; INT96
# becomes timestamp[ns]; BYTE_ARRAY: its int32 offset, its data estimated from the compressed size;
# FIXED_LEN_BYTE_ARRAY: its length, decimal128's 16 at least; any other type: 16), as a table over
# the u1 physical type.
_DECODED_WIDTH = np.full(256, 16, np.int64)
for _t, _w in {L.PT_BOOLEAN: 1, L.PT_INT32: 4, L.PT_INT64: 8, L.PT_INT96: 8, L.PT_FLOAT: 4, L.PT_DOUBLE: 8,
               L.PT_BYTE_ARRAY: 4}.items():
    _DECODED_WIDTH[_t] = _w
_BYTE_ARRAY_EXPANSION = 4  # decoded data per compressed byte of a string chunk: a typical codec ratio


def decoded_bytes(pm, rgs, cols) -> np.ndarray:
    """An estimate of the Arrow bytes each row group in `rgs` takes once columns `cols` are decoded
    (`_pm` keeps no uncompressed size): values x width plus a validity bit, strings by their
    compressed size x a typical ratio. What the scan's memory budget charges for decoding (the
    scan sizes many partitions at once through `decoded_estimate`)."""
    if not len(rgs) or not len(cols):
        return np.zeros(len(rgs), np.int64)
    ch = pm.chunks[np.ix_(np.asarray(rgs, np.int64), np.asarray(cols, np.int64))]
    return decoded_estimate(ch, pm.columns[np.asarray(cols, np.int64)][None, :])


def decoded_estimate(chunks, meta) -> np.ndarray:
    """`decoded_bytes` per row of `chunks` (2-D chunk records) from `meta`, the column records of
    each chunk's column (broadcast against `chunks`): the one estimate rule."""
    ptype = meta["physical_type"]
    width = np.where(ptype == L.PT_FIXED_LEN_BYTE_ARRAY, np.maximum(meta["fixed_byte_len"].astype(np.int64), 16),
                     _DECODED_WIDTH[ptype])
    n = chunks["num_values"].astype(np.int64)
    est = n * width + n // 8 + 64
    strings = ptype == L.PT_BYTE_ARRAY
    if strings.any():
        est += np.where(strings, chunks["total_compressed"].astype(np.int64) * _BYTE_ARRAY_EXPANSION, 0)
    return est.sum(axis=1)


def read_partition(pm, fs, parquet_path, rgs, cols, max_gap=DEFAULT_MAX_GAP, schemas=None, views=None):
    """Row groups `rgs` (non-empty, ascending) of one partition, columns `cols` (indexes): plan,
    fetch and decode in one call; an Arrow table in row-group order, or None for no row group."""
    if not len(rgs):
        return None
    p = plan(pm, rgs, cols, max_gap=max_gap)
    return decode_partition(pm, rgs, cols, fetch(fs, parquet_path, p.ranges), p.all_null, schemas, views)


_LATE_TYPES = (pa.string(), pa.binary())  # read_dictionary gives these value types (large_* too)


def late_columns(pm, rgs, cols, fields) -> list:
    """Columns of `cols` worth decoding as dictionaries: BYTE_ARRAY chunks that are
    dictionary-encoded in every row group of `rgs`, whose Arrow type (`fields`, pyarrow's) is
    string or binary. pyarrow materialising every value of such a column costs ~25 ns a row; the
    indices cost ~1, and Arrow's cast of the dictionary array gives the same values in about half
    the time of pyarrow's own materialisation (TPC-H: 4 such columns of 77,900 rows, 5.2 ms read
    plain, 2.6 ms read as dictionaries and cast), and only the kept rows' when rows are filtered."""
    out = []
    rgs = np.asarray(rgs, np.int64)
    for c, f in zip(cols, fields):
        if int(pm.columns[c]["physical_type"]) != L.PT_BYTE_ARRAY or f.type not in _LATE_TYPES:
            continue
        if (pm.chunks["encodings"][rgs, c] & L.ENC_RLE_DICTIONARY).all():
            out.append(c)
    return out


def filterable(t) -> pa.Table:
    """`t` with string_view / binary_view columns as large_string / large_binary copies: pyarrow
    has no filter kernel for the view types (same values)."""
    plain = [f.with_type(pa.large_string() if pa.types.is_string_view(f.type) else pa.large_binary())
             if pa.types.is_string_view(f.type) or pa.types.is_binary_view(f.type) else f for f in t.schema]
    return t if plain == list(t.schema) else t.cast(pa.schema(plain, t.schema.metadata))


def filter_rows(t, pred, compile=to_arrow, where="the rows") -> pa.Table:
    """filter_table through `filterable` (view columns cast back after); `compile(pred, schema)`
    gives an Arrow expression (a cache's). EvaluationError names `where`."""
    f = filterable(t)
    out = filtered(f, pred, compile, where)
    return out if f is t else out.cast(t.schema)


# Footer bytes (+ the `_pm` column schema they were checked against) -> ColumnSchemas, across tables:
# a one-shot read_table opens a new Table each call, and parsing a footer and asking pyarrow for its
# types cost more than reading it (TPC-H lineitem: ~0.3 ms to read, ~3 ms to parse and type). The
# key is the bytes themselves, so a changed file never meets a stale entry.
_SCHEMAS = {}
_SCHEMAS_MAX_ENTRIES = 64
_SCHEMAS_MAX_FOOTER = 1 << 20  # larger footers are parsed every time rather than kept


def footer_schemas(pm, fs, path) -> ColumnSchemas:
    """The Arrow types of the original file: its footer, in one range read bounded by `_pm`."""
    buf = fetch_footer(fs, path, pm)
    key = (bytes(buf), schema_key(pm)) if len(buf) <= _SCHEMAS_MAX_FOOTER else None
    hit = _SCHEMAS.get(key) if key is not None else None
    if hit is not None:
        return hit
    out = _footer_schemas(pm, buf, path)
    if key is not None:
        if len(_SCHEMAS) >= _SCHEMAS_MAX_ENTRIES:
            _SCHEMAS.clear()
        _SCHEMAS[key] = out
    return out


def _footer_schemas(pm, buf, path) -> ColumnSchemas:
    try:
        parsed = parse_footer(np.frombuffer(buf, np.uint8), footer_offset=pm.parquet_footer_offset,
                              file_size=pm.parquet_size)
    except ParquetFormatError as e:
        raise ParquetFormatError(f"{path}: {e}") from None
    return ColumnSchemas.from_footer(pm, parsed, path)


def strict_views(pm, cols, schema) -> dict:
    """footer=False: {column: type from `schema=`} for the columns `_pm` cannot give alone;
    PmError for such a column `schema=` does not name."""
    views = {}
    for c in cols:
        refused = strict_refusal(pm, c)
        if refused is None:
            continue
        name = pm.column_names[c]
        if schema is None or schema.get_field_index(name) < 0:
            raise PmError(f"column {name!r} of {pm.path} is {refused[0]}; footer=False reads no footer byte, so it "
                          f"cannot give its values exactly: pass its Arrow type in schema= (e.g. {refused[1]}), or "
                          "read with footer=True (the default)")
        views[c] = schema.field(name).type
    return views


def _view(column, target, name):
    """The column's raw values reinterpreted as `target` (strict mode, a type `schema=` gives)."""
    try:
        return pa.chunked_array([ch.view(target) for ch in column.chunks], target)
    except (pa.ArrowException, TypeError) as e:
        raise PmError(f"column {name!r}: its raw {column.type} values cannot be read as {target} from schema= "
                      f"(same width needed): {e}") from None
