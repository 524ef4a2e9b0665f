"""`read_table`: prune with `_pm`, fetch only the surviving chunks' byte ranges, decode them behind
a synthesised Parquet footer, then filter rows exactly.

The result is what `pyarrow.dataset` reads from the same files: values, types, nullability and
field order. The synthesised footer carries the original file's SchemaElements and ARROW:schema
(`read_schema.ColumnSchemas`), so pyarrow itself produces the types (uint64, naive timestamps,
string_view, ...). The original footer is read once per distinct `_pm` column schema, in one
range request of [footer offset, Parquet size): both come from `_pm`, never from a listing.

`footer=False` is strict footer-less mode: no footer byte is read, types come from `_pm` alone
(see read_table's docstring for which differ from pyarrow's), and a column whose values `_pm`
cannot give exactly is refused with a PmError rather than returned different.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..pm import layout as L
from ..parquet import constants as PQ
from ..parquet.build import ColumnChunkSpec, RowGroupSpec, parquet_file
from ..errors import ParquetFormatError, PmError, StorageError
from ..prune.expr import parse
from ..prune.arrow import filter_table
from .ranges import DEFAULT_MAX_GAP, fetch, fetch_footer, plan
from ..parquet.footer import parse_footer
from .read_schema import schema_element  # noqa: F401  (moved; still importable from here)
from .read_schema import ColumnSchemas, schema_key, strict_refusal
from .table import open_table

# ENCODINGS bit -> a Parquet Encoding that sets it (layout's map inverted; the dictionary bit as
# RLE_DICTIONARY, not the deprecated PLAIN_DICTIONARY). RLE carries every data page's levels.
_BIT_TO_ENCODING = {bit: enc for enc, bit in L.PARQUET_ENCODING_TO_BIT.items()}
_BIT_TO_ENCODING[L.ENC_RLE_DICTIONARY] = PQ.ENCODING_RLE_DICTIONARY


def _encodings(bits: int) -> list:
    return [PQ.ENCODING_RLE] + [e for b, e in _BIT_TO_ENCODING.items() if bits & b]


def decode_chunks(pm, row_groups, columns, blobs, schemas=None) -> pa.Table:
    """Decode fetched chunks (row_groups x columns, all present in `blobs`) into one Arrow table
    by wrapping them in a Parquet file whose footer carries `schemas` (a ColumnSchemas; default:
    from `_pm` alone) and the chunk layout from `_pm`."""
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
        return pq.read_table(pa.BufferReader(buf), use_pandas_metadata=False)
    except (pa.ArrowException, OSError) as e:
        raise StorageError(f"{pm.path}: chunks of row groups {list(row_groups)} do not decode with the layout "
                           f"the _pm describes: {e}") from None


def read_partition(pm, fs, parquet_path, rgs, cols, max_gap=DEFAULT_MAX_GAP, schemas=None, views=None):
    """Row groups `rgs` (non-empty, ascending) of one partition, columns `cols` (indexes): an Arrow
    table in row-group order, or None when there is nothing to decode. `schemas` gives the
    result types (default: from `_pm` alone, ColumnSchemas.from_pm); `views` maps a column to a
    type its raw values are viewed as (strict mode)."""
    schemas = schemas or ColumnSchemas.from_pm(pm)
    views = views or {}
    p = plan(pm, rgs, cols, max_gap=max_gap)
    blobs = fetch(fs, parquet_path, p.ranges)
    all_null = set(p.all_null)
    names = [pm.column_names[c] for c in cols]
    fields = dict(zip(cols, schemas.fields(pm, cols)))  # pyarrow's own, also for all-null chunks
    # Row groups with the same set of all-null columns decode together in one synthetic file.
    groups = {}
    for r in rgs:
        key = tuple(c for c in cols if (r, c) in all_null)
        groups.setdefault(key, []).append(r)
    pieces = {}
    for nulls, members in groups.items():
        live = [c for c in cols if c not in nulls]
        if live:
            t = decode_chunks(pm, members, live, blobs, schemas)
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
    if not pieces:
        return None
    out = pa.concat_tables([pieces[r] for r in rgs])
    for c, target in views.items():
        i, name = cols.index(c), pm.column_names[c]
        out = out.set_column(i, pa.field(name, target), _view(out.column(i), target, name))
    return out.select(names)


def _filter(t, pred) -> pa.Table:
    """filter_table, through large_string / large_binary copies of view columns: pyarrow has no
    filter kernel for string_view / binary_view (same values, cast back after)."""
    plain = [f.with_type(pa.large_string() if pa.types.is_string_view(f.type) else pa.large_binary())
             if pa.types.is_string_view(f.type) or pa.types.is_binary_view(f.type) else f for f in t.schema]
    if plain == list(t.schema):
        return filter_table(t, pred)
    return filter_table(t.cast(pa.schema(plain, t.schema.metadata)), pred).cast(t.schema)


def _footer_schemas(pm, fs, path) -> ColumnSchemas:
    buf = fetch_footer(fs, path, pm)
    try:
        parsed = parse_footer(np.frombuffer(buf, np.uint8), footer_offset=pm.parquet_footer_offset,
                              file_size=pm.parquet_size)
    except ParquetFormatError as e:
        raise ParquetFormatError(f"{path}: {e}") from None
    return ColumnSchemas.from_footer(pm, parsed, path)


def _strict_views(pm, cols, schema) -> dict:
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


def read_table(root, columns=None, where=None, filesystem=None, *, schema=None, max_gap=DEFAULT_MAX_GAP,
               footer=True) -> pa.Table:
    """Rows of a partitioned table matching `where`, reading only surviving chunks' byte ranges.

    root: a local directory, or a path / URI on the fsspec `filesystem` (e.g. s3://bucket/table).
    columns: names to return (default: all of the first partition). where: a predicate or SQL text.
    schema: optional Arrow schema the result is cast to (with footer=False it also gives the type
    of a refused column, see below).

    footer=True (default): the result equals `pyarrow.dataset.dataset(files).to_table(columns,
    filter)` on the same files: values, types, nullability, field order. Each distinct `_pm`
    column schema costs one range read of its Parquet footer (partitions sharing it share it).

    footer=False: strict footer-less mode, no footer byte is read; types come from `_pm` alone, i.e.
    from the Parquet physical and logical type without the file's ARROW:schema. Values are
    pyarrow's; the types are pyarrow's except exactly here:
    - unsigned 8 / 16-bit integers come back as int32;
    - timestamps of any time zone, or naive (isAdjustedToUTC=false), as tz="UTC" in the stored
      unit (same instants: a naive value is read as UTC);
    - strings (large_string, string_view, dictionary<string>) as string; binary (large_binary,
      binary_view) as binary;
    - duration and date64 (named by ARROW:schema only) and time32 / time64 (no QuestDB type) as
      their Parquet storage: int64, date32, int32 / int64;
    - a column without a QuestDB type whose raw values could mean something else, i.e. an INT64
      (uint64, or a timestamp unit `_pm` cannot name) or a 2-byte fixed-length array (float16),
      is refused (PmError naming it) unless `schema=` names its type: its raw values are then
      reinterpreted (Arrow `view`, same width) as that type, e.g. pa.uint64(). Or use footer=True.
    """
    import fsspec

    fs = filesystem or fsspec.filesystem("file")
    pred = parse(where) if isinstance(where, str) else where
    cache = {}  # schema_key(pm) -> ColumnSchemas: one footer read per distinct _pm column schema

    def schemas_of(pm, path):
        key = schema_key(pm)
        s = cache.get(key)
        if s is None:
            s = cache[key] = _footer_schemas(pm, fs, path) if footer else ColumnSchemas.from_pm(pm)
        return s

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
            need = list(want) if pred is None else \
                list(want) + sorted(pred.resolve(pm.column_names).columns() - set(want))  # SQL names: expr.Names
            cols = [pm.column_index(n) for n in need]
            views = {} if footer else _strict_views(pm, cols, schema)
            rgs = np.nonzero(masks[part])[0] if masks is not None else np.arange(pm.row_group_count)
            rgs = [int(r) for r in rgs if int(pm.num_rows[r]) > 0]
            if not rgs:
                continue
            path = table.parquet_path(part)
            t = read_partition(pm, fs, path, rgs, cols, max_gap, schemas_of(pm, path), views)
            if t is None:
                continue
            if pred is not None:
                t = _filter(t, pred)
            out.append(t.select(want))
        if not out:
            cols = [first.column_index(n) for n in want]
            views = {} if footer else _strict_views(first, cols, schema)
            fields = schemas_of(first, table.parquet_path(table.partitions[0])).fields(first, cols)
            result = pa.schema([f.with_type(views[c]) if c in views else f for c, f in zip(cols, fields)]).empty_table()
        else:
            result = pa.concat_tables(out, promote_options="permissive") if len(out) > 1 else out[0]
    if schema is not None:
        result = result.cast(schema)
    return result
