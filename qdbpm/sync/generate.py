"""Parquet file → `_pm`: fresh generation and update mode, straight from the Parquet footer.

The footer is parsed by the Cython Thrift reader into numpy chunk records whose stat bytes are
slices of the footer buffer, so a 10,000-row-group file costs no Python object per chunk unless
bloom filters are copied.
"""

from __future__ import annotations

import dataclasses
import decimal
import os

import numpy as np

from ..pm import layout as L
from ..bloom.sbbf import SplitBlockBloomFilter
from ..parquet.bloom_header import parse_bloom_header
from ..parquet.constants import CT_TIME_MICROS, CT_TIME_MILLIS, CT_TIMESTAMP_MICROS, CT_TIMESTAMP_MILLIS
from ..pm.description import ByteRefs, Description
from ..errors import ParquetFormatError, PmError
from ..parquet.footer import read_footer
from ..pm.reader import PmFile
from ..parquet.schema import map_schema
from ..table.ranges import coalesce
from ..pm.fileops import DEFAULT_OPS, FileOps
from ..questdb.symbols import symbol_not_null
from ..questdb.table_dir import is_questdb_table
from ..pm.writer import first_chunk_starts, unchanged_row_groups, write_new, write_update
from ..storage.objects import RangeFile, cat, object_size, reader_for
from .remote import build_and_put, default_pm_object, resolve

# Decimal arithmetic with enough digits for DECIMAL256 (the default context rounds at 28).
_EXACT = decimal.Context(prec=100)

BLOOM_MODES = ("inline", "external", None)
# Bloom filters closer than this are fetched in one read.
COALESCE_GAP = 1 << 20


def default_pm_path(parquet_path) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(os.fspath(parquet_path))), L.PM_FILE_NAME)


def _check_mode(bloom):
    if bloom == "none":
        return None
    if bloom not in BLOOM_MODES:
        raise PmError(f"bloom must be 'inline', 'external' or None, got {bloom!r}")
    return bloom


def describe_footer(footer, mapping=None) -> Description:
    """The Description of a parsed Parquet footer, without bloom filters."""
    mapping = mapping or map_schema(footer)
    return Description(
        columns=mapping.columns,
        num_rows=footer.rg_num_rows.astype(np.uint64),
        chunks=footer.chunks,
        stats=footer.stats,
        designated_timestamp=mapping.designated_timestamp,
        sorting_columns=mapping.sorting_columns,
        sorting_is_dts_asc=mapping.sorting_is_dts_asc,
        parquet_footer_offset=footer.footer_offset,
        parquet_footer_length=footer.footer_length,
        unused_bytes=mapping.unused_bytes,
    )


def _read_ranges(f, ranges):
    """Read [(offset, length)] sorted by offset, coalescing near neighbours: {offset: bytes}."""
    out = {}
    # A local file: any hole up to COALESCE_GAP is cheaper read than sought, whatever the waste.
    for rng in coalesce([(off, ln, (off, ln)) for off, ln in ranges], max_gap=COALESCE_GAP,
                        max_range=float("inf"), max_waste=float("inf")):
        start, end = rng.start, rng.end
        f.seek(start)
        blob = f.read(end - start)
        if len(blob) != end - start:
            raise ParquetFormatError(f"bloom filter bytes [{start}, {end}) run past the end of the file")
        for off, ln in rng.chunks:
            out[off] = blob[off - start : off - start + ln]
    return out


def parquet_blooms(f, footer, rows, columns, external: bool) -> ByteRefs | None:
    """The SBBF bitsets the Parquet file holds for (rows x columns); None when there are none.

    A filter is used only when the footer gives offset > 0 and length > 0 and its header says
    BLOCK / XXHASH / UNCOMPRESSED with a positive multiple of 32 bytes; otherwise that chunk simply
    has no filter (docs/format.md#bloom-filters).
    """
    R, C = footer.chunks.shape
    start = np.zeros((R, C), np.int64)
    length = np.full((R, C), -1, np.int64)
    sel = np.zeros((R, C), bool)
    sel[np.ix_(np.asarray(rows, np.int64), np.asarray(columns, np.int64))] = True
    present = sel & (footer.bloom_offset > 0) & (footer.bloom_length > 0)
    if not present.any():
        return None
    offs, lens = footer.bloom_offset[present], footer.bloom_length[present]
    limit = footer.footer_offset
    bad = offs + lens > limit
    if bad.any():
        k = int(np.nonzero(bad)[0][0])
        raise ParquetFormatError(f"bloom filter at offset {int(offs[k])} with length {int(lens[k])} runs past the "
                                 f"Parquet data, which ends at the footer at {limit}")
    order = np.argsort(offs, kind="stable")
    blobs = _read_ranges(f, [(int(offs[k]), int(lens[k])) for k in order])
    parts, pos = [], 0
    for (r, c), off, ln in zip(np.argwhere(present), offs.tolist(), lens.tolist()):
        raw = blobs[off]
        try:
            nbytes, hlen = parse_bloom_header(raw, 0)
        except ParquetFormatError:
            continue  # not a filter we can use: the chunk has none
        if hlen + nbytes > ln:
            continue
        if external:
            start[r, c], length[r, c] = off + hlen, nbytes
        else:
            parts.append(raw[hlen : hlen + nbytes])
            start[r, c], length[r, c] = pos, nbytes
            pos += nbytes
    if not (length >= 0).any():
        return None
    data = np.frombuffer(b"".join(parts), np.uint8) if parts else np.zeros(0, np.uint8)
    return ByteRefs(data, start, length)


_UNIT = {"MILLIS": "ms", "MICROS": "us", "NANOS": "ns"}


def _stored_unit(leaf):
    """Unit of a Parquet TIMESTAMP / TIME leaf as stored ("ms", "us", "ns"), else None."""
    lt = leaf.logical_type if leaf is not None else None
    if lt and lt[0] in ("TIMESTAMP", "TIME"):
        return _UNIT.get(lt[1])
    ct = leaf.converted_type if leaf is not None else None
    return {CT_TIMESTAMP_MILLIS: "ms", CT_TIMESTAMP_MICROS: "us", CT_TIME_MILLIS: "ms", CT_TIME_MICROS: "us"}.get(ct)


def _plain_values(arr, column, leaf=None):
    """Arrow values of one chunk as what the SBBF hashes: the Parquet physical type's PLAIN bytes.

    The Arrow type a reader hands back need not be the stored one (pyarrow writes timestamp[s]
    and time32[s] as milliseconds and date64 as INT32 days; a stored Arrow schema may ask for the
    original type back): temporal values are cast to the unit the file stores first (`leaf`:
    the Parquet leaf). Dictionary and extension arrays are decoded to their values.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = arr.drop_null()
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    pt = column.physical_type
    t = arr.type
    unit = _stored_unit(leaf)
    if pt == L.PT_INT32:
        if pa.types.is_date(t):
            return pc.cast(arr, pa.date32()).view(pa.int32()).to_numpy()
        if pa.types.is_time(t):
            return pc.cast(arr, pa.time32(unit or "ms")).view(pa.int32()).to_numpy()
        if pa.types.is_decimal(t):
            return _decimal_ints(arr, np.int32)
        return pc.cast(arr, pa.int32(), safe=False).to_numpy()
    if pt == L.PT_INT64:
        if pa.types.is_timestamp(t):
            if unit is not None and unit != t.unit:
                arr = pc.cast(arr, pa.timestamp(unit, t.tz))
            return arr.view(pa.int64()).to_numpy()
        if pa.types.is_time(t):
            return pc.cast(arr, pa.time64(unit or "us")).view(pa.int64()).to_numpy()
        if pa.types.is_duration(t) or pa.types.is_date64(t):
            return arr.view(pa.int64()).to_numpy()
        if pa.types.is_decimal(t):
            return _decimal_ints(arr, np.int64)
        return pc.cast(arr, pa.int64(), safe=False).to_numpy()
    if pt == L.PT_FLOAT:
        return pc.cast(arr, pa.float32()).to_numpy()
    if pt == L.PT_DOUBLE:
        return pc.cast(arr, pa.float64()).to_numpy()
    if pt == L.PT_BYTE_ARRAY:
        return pc.cast(arr, pa.large_binary()) if not pa.types.is_decimal(t) else _decimal_bytes(arr, None)
    if pt == L.PT_FIXED_LEN_BYTE_ARRAY:
        if pa.types.is_decimal(t):
            return _decimal_bytes(arr, column.fixed_byte_len)
        if pa.types.is_float16(t):
            # FLOAT16 is stored as its 2 little-endian bytes; NaN is never inserted.
            vals = arr.to_numpy(zero_copy_only=False)
            vals = vals[~np.isnan(vals)]
            return pa.array([v.tobytes() for v in vals.astype("<f2")], pa.binary())
        return pc.cast(arr, pa.binary())
    raise PmError(f"column {column.name!r}: cannot build a bloom filter for physical type "
                  f"{L.PHYSICAL_TYPE_NAMES[pt]}")


def _unscaled(arr):
    """Unscaled integers of a decimal array (the value Parquet stores)."""
    scale = arr.type.scale
    return [int(v.scaleb(scale, _EXACT)) for v in arr.to_pylist()]


def _decimal_ints(arr, dtype):
    return np.asarray(_unscaled(arr), dtype)


def _decimal_bytes(arr, width):
    """Big-endian two's complement, as Parquet stores FIXED_LEN / BYTE_ARRAY decimals."""
    import pyarrow as pa

    out = []
    for v in _unscaled(arr):
        n = width or max(1, (v.bit_length() + 8) // 8)
        out.append(v.to_bytes(n, "big", signed=True))
    return pa.array(out, pa.binary())


def built_blooms(source, footer, desc: Description, rows, columns, existing: ByteRefs | None,
                 *, strict: bool = True) -> ByteRefs:
    """SBBF bitsets built from the data for (rows x columns) that have none in `existing`;
    `source` is what pyarrow reads the data from (a path or a binary file object).

    strict: a column qdbpm cannot build filters for (nested, BOOLEAN, INT96) is a PmError;
    otherwise (update mode) it is skipped and keeps no filter where the file has none.
    """
    import pyarrow.parquet as pq

    R, C = desc.chunks.shape
    objs = np.empty((R, C), object)
    if existing is not None:
        for r, c in np.argwhere(existing.length >= 0):
            objs[r, c] = existing.get((r, c))
    todo = [(int(c), [int(r) for r in rows if objs[r, c] is None]) for c in columns]
    todo = [(c, rs) for c, rs in todo if rs]
    if not todo:
        return ByteRefs.from_objects(objs)
    pf = pq.ParquetFile(source)
    for c, rs in todo:
        col = desc.columns[c]
        problem = None
        if col.max_rep_level or "." in col.name and col.name not in pf.schema_arrow.names:
            problem = f"column {col.name!r} is nested; qdbpm builds bloom filters for flat columns only"
        elif col.physical_type in (L.PT_BOOLEAN, L.PT_INT96):
            problem = (f"column {col.name!r}: cannot build a bloom filter for physical type "
                       f"{L.PHYSICAL_TYPE_NAMES[col.physical_type]}")
        if problem is not None:
            if strict:
                raise PmError(problem)
            continue
        for r in rs:
            values = _plain_values(pf.read_row_group(r, columns=[col.name]).column(0).combine_chunks(), col,
                                   footer.leaves[c])
            ndv = int(desc.chunks[r, c]["distinct_count"]) if desc.chunks[r, c]["stat_flags"] & L.STAT_DISTINCT_COUNT_PRESENT else len(values)
            sbbf = SplitBlockBloomFilter.for_ndv(max(ndv, 1), 0.01)
            sbbf.insert(values)
            objs[r, c] = sbbf.to_bytes()
    return ByteRefs.from_objects(objs)


def _column_indices(desc, names):
    idx = []
    for n in names:
        try:
            idx.append([c.name for c in desc.columns].index(n))
        except ValueError:
            raise PmError(f"no column {n!r}; columns: {[c.name for c in desc.columns]}") from None
    return sorted(set(idx))


def generate(parquet_path, pm_path=None, *, bloom="inline", bloom_columns=None, ops: FileOps = DEFAULT_OPS,
             filesystem=None, storage_options=None, parquet_size=None, repetition=None) -> int:
    """Build (or rebuild from scratch) the `_pm` of a Parquet file from its footer.

    bloom: "inline" copies the file's split-block filters into the `_pm`, "external" references
    their bitsets inside the Parquet file, None (or "none") leaves them out. bloom_columns: names
    of columns whose filters qdbpm builds from the data (inline, nulls and NaN skipped) in row
    groups where the file has none. Returns the committed size. `ops`: the writer's I/O seam.

    A URL (s3://bucket/day/data.parquet, with `storage_options`) or a path on an fsspec
    `filesystem` is read by range requests (storage/objects.py) and its `_pm` stored with one PUT
    (sync/remote.py); `parquet_size`, when known (from a listing), saves the size request.

    repetition: how column descriptors get their repetition flags (parquet/schema.py
    REPETITION_RULES): None = QuestDB's encoder rule for a file QuestDB wrote, the Parquet schema
    otherwise. A local file in a partition directory of a QuestDB table takes the NULL flags of
    the table's symbol maps, as QuestDB does, and so reproduces its `_pm` byte for byte.
    """
    bloom = _check_mode(bloom)
    target = resolve(parquet_path, filesystem, storage_options)
    if target is not None:
        fs, path = target
        size = object_size(fs, path) if parquet_size is None else parquet_size
        f = RangeFile(reader_for(fs), path, size)
        desc = _new_description(f, f, path, bloom, bloom_columns, repetition)
        pm_obj = fs._strip_protocol(pm_path) if pm_path else default_pm_object(path)
        return build_and_put(fs, pm_obj, lambda local: write_new(local, desc, ops=ops))
    pm_path = pm_path or default_pm_path(parquet_path)
    with open(parquet_path, "rb") as f:
        desc = _new_description(f, parquet_path, os.fspath(parquet_path), bloom, bloom_columns, repetition,
                                _questdb_root(parquet_path))
    return write_new(pm_path, desc, ops=ops)


def _questdb_root(parquet_path):
    """The QuestDB table whose partition directory holds `parquet_path`, or None."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(os.fspath(parquet_path))))
    return root if is_questdb_table(root) else None


def _new_description(f, source, name, bloom, bloom_columns, repetition=None, table_root=None) -> Description:
    """The Description of a fresh `_pm` for the Parquet file open as `f` (`source`: what pyarrow
    opens to build filters from the data, the path or `f`; `table_root`: its QuestDB table)."""
    try:
        footer = read_footer(f)
    except ParquetFormatError as e:
        raise ParquetFormatError(e.args[0] if name in e.args[0] else f"{name}: {e}") from None
    symbols = None
    if table_root is not None:
        symbols = symbol_not_null(table_root, [".".join(leaf.path) for leaf in footer.leaves])
    desc = describe_footer(footer, map_schema(footer, repetition=repetition, symbol_not_null=symbols))
    R, C = desc.chunks.shape
    blooms = None
    if bloom is not None:
        blooms = parquet_blooms(f, footer, range(R), range(C), external=bloom == "external")
    build = _column_indices(desc, bloom_columns or [])
    if build:
        if bloom != "inline":
            raise PmError("bloom_columns builds inline filters; use bloom='inline'")
        blooms = built_blooms(source, footer, desc, range(R), build, blooms)
    if blooms is not None:
        have = set(np.nonzero((blooms.length >= 0).any(axis=0))[0].tolist()) | set(build)
        desc = dataclasses.replace(desc, blooms=blooms, bloom_external=bloom == "external",
                                   bloom_columns=sorted(have))
    return desc


def update(parquet_path, pm_path=None, *, base_parquet_size=None, ops: FileOps = DEFAULT_OPS,
           filesystem=None, storage_options=None, parquet_size=None) -> int:
    """The Parquet file grew in place: append new / changed blocks and a footer to its `_pm`.

    The anchor is the latest snapshot (or the one of `base_parquet_size`). Bloom filters: the
    header's bloom columns are fixed; new blocks take the file's filters for them and, in inline
    mode, qdbpm builds them from the data where the file has none (columns it cannot build for,
    nested or BOOLEAN ones, are left without).

    UNUSED_BYTES: a QuestDB file's comes from its `questdb` JSON. For an external file it is
    carried forward: the old snapshot's value, plus the old Parquet footer with its 8-byte tail
    when the footer moved (it is dead once new bytes follow it), plus the TOTAL_COMPRESSED of
    every chunk of a replaced row group (one whose column-0 chunk moved). Bloom filters and page
    indexes of replaced row groups are not counted: the `_pm` does not know their sizes.

    On an object store (a URL or an fsspec `filesystem`, as in `generate`) the stored `_pm` is
    fetched, the snapshot appended to it, and the whole object stored again with one PUT.
    """
    target = resolve(parquet_path, filesystem, storage_options)
    if target is not None:
        fs, path = target
        reader = reader_for(fs)
        size = object_size(fs, path) if parquet_size is None else parquet_size
        f = RangeFile(reader, path, size)
        pm_obj = fs._strip_protocol(pm_path) if pm_path else default_pm_object(path)
        return build_and_put(fs, pm_obj, lambda local: _update(f, f, path, local, base_parquet_size, ops),
                             start_from=cat(reader, pm_obj))
    pm_path = pm_path or default_pm_path(parquet_path)
    with open(parquet_path, "rb") as f:
        return _update(f, parquet_path, os.fspath(parquet_path), pm_path, base_parquet_size, ops)


def _update(f, source, name, pm_path, base_parquet_size, ops) -> int:
    with PmFile(pm_path, parquet_size=base_parquet_size) as old:
        old_rows = old.row_group_count
        old_starts = first_chunk_starts(old.chunks)
        old_sizes = old.chunks["total_compressed"].sum(axis=1) if old.column_count else np.zeros(old_rows)
        old_unused, old_pfl = old.unused_bytes, old.parquet_footer_length
        bloom_cols = [int(c) for c in old.bloom_columns]
        external = bool(old.feature_flags & L.FEATURE_BLOOM_FILTERS_EXTERNAL)
        anchor_size = old.parquet_size
    try:
        footer = read_footer(f)
    except ParquetFormatError as e:
        raise ParquetFormatError(e.args[0] if name in e.args[0] else f"{name}: {e}") from None
    mapping = map_schema(footer)
    desc = describe_footer(footer, mapping)
    R = desc.row_group_count
    if R < old_rows:
        raise PmError(f"{name} has {R} row groups, fewer than the {old_rows} of the _pm snapshot; "
                      "removing row groups needs a rewrite (qdbpm.generate)")
    changed = ~unchanged_row_groups(old_starts, desc.chunks)
    rows = np.nonzero(changed)[0]
    blooms = None
    if bloom_cols:
        blooms = parquet_blooms(f, footer, rows, bloom_cols, external=external)
    if bloom_cols and not external:
        # Columns whose filters qdbpm built itself at generation: build them for the new blocks.
        blooms = built_blooms(source, footer, desc, rows, bloom_cols, blooms, strict=False)
    if not mapping.questdb:
        # The old Parquet footer and every replaced chunk are dead bytes now.
        replaced = old_sizes[: old_rows][changed[:old_rows]].sum() if old_rows else 0
        grew = footer.footer_offset != anchor_size - L.PARQUET_TAIL - old_pfl
        unused = old_unused + (old_pfl + L.PARQUET_TAIL if grew else 0) + int(replaced)
        desc = dataclasses.replace(desc, unused_bytes=unused)
    desc = dataclasses.replace(desc, blooms=blooms)
    return write_update(pm_path, desc, anchor_parquet_size=base_parquet_size, ops=ops)
