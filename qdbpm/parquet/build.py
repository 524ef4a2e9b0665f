"""Building Parquet footers and files: a minimal FileMetaData from typed specs, and what wraps it.

* `build_file_metadata`: a FileMetaData from `SchemaElement`s and `RowGroupSpec`s /
  `ColumnChunkSpec`s (or Structs copied verbatim), enough for a Parquet reader to decode the chunks
  it lists.
* `frame_footer` ends a file with it; `parquet_file` is a whole file (magic, chunks, footer), and
  `arrow_schema` the Arrow schema pyarrow reads from a FileMetaData alone.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from . import constants as C
from .compact import Encoded, Struct, T, TList, encode_struct, encode_value

__all__ = [
    "SchemaElement",
    "ColumnChunkSpec",
    "RowGroupSpec",
    "logical_type_struct",
    "schema_element_struct",
    "column_chunk_struct",
    "row_group_struct",
    "build_file_metadata",
    "frame_footer",
    "parquet_file",
    "arrow_schema",
]


@dataclass(frozen=True)
class SchemaElement:
    """One Parquet SchemaElement (flat, depth-first order; the root is element 0).

    `type` is the physical type (None for groups); `repetition_type` 0 required, 1 optional,
    2 repeated (None for the root). `logical_type` is a tuple, e.g. ("TIMESTAMP", "MICROS", True),
    ("DECIMAL", scale, precision), ("INTEGER", bit_width, signed), ("TIME", unit, utc), ("STRING",),
    ("VARIANT", spec_version), ("GEOMETRY", crs), ("GEOGRAPHY", crs, algorithm), or
    ("OTHER", union_field_id) for a member this code does not know.
    """

    name: str
    type: int | None = None
    type_length: int | None = None
    repetition_type: int | None = None
    num_children: int | None = None
    converted_type: int | None = None
    scale: int | None = None
    precision: int | None = None
    field_id: int | None = None
    logical_type: tuple | None = None


def logical_type_struct(lt: tuple) -> Struct:
    """The LogicalType union (a Struct with one field) for a `SchemaElement.logical_type` tuple."""
    kind = lt[0]
    u = Struct()
    if kind in C.LOGICAL_EMPTY:
        return u.set(C.LOGICAL_TYPE_IDS[kind], T.STRUCT, Struct())
    if kind == "DECIMAL":
        body = Struct().set(C.DECIMAL_SCALE, T.I32, lt[1]).set(C.DECIMAL_PRECISION, T.I32, lt[2])
    elif kind in ("TIME", "TIMESTAMP"):
        unit = Struct().set(C.TIME_UNIT_IDS[lt[1]], T.STRUCT, Struct())
        body = Struct().set(C.TIME_IS_UTC, T.BOOL, bool(lt[2])).set(C.TIME_UNIT, T.STRUCT, unit)
    elif kind == "INTEGER":
        body = Struct().set(C.INT_BIT_WIDTH, T.BYTE, lt[1]).set(C.INT_IS_SIGNED, T.BOOL, bool(lt[2]))
    elif kind == "VARIANT":
        body = Struct() if len(lt) < 2 or lt[1] is None else Struct().set(C.VARIANT_SPEC_VERSION, T.BYTE, lt[1])
    elif kind in ("GEOMETRY", "GEOGRAPHY"):
        body = Struct()
        if len(lt) > 1 and lt[1] is not None:
            body.set(C.GEO_CRS, T.BINARY, lt[1].encode())
        if kind == "GEOGRAPHY" and len(lt) > 2 and lt[2] is not None:
            body.set(C.GEOGRAPHY_ALGORITHM, T.I32, lt[2])
    elif kind == "OTHER":
        return u.set(lt[1], T.STRUCT, Struct())  # the content of an unknown member is not kept
    else:
        raise ValueError(f"unknown logical type {lt!r}")
    return u.set(C.LOGICAL_TYPE_IDS[kind], T.STRUCT, body)


def schema_element_struct(el: SchemaElement) -> Struct:
    s = Struct()
    for fid, v in ((C.SE_TYPE, el.type), (C.SE_TYPE_LENGTH, el.type_length),
                   (C.SE_REPETITION_TYPE, el.repetition_type)):
        if v is not None:
            s.set(fid, T.I32, v)
    s.set(C.SE_NAME, T.BINARY, el.name.encode())
    for fid, v in ((C.SE_NUM_CHILDREN, el.num_children), (C.SE_CONVERTED_TYPE, el.converted_type),
                   (C.SE_SCALE, el.scale), (C.SE_PRECISION, el.precision), (C.SE_FIELD_ID, el.field_id)):
        if v is not None:
            s.set(fid, T.I32, v)
    if el.logical_type is not None:
        s.set(C.SE_LOGICAL_TYPE, T.STRUCT, logical_type_struct(el.logical_type))
    return s


@dataclass
class ColumnChunkSpec:
    """What a reader needs to find and decode one column chunk (ColumnChunk + ColumnMetaData).

    Offsets are absolute positions in the file the footer will describe. `encodings` are Parquet
    Encoding enum values; `statistics` is an optional ready-made Statistics Struct (copied as is).
    """

    type: int
    path: Sequence[str]
    codec: int
    num_values: int
    total_uncompressed_size: int
    total_compressed_size: int
    data_page_offset: int
    dictionary_page_offset: int | None = None
    encodings: Sequence[int] = (C.ENCODING_PLAIN, C.ENCODING_RLE)
    index_page_offset: int | None = None
    statistics: Struct | None = None


@dataclass
class RowGroupSpec:
    """One row group: its column chunks in schema leaf order. `total_byte_size` defaults to the
    sum of the chunks' uncompressed sizes, `file_offset` to the first chunk's start."""

    columns: list
    num_rows: int
    total_byte_size: int | None = None
    file_offset: int | None = None
    ordinal: int | None = None
    sorting_columns: Sequence[tuple[int, bool, bool]] = field(default_factory=tuple)


def column_chunk_struct(spec: ColumnChunkSpec) -> Struct:
    md = Struct()
    md.set(C.CMD_TYPE, T.I32, spec.type)
    md.set(C.CMD_ENCODINGS, T.LIST, TList(T.I32, sorted(set(spec.encodings))))
    md.set(C.CMD_PATH, T.LIST, TList(T.BINARY, [p.encode() if isinstance(p, str) else p for p in spec.path]))
    md.set(C.CMD_CODEC, T.I32, spec.codec)
    md.set(C.CMD_NUM_VALUES, T.I64, spec.num_values)
    md.set(C.CMD_TOTAL_UNCOMPRESSED, T.I64, spec.total_uncompressed_size)
    md.set(C.CMD_TOTAL_COMPRESSED, T.I64, spec.total_compressed_size)
    md.set(C.CMD_DATA_PAGE_OFFSET, T.I64, spec.data_page_offset)
    if spec.index_page_offset is not None:
        md.set(C.CMD_INDEX_PAGE_OFFSET, T.I64, spec.index_page_offset)
    if spec.dictionary_page_offset is not None:
        md.set(C.CMD_DICTIONARY_PAGE_OFFSET, T.I64, spec.dictionary_page_offset)
    if spec.statistics is not None:
        md.set(C.CMD_STATISTICS, T.STRUCT, spec.statistics)
    return Struct().set(C.CC_FILE_OFFSET, T.I64, 0).set(C.CC_META_DATA, T.STRUCT, md)


def _chunk_start(spec: ColumnChunkSpec) -> int:
    d = spec.dictionary_page_offset
    return d if d is not None else spec.data_page_offset


def row_group_struct(spec: RowGroupSpec) -> Struct:
    cols = [c if isinstance(c, Struct) else column_chunk_struct(c) for c in spec.columns]
    total = spec.total_byte_size
    if total is None:
        total = sum(c.total_uncompressed_size for c in spec.columns if isinstance(c, ColumnChunkSpec))
    rg = Struct()
    rg.set(C.RG_COLUMNS, T.LIST, TList(T.STRUCT, cols))
    rg.set(C.RG_TOTAL_BYTE_SIZE, T.I64, total)
    rg.set(C.RG_NUM_ROWS, T.I64, spec.num_rows)
    if spec.sorting_columns:
        sc = [Struct().set(C.SC_COLUMN_IDX, T.I32, i).set(C.SC_DESCENDING, T.BOOL, d).set(C.SC_NULLS_FIRST, T.BOOL, n)
              for i, d, n in spec.sorting_columns]
        rg.set(C.RG_SORTING_COLUMNS, T.LIST, TList(T.STRUCT, sc))
    file_offset = spec.file_offset
    if file_offset is None and spec.columns and isinstance(spec.columns[0], ColumnChunkSpec):
        file_offset = _chunk_start(spec.columns[0])
    if file_offset is not None:
        rg.set(C.RG_FILE_OFFSET, T.I64, file_offset)
        specs = [c for c in spec.columns if isinstance(c, ColumnChunkSpec)]
        if len(specs) == len(spec.columns):
            rg.set(C.RG_TOTAL_COMPRESSED_SIZE, T.I64, sum(c.total_compressed_size for c in specs))
    if spec.ordinal is not None:
        rg.set(C.RG_ORDINAL, T.I16, spec.ordinal)
    return rg


def _varint(out: bytearray, n: int):
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


class _General(Exception):
    """A value the byte-level encoder leaves to the general path (which range-checks it)."""


def _zigzag(out: bytearray, v: int, bits: int = 64):
    if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        raise _General
    _varint(out, ((v << 1) ^ (v >> 63)) & ((1 << 64) - 1))


def _list_header(out: bytearray, size: int, etype: int):
    if size < 15:
        out.append((size << 4) | etype)
    else:
        out.append(0xF0 | etype)
        _varint(out, size)


_I32, _I64, _LIST, _STRUCT = T.I32, T.I64, T.LIST, T.STRUCT
# Field headers in short form: delta << 4 | type (fields written in ascending id order).
_CC_HEAD = bytes([(C.CC_FILE_OFFSET << 4) | _I64, 0, ((C.CC_META_DATA - C.CC_FILE_OFFSET) << 4) | _STRUCT])


@functools.lru_cache(maxsize=4096)
def _meta_prefix(ptype: int, encodings: tuple, path: tuple) -> bytes:
    """ColumnMetaData fields 1-3 (type, encodings, path): the same for a column in every footer."""
    out = bytearray([(C.CMD_TYPE << 4) | _I32])
    _zigzag(out, ptype, 32)
    out.append(((C.CMD_ENCODINGS - C.CMD_TYPE) << 4) | _LIST)
    encodings = sorted(set(encodings))
    _list_header(out, len(encodings), _I32)
    for e in encodings:
        _zigzag(out, e, 32)
    out.append(((C.CMD_PATH - C.CMD_ENCODINGS) << 4) | _LIST)
    _list_header(out, len(path), T.BINARY)
    for p in path:
        p = p.encode() if isinstance(p, str) else bytes(p)
        _varint(out, len(p))
        out += p
    return bytes(out)


def encode_row_groups(row_groups: Sequence[RowGroupSpec]) -> Encoded | None:
    """The FileMetaData.row_groups list value, written byte by byte: the same bytes as encoding
    `row_group_struct` of each (tests/parquet/test_build_fast.py holds it to that), ~10x cheaper
    (a decoded scan unit synthesises one footer). None when a spec needs the general path
    (statistics, an index page, sorting columns, an ordinal, a row group given as a Struct, a
    value outside its Thrift type's range)."""
    try:
        return _encode_row_groups(row_groups)
    except _General:
        return None


def _encode_row_groups(row_groups: Sequence[RowGroupSpec]) -> Encoded | None:
    out = bytearray()
    _list_header(out, len(row_groups), _STRUCT)
    for rg in row_groups:
        if not isinstance(rg, RowGroupSpec) or rg.sorting_columns or rg.ordinal is not None:
            return None
        cols = rg.columns
        out.append((C.RG_COLUMNS << 4) | _LIST)
        _list_header(out, len(cols), _STRUCT)
        total_u = total_c = 0
        for c in cols:
            if not isinstance(c, ColumnChunkSpec) or c.statistics is not None or c.index_page_offset is not None:
                return None
            out += _CC_HEAD
            out += _meta_prefix(c.type, tuple(c.encodings), tuple(c.path))
            out.append(((C.CMD_CODEC - C.CMD_PATH) << 4) | _I32)
            _zigzag(out, c.codec, 32)
            out.append(((C.CMD_NUM_VALUES - C.CMD_CODEC) << 4) | _I64)
            _zigzag(out, c.num_values)
            out.append(((C.CMD_TOTAL_UNCOMPRESSED - C.CMD_NUM_VALUES) << 4) | _I64)
            _zigzag(out, c.total_uncompressed_size)
            out.append(((C.CMD_TOTAL_COMPRESSED - C.CMD_TOTAL_UNCOMPRESSED) << 4) | _I64)
            _zigzag(out, c.total_compressed_size)
            out.append(((C.CMD_DATA_PAGE_OFFSET - C.CMD_TOTAL_COMPRESSED) << 4) | _I64)
            _zigzag(out, c.data_page_offset)
            if c.dictionary_page_offset is not None:
                out.append(((C.CMD_DICTIONARY_PAGE_OFFSET - C.CMD_DATA_PAGE_OFFSET) << 4) | _I64)
                _zigzag(out, c.dictionary_page_offset)
            out += b"\0\0"  # STOP of ColumnMetaData, then of ColumnChunk
            total_u += c.total_uncompressed_size
            total_c += c.total_compressed_size
        out.append(((C.RG_TOTAL_BYTE_SIZE - C.RG_COLUMNS) << 4) | _I64)
        _zigzag(out, total_u if rg.total_byte_size is None else rg.total_byte_size)
        out.append(((C.RG_NUM_ROWS - C.RG_TOTAL_BYTE_SIZE) << 4) | _I64)
        _zigzag(out, rg.num_rows)
        last = C.RG_NUM_ROWS
        file_offset = rg.file_offset if rg.file_offset is not None else (_chunk_start(cols[0]) if cols else None)
        if file_offset is not None:
            out.append(((C.RG_FILE_OFFSET - last) << 4) | _I64)
            _zigzag(out, file_offset)
            out.append(((C.RG_TOTAL_COMPRESSED_SIZE - C.RG_FILE_OFFSET) << 4) | _I64)
            _zigzag(out, total_c)
        out.append(0)
    return Encoded(out)


def encoded_list(ttype: int, values: list) -> Encoded:
    """A list value encoded once (a footer's schema or key-values that many footers share)."""
    return Encoded(encode_value(T.LIST, TList(ttype, values)))


def build_file_metadata(
    schema: Sequence[SchemaElement | Struct],
    row_groups: Sequence[RowGroupSpec | Struct],
    *,
    num_rows: int | None = None,
    version: int = 1,
    created_by: str | None = "qdbpm",
    key_value_metadata: Iterable[tuple[str, str | None]] | None = None,
    column_orders: Sequence[int] | None = None,
) -> bytes:
    """A FileMetaData (Thrift bytes, without the length / PAR1 tail; see `frame_footer`).

    `schema` is the flat depth-first element list (SchemaElement, or Structs copied verbatim, e.g.
    decoded from another footer), or that list already encoded (`encoded_list`); `row_groups`
    RowGroupSpecs or RowGroup Structs; `key_value_metadata` pairs or an encoded list. `num_rows`
    defaults to the sum over row groups. `column_orders` are ColumnOrder union ids (1 TYPE_ORDER,
    2 IEEE_754_TOTAL_ORDER, 3 INT96_TIMESTAMP_ORDER), one per leaf.
    """
    rgs = encode_row_groups(row_groups)
    if rgs is None:
        structs = [rg if isinstance(rg, Struct) else row_group_struct(rg) for rg in row_groups]
        if num_rows is None:
            num_rows = sum(rg.typed(C.RG_NUM_ROWS, T.I64, 0) for rg in structs)
        rgs = TList(T.STRUCT, structs)
    elif num_rows is None:
        num_rows = sum(rg.num_rows for rg in row_groups)
    meta = Struct()
    meta.set(C.FMD_VERSION, T.I32, version)
    if not isinstance(schema, Encoded):
        schema = TList(T.STRUCT, [el if isinstance(el, Struct) else schema_element_struct(el) for el in schema])
    meta.set(C.FMD_SCHEMA, T.LIST, schema)
    meta.set(C.FMD_NUM_ROWS, T.I64, num_rows)
    meta.set(C.FMD_ROW_GROUPS, T.LIST, rgs)
    if isinstance(key_value_metadata, Encoded):
        meta.set(C.FMD_KV, T.LIST, key_value_metadata)
    elif key_value_metadata:
        kvs = []
        for k, v in key_value_metadata:
            kv = Struct().set(C.KV_KEY, T.BINARY, k.encode())
            if v is not None:
                kv.set(C.KV_VALUE, T.BINARY, v.encode())
            kvs.append(kv)
        meta.set(C.FMD_KV, T.LIST, TList(T.STRUCT, kvs))
    if created_by is not None:
        meta.set(C.FMD_CREATED_BY, T.BINARY, created_by.encode())
    if column_orders is not None:
        orders = [Struct().set(o, T.STRUCT, Struct()) for o in column_orders]
        meta.set(C.FMD_COLUMN_ORDERS, T.LIST, TList(T.STRUCT, orders))
    return encode_struct(meta)


def frame_footer(meta: bytes) -> bytes:
    """FileMetaData bytes + u32 length + PAR1: what ends a Parquet file."""
    return bytes(meta) + len(meta).to_bytes(4, "little") + C.MAGIC


def parquet_file(meta: bytes, chunks: Iterable[bytes] = ()) -> bytes:
    """A whole Parquet file: PAR1, the `chunks` back to back from byte len(MAGIC) (where `meta`,
    a FileMetaData, must place them), then the framed footer."""
    return b"".join([C.MAGIC, *chunks, frame_footer(meta)])


def arrow_schema(meta: bytes) -> pa.Schema:
    """The Arrow schema pyarrow reads from the FileMetaData `meta` alone (no data needed: its row
    groups are not read). pyarrow's errors (ArrowException, OSError) propagate."""
    return pq.read_schema(pa.BufferReader(pa.py_buffer(parquet_file(meta))))
