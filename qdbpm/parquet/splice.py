"""Appending row groups to an existing footer without re-encoding the old ones.

`append_row_groups` / `append_footer`: an existing FileMetaData plus new row groups, the old row
groups spliced as raw bytes (appending to a 10,000-row-group file costs one memcpy, not a
re-encode) and the new ones rebased by an offset delta (`rebase_row_group`).
"""

from __future__ import annotations

from typing import Sequence

from ..errors import ParquetFormatError
from .compact import (
    CC_COLUMN_INDEX_OFFSET, CC_FILE_OFFSET, CC_META_DATA, CC_OFFSET_INDEX_OFFSET, CMD_BLOOM_FILTER_OFFSET,
    CMD_DATA_PAGE_OFFSET, CMD_DICTIONARY_PAGE_OFFSET, CMD_INDEX_PAGE_OFFSET, FMD_NUM_ROWS, FMD_ROW_GROUPS,
    FMD_SCHEMA, RG_COLUMNS, RG_FILE_OFFSET, RG_NUM_ROWS, RG_ORDINAL, Decoder, Encoder, Struct, T, decode_struct,
    decode_value, encode_struct, top_fields,
)

__all__ = ["rebase_row_group", "append_row_groups", "append_footer"]



def _shift(s: Struct, fid: int, delta: int):
    v = s.typed(fid, T.I64)  # every offset is an i64; one of another wire type is absent
    # 0 means "not written" for every offset (real offsets are >= 4, after the leading PAR1).
    if v is not None and v > 0:
        s.fields[fid] = (T.I64, v + delta)


def rebase_row_group(rg: Struct, delta: int) -> Struct:
    """Add `delta` to every file offset in a RowGroup Struct (in place; returns it).

    Rebased: RowGroup.file_offset; ColumnChunk.file_offset, offset_index_offset,
    column_index_offset; ColumnMetaData data/index/dictionary page offsets and bloom_filter_offset.
    Offsets that are 0 (unset by convention) stay 0, and so do fields of another wire type than
    parquet.thrift's (absent to a Thrift reader).
    """
    _shift(rg, RG_FILE_OFFSET, delta)
    cols = rg.typed(RG_COLUMNS, T.LIST, elem=T.STRUCT)
    for cc in cols.values if cols is not None else ():
        for fid in (CC_FILE_OFFSET, CC_OFFSET_INDEX_OFFSET, CC_COLUMN_INDEX_OFFSET):
            _shift(cc, fid, delta)
        md = cc.typed(CC_META_DATA, T.STRUCT)
        if md is not None:
            for fid in (CMD_DATA_PAGE_OFFSET, CMD_INDEX_PAGE_OFFSET, CMD_DICTIONARY_PAGE_OFFSET,
                        CMD_BLOOM_FILTER_OFFSET):
                _shift(md, fid, delta)
    return rg


def _read_list_header(buf, pos: int) -> tuple[int, int, int]:
    """(element type, size, position of the first element) of the list header at `pos`."""
    d = Decoder(buf, pos, None)
    size, etype, _ = d.coll_header()
    return etype, size, d.pos


def append_row_groups(
    meta: bytes,
    new_row_groups: Sequence[Struct | bytes],
    *,
    offset_delta: int = 0,
    renumber_ordinals: bool = True,
    fields: Sequence[tuple[int, int, int, int]] | None = None,
) -> bytes:
    """Re-emit the FileMetaData `meta` with `new_row_groups` appended after its row groups.

    Every top-level field except num_rows and row_groups is copied as raw bytes and the old row
    group elements are one raw slice, never decoded. New row groups are Structs (rebased by
    `offset_delta` through `rebase_row_group`, on a copy) or already-encoded RowGroup bytes (taken
    as they are). num_rows becomes old + the new row groups' rows. With `renumber_ordinals`, a new
    row group that carries an ordinal gets its index in the combined file (dropped past i16).
    Bytes after the struct inside `meta` (none in an unencrypted footer) are dropped.

    `fields`: the top-level (field id, type, value start, value end) of `meta` when already known
    (ParquetFooter.fields); otherwise the kernel walks the struct once to find them.
    """
    buf = memoryview(meta).cast("B")  # slices below are views: the old row groups are copied once
    if fields is None:
        fields = top_fields(buf)
    # Only fields of parquet.thrift's wire types count (a Thrift reader skips the others, which
    # are then copied as they are): num_rows an i64, row_groups a list of structs.
    by_id = {}
    for f in fields:
        if f[0] == FMD_NUM_ROWS and f[1] == T.I64:
            by_id[f[0]] = f
        elif f[0] == FMD_ROW_GROUPS and f[1] == T.LIST:
            etype, count, elems = _read_list_header(buf, f[2])
            if etype == T.STRUCT or not count:
                by_id[f[0]] = f
                old_count, rg_elems = count, elems
    if FMD_ROW_GROUPS not in by_id or FMD_NUM_ROWS not in by_id:
        raise ParquetFormatError("corrupt Parquet footer: FileMetaData has no row_groups or num_rows "
                                 "(a field of another Thrift type does not count)")
    rg_end = by_id[FMD_ROW_GROUPS][3]
    old_rows = decode_value(buf, T.I64, by_id[FMD_NUM_ROWS][2])[0]

    encoded, new_rows = [], 0
    for i, rg in enumerate(new_row_groups):
        if isinstance(rg, (bytes, bytearray, memoryview)):
            s, _ = decode_struct(rg)
            encoded.append(bytes(rg))
        else:
            s, _ = decode_struct(encode_struct(rg))  # a private copy to rebase
            rebase_row_group(s, offset_delta)
            if renumber_ordinals and s.typed(RG_ORDINAL, T.I16) is not None:
                ordinal = old_count + i
                if ordinal < 1 << 15:
                    s.set(RG_ORDINAL, T.I16, ordinal)
                else:
                    s.pop(RG_ORDINAL)
            encoded.append(encode_struct(s))
        new_rows += s.typed(RG_NUM_ROWS, T.I64, 0)

    e = Encoder()
    last = 0
    for f in fields:
        fid, ttype, start, stop = f
        # A bool's value is its type nibble: kept as read, like every other field but these two.
        e.field_header(fid, ttype, last)
        last = fid
        if f == by_id[FMD_NUM_ROWS]:
            e.zigzag(old_rows + new_rows, 64)
        elif f == by_id[FMD_ROW_GROUPS]:
            e.coll_header(old_count + len(encoded), T.STRUCT)
            e.out += buf[rg_elems:rg_end]
            for rg in encoded:
                e.out += rg
        else:
            e.out += buf[start:stop]
    e.out.append(T.STOP)
    return bytes(e.out)


def append_footer(old_meta: bytes, new_meta: bytes, *, offset_delta: int,
                  old_fields: Sequence[tuple[int, int, int, int]] | None = None) -> bytes:
    """`old_meta` with the row groups of `new_meta` (another footer with the same schema, e.g. a
    table written to bytes by pyarrow) appended, rebased by `offset_delta` (the position in the
    combined file of the new file's byte 0). `old_fields`: see `append_row_groups`."""
    buf = memoryview(old_meta).cast("B")
    fields = top_fields(buf) if old_fields is None else old_fields
    new, _ = decode_struct(new_meta)
    old_schema = None
    for fid, ttype, start, _stop in fields:
        if fid == FMD_SCHEMA and ttype == T.LIST:
            lst = decode_value(buf, T.LIST, start)[0]
            if lst.elem_type == T.STRUCT or not lst.values:
                old_schema = lst
    if old_schema != new.typed(FMD_SCHEMA, T.LIST, elem=T.STRUCT):
        raise ValueError("cannot append: the new row groups have a different schema")
    rgs = new.typed(FMD_ROW_GROUPS, T.LIST, elem=T.STRUCT)
    return append_row_groups(buf, rgs.values if rgs is not None else [], offset_delta=offset_delta, fields=fields)

