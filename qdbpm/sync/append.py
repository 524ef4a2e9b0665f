"""Append rows to a Parquet file in place, the way QuestDB grows a Parquet partition, then update
its `_pm`.

    append(parquet_path, table)   new row groups after the old footer, a new footer, `_pm` update
    recover(parquet_path)         drop bytes a crashed append left past the committed Parquet size

Order of writes (every one through `ops`, the `pm.fileops.FileOps` seam, so a crash-test harness can
count and cut at each boundary):

  1. no `_pm` yet: `generate` one for the file as it is (atomic: temp file + rename);
     otherwise `recover`: a Parquet file longer than the latest `_pm` snapshot's Parquet size holds
     an append that never committed; truncate it back (+ fsync).
  2. one write at the old end of file: the new column chunks (the bytes [4, footer) of the table
     written by pyarrow into memory), then the new footer = the old FileMetaData with the new row
     groups appended, their offsets rebased (`ParquetFooter.append_footer`), then u32 length + PAR1;
     fsync.
  3. `generate.update`: new `_pm` blocks and footer, published by the size patch at offset 0.

The `_pm` is the commit record: until step 3 publishes, the latest snapshot still names the old
Parquet size, readers pinned to it read only bytes before the old end (which nothing rewrites), and
the next `append` / `recover` truncates the uncommitted tail. So appending to a file by other means
must be followed by `update` before the next `append`, or that append's bytes count as a crashed
one and are dropped.

One writer at a time (no locking here, as in QuestDB where the table writer owns the partition).
A missing `_pm` is generated with the default bloom="inline".

Schema: the table must have the file's Arrow schema (as pyarrow reads it), and pyarrow must lay it
out as the file does: element by element the same physical types, lengths, repetitions, names and
child counts (format version 2.6 or 1.0, whichever reproduces the file). Annotations may differ
when pyarrow reads both as the same Arrow types (DuckDB writes converted types pyarrow does not):
the new row groups are then filed under the file's own schema. Anything else is a PmError naming
the difference, before any byte is written. Each column keeps the codec of its last chunk; columns
whose last chunk has a bloom filter get one (sized for the new rows) in the new row groups.

Order: when the file's row groups all declare the same sorting columns (or the partition is
sorted by its designated timestamp), the table must be sorted that way too, and rows sorted by
the designated timestamp must not start before the file's last row group ends (QuestDB rewrites
a partition for out-of-order rows; it never appends them). The new row groups declare the file's
sorting columns. The `_pm` header, which update mode keeps, so never claims an order the file
breaks.

A QuestDB `questdb` key-value JSON in the footer is carried over with `unused_bytes` raised by the
old footer's size (footer + u32 length + PAR1: dead bytes now), as QuestDB keeps it; for external
files `update` accounts for the same bytes itself.
"""

from __future__ import annotations

import io
import json
import os

import numpy as np

from ..pm import layout as L
from ..parquet import compact as T
from ..parquet.build import arrow_schema, build_file_metadata, frame_footer
from ..parquet.constants import (
    CT_DECIMAL, KV_KEY, KV_VALUE, MAGIC, SE_FIELD_ID, SE_NAME, SE_NUM_CHILDREN, SE_REPETITION_TYPE, SE_TYPE,
    SE_TYPE_LENGTH,
)
from ..errors import ParquetFormatError, PmError
from .generate import default_pm_path, generate, update
from ..parquet.footer import read_footer
from ..pm.reader import PmFile
from ..parquet.schema import common_sorting, map_schema
from ..pm.fileops import DEFAULT_OPS, FileOps

__all__ = ["append", "recover"]

# Parquet CompressionCodec -> pyarrow's name. LZO and Hadoop-framed LZ4 cannot be written by
# pyarrow: new row groups of such columns use snappy.
_PYARROW_CODEC = {L.CODEC_UNCOMPRESSED: "none", L.CODEC_SNAPPY: "snappy", L.CODEC_GZIP: "gzip",
                  L.CODEC_BROTLI: "brotli", L.CODEC_ZSTD: "zstd", L.CODEC_LZ4_RAW: "lz4"}


def recover(parquet_path, pm_path=None, *, ops: FileOps = DEFAULT_OPS) -> int:
    """Truncate `parquet_path` back to the Parquet size of the latest `_pm` snapshot when it is
    longer (an append that crashed before its `_pm` update published). Returns that size.

    Without a `_pm` there is nothing to go by: the file is left alone and its size returned.
    A file shorter than the snapshot, or whose bytes at the snapshot's end are not the footer
    length + PAR1 the snapshot records, is not the file the `_pm` describes: PmError, nothing
    is touched.
    """
    parquet_path = os.fspath(parquet_path)
    pm_path = pm_path or default_pm_path(parquet_path)
    if not os.path.exists(pm_path):
        return os.path.getsize(parquet_path)
    with PmFile(pm_path) as pm:
        size, footer_length = pm.parquet_size, pm.parquet_footer_length
    actual = os.path.getsize(parquet_path)
    if actual < size:
        raise PmError(f"{parquet_path} is {actual} bytes, shorter than the {size} its _pm snapshot "
                      f"({pm_path}) records: not the file the _pm describes")
    with open(parquet_path, "rb") as f:
        f.seek(size - L.PARQUET_TAIL)
        tail = f.read(L.PARQUET_TAIL)
    want = footer_length.to_bytes(4, "little") + MAGIC
    if tail != want:
        raise PmError(f"{parquet_path}: bytes [{size - L.PARQUET_TAIL}, {size}) are {tail.hex()}, not the footer "
                      f"length + PAR1 ({want.hex()}) of the _pm snapshot ({pm_path}): not the file it describes")
    if actual > size:
        fd = ops.open_rw(parquet_path)
        try:
            ops.truncate(fd, size)
            ops.fsync(fd)
        finally:
            ops.close(fd)
    return size


def append(parquet_path, table, pm_path=None, *, row_group_size=None, ops: FileOps = DEFAULT_OPS) -> int:
    """Append the rows of a pyarrow Table to `parquet_path` in place as new row groups, then update
    its `_pm` (created first, for the file as it was, when missing). Returns the new committed
    `_pm` size.

    The table must have the file's Arrow schema: same column names in the same order and the same
    types (a column with nulls cannot go into a non-nullable one); PmError names the difference.
    Each column keeps the codec of its chunk in the file's last row group, and columns whose
    chunks there carry a bloom filter get one in the new row groups too. `row_group_size`: rows
    per new row group (pyarrow's default when None). An empty table appends nothing.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet_path = os.fspath(parquet_path)
    pm_path = pm_path or default_pm_path(parquet_path)
    if not isinstance(table, pa.Table):
        raise PmError(f"append takes a pyarrow.Table, got {type(table).__name__}")
    if not os.path.exists(pm_path):
        generate(parquet_path, pm_path, ops=ops)
    else:
        recover(parquet_path, pm_path, ops=ops)
    footer = read_footer(parquet_path)
    if table.num_rows == 0:
        with PmFile(pm_path) as pm:
            return pm.pm_size
    old_size = footer.file_size
    try:
        file_schema = pq.read_schema(parquet_path)
    except (pa.ArrowException, OSError) as e:
        raise PmError(f"{parquet_path}: cannot append: pyarrow cannot read the file's schema: {e}") from None
    data = _check_table(parquet_path, file_schema, table)

    R = footer.row_group_count
    options = {}
    if R and footer.column_count:
        names = [leaf.name for leaf in footer.leaves]
        options["compression"] = {n: _PYARROW_CODEC.get(int(c), "snappy")
                                  for n, c in zip(names, footer.chunks["codec"][R - 1].tolist())}
        bloom = (footer.bloom_offset[R - 1] > 0) & (footer.bloom_length[R - 1] > 0)
        if bloom.any():
            # Sized for the rows of one new row group (pyarrow's default ndv makes ~1 MiB filters).
            ndv = max(1, min(table.num_rows, row_group_size or table.num_rows))
            options["bloom_filter_options"] = {names[c]: {"ndv": ndv, "fpp": 0.01}
                                               for c in bloom.nonzero()[0].tolist()}
    order = _check_order(parquet_path, footer, data)
    if order:
        options["sorting_columns"] = order
    if any(leaf.physical_type in (L.PT_INT32, L.PT_INT64) and (leaf.converted_type == CT_DECIMAL or (
            leaf.logical_type or ("",))[0] == "DECIMAL") for leaf in footer.leaves):
        options["store_decimal_as_integer"] = True  # the file keeps small decimals as INT32 / INT64
    # The format version changes how pyarrow lays some types out (uint32, ns timestamps): take the
    # first that reproduces the file's layout, starting with the one its footer suggests.
    layout_errors, write_errors = [], []
    for version in ["1.0", "2.6"] if footer.version == 1 else ["2.6", "1.0"]:
        buf = io.BytesIO()
        try:
            pq.write_table(data, buf, row_group_size=row_group_size, version=version, **options)
        except pa.ArrowException as e:
            write_errors.append(PmError(f"{parquet_path}: cannot append: pyarrow cannot write the table: {e}"))
            continue
        new = buf.getvalue()
        new_footer = read_footer(io.BytesIO(new))
        try:
            _check_parquet_schema(parquet_path, footer, new_footer)
            break
        except PmError as e:
            layout_errors.append(e)
    else:
        raise (layout_errors or write_errors)[0]
    new_meta = new_footer.metadata_bytes()
    old_schema = footer.schema_structs()
    if new_footer.schema_structs() != old_schema:
        # Same layout (checked above): file the new row groups under the file's own schema
        # (root name, annotations and field ids), which the appended footer keeps anyway.
        s, _ = T.decode_struct(new_meta)
        s.set(T.FMD_SCHEMA, T.T.LIST, T.TList(T.T.STRUCT, old_schema))
        new_meta = T.encode_struct(s)
    _check_continues(parquet_path, footer, new_footer)
    chunks = memoryview(new)[len(MAGIC) : new_footer.footer_offset]
    try:
        meta = footer.append_footer(new_meta, old_size - len(MAGIC))
    except ValueError as e:
        raise PmError(f"{parquet_path}: cannot append: {e}") from None
    meta = _bump_questdb_unused(meta, old_size - footer.footer_offset)

    fd = ops.open_rw(parquet_path)
    try:
        ops.pwrite(fd, bytes(chunks) + frame_footer(meta), old_size)
        ops.fsync(fd)
    finally:
        ops.close(fd)
    return update(parquet_path, pm_path, ops=ops)


def _sort_keys(footer):
    """(leaf index, descending, nulls_first) the file's rows are declared sorted by: the sorting
    columns every row group declares, else the designated timestamp when the partition is
    sorted by it (SORTING_IS_DTS_ASC); [] when none. Also returns the designated timestamp."""
    mapping = map_schema(footer)
    keys = common_sorting(footer)
    if not keys and mapping.sorting_is_dts_asc:
        keys = [(mapping.designated_timestamp, False, False)]
    return keys, mapping.designated_timestamp


def _check_order(path, footer, data):
    """The table must keep the order the file declares (QuestDB appends in timestamp order; rows
    out of order would make the `_pm`, whose header stays as it is, claim a false order). Returns
    the pyarrow SortingColumns the new row groups declare: the file's, when its row groups
    declare any."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    keys, _ = _sort_keys(footer)
    names = [footer.leaves[c].name for c, _, _ in keys]
    if not keys or any(n not in data.column_names or footer.leaves[c].max_rep_level
                       for n, (c, _, _) in zip(names, keys)):
        return None  # nothing declared, or nested keys an Arrow sort cannot check: no claim to keep
    spec = [(n, "descending" if d else "ascending", "at_start" if nf else "at_end")
            for n, (_, d, nf) in zip(names, keys)]
    try:
        idx = pc.sort_indices(data, sort_keys=spec)
    except (TypeError, ValueError, pa.ArrowException):  # pyarrow < 25: one null placement for all
        if len({p for _, _, p in spec}) > 1:
            return None
        idx = pc.sort_indices(data, sort_keys=[k[:2] for k in spec], null_placement=spec[0][2])
    if not pc.all(pc.equal(idx, pa.array(np.arange(len(data), dtype=np.uint64)))).as_py():
        raise PmError(f"{path}: cannot append: the file's rows are sorted by "
                      + ", ".join(f"{n}{' desc' if d else ''}" for n, (_, d, _) in zip(names, keys))
                      + " and the table's rows are not")
    if not common_sorting(footer):
        return None  # only implied (SORTING_IS_DTS_ASC): the file's row groups declare nothing
    return [pq.SortingColumn(c, descending=d, nulls_first=nf) for c, d, nf in keys]


def _check_continues(path, footer, new_footer):
    """With rows sorted by the designated timestamp, the new rows must not start before the
    file's last row group ends (QuestDB rewrites a partition for out-of-order rows; an append
    never does). Compared on the stored INT64 stats of both files."""
    keys, dts = _sort_keys(footer)
    if dts < 0 or not keys or keys[0][:2] != (dts, False) or not footer.row_group_count \
            or not new_footer.row_group_count:
        return
    old_max = footer.stats.get((footer.row_group_count - 1, dts, 1))
    new_min = new_footer.stats.get((0, dts, 0))
    if old_max is None or new_min is None or len(old_max) != 8 or len(new_min) != 8:
        return
    a, b = (int.from_bytes(x, "little", signed=True) for x in (old_max, new_min))
    if b < a:
        raise PmError(f"{path}: cannot append: the table starts at {footer.leaves[dts].name} = {b} (stored units), "
                      f"before the file's last row group ends ({a}): out-of-order rows need a rewrite")


def _check_table(path, file_schema, table):
    """`table` with the file's schema (field metadata such as field ids included), or PmError
    naming the first difference."""
    import pyarrow as pa

    want, got = file_schema.names, table.schema.names
    if want != got:
        missing = [n for n in want if n not in got]
        extra = [n for n in got if n not in want]
        what = []
        if missing:
            what.append(f"missing columns {missing}")
        if extra:
            what.append(f"columns not in the file {extra}")
        if not what:
            what.append(f"columns in order {got}, the file has {want}")
        raise PmError(f"{path}: cannot append a table with a different schema: " + "; ".join(what))
    for field, col in zip(file_schema, table.columns):
        if not col.type.equals(field.type):
            raise PmError(f"{path}: cannot append: column {field.name!r} is {col.type} in the table, "
                          f"{field.type} in the file")
        if not field.nullable and col.null_count:
            raise PmError(f"{path}: cannot append: column {field.name!r} has {col.null_count} nulls but is "
                          "not nullable in the file")
    return pa.Table.from_arrays(table.columns, schema=file_schema.remove_metadata())


# SchemaElement fields: structure (must be equal) and annotations (may differ when pyarrow reads
# both as the same Arrow type, e.g. DuckDB's INT_64 converted type on an int64 column).
_STRUCTURE = (SE_TYPE, SE_TYPE_LENGTH, SE_REPETITION_TYPE, SE_NAME, SE_NUM_CHILDREN)


def _check_parquet_schema(path, footer, new_footer):
    """The Parquet schema pyarrow wrote for the table must lay the columns out as the file's does.

    Element by element: physical type, type_length, repetition, name (the root's name and
    repetition aside) and num_children equal. Annotations (converted / logical type, scale, precision) may differ only
    when pyarrow reads both schemas, without any key-value metadata, as the same Arrow types:
    then the values are encoded alike and the new row groups are filed under the file's schema.
    Field ids are the file's. Otherwise PmError names the element and the fields."""
    old, new = footer.schema_structs(), new_footer.schema_structs()
    if len(old) != len(new):
        raise PmError(f"{path}: cannot append: pyarrow writes the table as {len(new) - 1} schema elements, "
                      f"the file has {len(old) - 1}")
    annotated = []
    for i, (a, b) in enumerate(zip(old, new)):
        for fid in _STRUCTURE:
            if i == 0 and fid in (SE_NAME, SE_REPETITION_TYPE):
                continue  # the root's name and repetition mean nothing (QuestDB writes none; pyarrow REQUIRED)
            if a.get(fid) != b.get(fid):
                raise PmError(f"{path}: cannot append: schema element {i} ({footer.schema[i].name!r}): "
                              f"{_SE_NAMES[fid]} is {_show(a.get(fid))} in the file, {_show(b.get(fid))} in the "
                              "table as pyarrow writes it")
        ka = {f: v for f, (_, v) in a.fields.items() if f not in _STRUCTURE and f != SE_FIELD_ID}
        kb = {f: v for f, (_, v) in b.fields.items() if f not in _STRUCTURE and f != SE_FIELD_ID}
        if ka != kb:
            annotated.append(i)
    if annotated:
        sa, sb = _plain_arrow_schema(old), _plain_arrow_schema(new)
        if sa is None or sb is None or not sa.equals(sb):
            i = annotated[0]
            raise PmError(f"{path}: cannot append: schema element {i} ({footer.schema[i].name!r}) is annotated "
                          f"{_fields(old[i])} in the file, {_fields(new[i])} in the table as pyarrow writes it, "
                          "and pyarrow does not read them as the same type")


_SE_NAMES = {SE_TYPE: "the physical type", SE_TYPE_LENGTH: "type_length", SE_REPETITION_TYPE: "repetition",
             SE_NAME: "the name", SE_NUM_CHILDREN: "num_children"}


def _show(v):
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def _plain_arrow_schema(structs):
    """The Arrow schema pyarrow derives from these schema elements alone (no ARROW:schema), or None."""
    structs = [T.Struct({f: v for f, v in s.fields.items() if f != SE_FIELD_ID}) for s in structs]
    meta = build_file_metadata(structs, [], created_by=None)
    try:
        return arrow_schema(meta)
    except Exception:  # pyarrow refuses the schema (e.g. a MAP with optional keys)
        return None


def _fields(s):
    return None if s is None else {f: _show(v) for f, (_, v) in s.fields.items()}


def _bump_questdb_unused(meta: bytes, delta: int) -> bytes:
    """FileMetaData bytes with the `questdb` JSON's unused_bytes raised by `delta` (added when
    missing); unchanged without such a JSON object. Only the key_value_metadata value is
    re-encoded; every other field stays as it was."""
    buf = memoryview(meta).cast("B")
    for fid, ttype, start, end in T.top_fields(buf):
        if fid != T.FMD_KV or ttype != T.T.LIST:
            continue
        kvs = T.decode_value(buf, T.T.LIST, start)[0]
        for kv in kvs.values:
            # A mistyped key or value is absent (Thrift's skip rule), never a bare TypeError.
            if not isinstance(kv, T.Struct) or kv.typed(KV_KEY, T.T.BINARY) != b"questdb" or not kv.typed(KV_VALUE, T.T.BINARY):
                continue
            try:
                doc = json.loads(kv.typed(KV_VALUE, T.T.BINARY))
            except ValueError:
                return meta
            if not isinstance(doc, dict):
                return meta
            old = doc.get("unused_bytes", 0)
            if isinstance(old, bool) or not isinstance(old, int):
                raise ParquetFormatError(f"questdb key-value metadata unused_bytes is {old!r}, not an integer")
            doc["unused_bytes"] = max(0, old) + delta
            kv.set(KV_VALUE, T.T.BINARY, json.dumps(doc, separators=(",", ":")).encode())
            return bytes(buf[:start]) + T.encode_value(T.T.LIST, kvs) + bytes(buf[end:])
    return meta
