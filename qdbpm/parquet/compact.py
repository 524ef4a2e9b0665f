"""Thrift compact protocol in pure Python: a generic codec and the Parquet footers qdbpm writes.

The fast, specialised FileMetaData reader is the Cython kernel `_thrift`; this module is the
full-fidelity side:

* `decode_struct` / `encode_struct` round-trip any compact-protocol struct. Decoding keeps fields in
  wire order, remembers long-form field headers and list headers, and records the byte span of every
  struct (also struct elements of lists), so re-encoding an unmodified canonical footer gives the
  same bytes. Not preserved: non-minimal varints and bools inside collections written as 0 (both are
  normalised; no known Parquet writer produces them).
* Builders for the two footers qdbpm has to write:
  - `append_row_groups` / `append_footer`: an existing footer plus new row groups, the old row groups
    spliced as raw bytes (appending to a 10,000-row-group file costs one memcpy, not a re-encode)
    and the new ones rebased by an offset delta (`rebase_row_group`).
  - `build_file_metadata`: a minimal FileMetaData from `SchemaElement`s and `RowGroupSpec`s /
    `ColumnChunkSpec`s, enough for a Parquet reader to decode the chunks it lists.

Field ids follow parquet.thrift (apache/parquet-format); they live here and in `_thrift.pyx` only.
"""

from __future__ import annotations

import struct as _struct
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ..errors import ParquetFormatError

__all__ = [
    "T",
    "Struct",
    "TList",
    "TMap",
    "decode_struct",
    "encode_struct",
    "SchemaElement",
    "ColumnChunkSpec",
    "RowGroupSpec",
    "logical_type_struct",
    "schema_element_struct",
    "column_chunk_struct",
    "row_group_struct",
    "build_file_metadata",
    "rebase_row_group",
    "append_row_groups",
    "append_footer",
    "frame_footer",
    "MAX_DEPTH",
]

MAX_DEPTH = 64  # nesting cap for both decoders: Parquet footers nest 6 deep at most
MAX_VARINT_BYTES = 10


class T:
    """Compact-protocol type codes (the low nibble of a field header / collection header)."""

    STOP = 0
    BOOL = 1  # BOOLEAN_TRUE; a bool field's value lives in the type nibble (1 true, 2 false)
    BOOL_FALSE = 2
    BYTE = 3
    I16 = 4
    I32 = 5
    I64 = 6
    DOUBLE = 7
    BINARY = 8
    LIST = 9
    SET = 10
    MAP = 11
    STRUCT = 12

    NAMES = {
        1: "bool",
        2: "bool",
        3: "byte",
        4: "i16",
        5: "i32",
        6: "i64",
        7: "double",
        8: "binary",
        9: "list",
        10: "set",
        11: "map",
        12: "struct",
    }


class Struct:
    """A decoded Thrift struct: field id -> (type, value), in wire order.

    Values: bool, int, float, bytes, `TList`, `TMap` or `Struct`. Bool fields are stored with type
    `T.BOOL` whatever nibble carried them. `span` is the (start, end) byte span the struct was
    decoded from (None for built ones); `long_ids` holds ids whose header used the long form where a
    delta would have fitted, so re-encoding reproduces it.
    """

    __slots__ = ("fields", "long_ids", "span")

    def __init__(self, fields: dict | None = None):
        self.fields: dict[int, tuple[int, Any]] = dict(fields or {})
        self.long_ids: set[int] = set()
        self.span: tuple[int, int] | None = None

    def get(self, fid: int, default=None):
        f = self.fields.get(fid)
        return default if f is None else f[1]

    def typed(self, fid: int, ttype: int, default=None, *, elem: int | None = None):
        """The value of field `fid` if it has wire type `ttype` (and, given `elem`, is a list whose
        elements, if any, are of type `elem`), else `default`: Apache Thrift skips a known field id
        that carries another wire type exactly as an unknown one, so a mistyped field is absent."""
        f = self.fields.get(fid)
        if f is None or f[0] != (T.BOOL if ttype == T.BOOL_FALSE else ttype):
            return default
        if elem is not None and f[1].values and f[1].elem_type != elem:
            return default
        return f[1]

    def type_of(self, fid: int) -> int | None:
        f = self.fields.get(fid)
        return None if f is None else f[0]

    def set(self, fid: int, ttype: int, value) -> "Struct":
        """Set a field; a new id is inserted in id order (where a Thrift writer would put it)."""
        if ttype == T.BOOL_FALSE:
            ttype = T.BOOL
        if fid in self.fields or not self.fields or fid > max(self.fields):
            self.fields[fid] = (ttype, value)
        else:
            items = list(self.fields.items())
            at = next(i for i, (k, _) in enumerate(items) if k > fid)
            items.insert(at, (fid, (ttype, value)))
            self.fields = dict(items)
        return self

    def pop(self, fid: int, default=None):
        f = self.fields.pop(fid, None)
        self.long_ids.discard(fid)
        return default if f is None else f[1]

    def __contains__(self, fid: int) -> bool:
        return fid in self.fields

    def __eq__(self, other) -> bool:
        return isinstance(other, Struct) and self.fields == other.fields

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}: {T.NAMES.get(t, t)} {v!r}" for k, (t, v) in self.fields.items())
        return "Struct({" + inner + "})"


class TList:
    """A list or set: element type, values, and (for struct elements) their source byte spans.

    `long_header` records a size < 15 written in the long form, for byte-identical re-encoding.
    """

    __slots__ = ("elem_type", "values", "long_header", "is_set")

    def __init__(self, elem_type: int, values: list | None = None, *, is_set: bool = False):
        self.elem_type = T.BOOL if elem_type == T.BOOL_FALSE else elem_type
        self.values = list(values or [])
        self.long_header = False
        self.is_set = is_set

    @property
    def spans(self) -> list:
        """Byte spans of struct elements as decoded (None for elements that were built)."""
        return [v.span if isinstance(v, Struct) else None for v in self.values]

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, TList)
            and self.elem_type == other.elem_type
            and self.is_set == other.is_set
            and self.values == other.values
        )

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return f"TList({T.NAMES.get(self.elem_type, self.elem_type)}, {self.values!r})"


class TMap:
    __slots__ = ("key_type", "val_type", "items")

    def __init__(self, key_type: int, val_type: int, items: list | None = None):
        self.key_type = T.BOOL if key_type == T.BOOL_FALSE else key_type
        self.val_type = T.BOOL if val_type == T.BOOL_FALSE else val_type
        self.items = list(items or [])

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, TMap)
            and (self.key_type, self.val_type, self.items) == (other.key_type, other.val_type, other.items)
        )

    def __repr__(self) -> str:
        return f"TMap({self.items!r})"


# --- decoding --------------------------------------------------------------------------------


class _Decoder:
    __slots__ = ("buf", "pos", "end", "base")

    def __init__(self, buf, pos: int, base_offset: int | None):
        self.buf = memoryview(buf).cast("B") if not isinstance(buf, bytes) else buf
        self.pos = pos
        self.end = len(self.buf)
        self.base = base_offset

    def fail(self, what: str, at: int | None = None):
        at = self.pos if at is None else at
        where = f"footer byte {at}"
        if self.base is not None and self.base > 0:
            where += f" (file offset {self.base + at})"
        raise ParquetFormatError(f"corrupt Parquet footer: {what} at {where}")

    def byte(self) -> int:
        if self.pos >= self.end:
            self.fail("truncated (need 1 more byte)")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def take(self, n: int) -> bytes:
        if n > self.end - self.pos:
            self.fail(f"truncated: {n} bytes needed, {self.end - self.pos} left")
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def varint(self) -> int:
        start = self.pos
        result = shift = 0
        for _ in range(MAX_VARINT_BYTES):
            b = self.byte()
            result |= (b & 0x7F) << shift
            if b < 0x80:
                if result >> 64:
                    self.fail("varint overflows 64 bits", start)
                return result
            shift += 7
        self.fail("varint longer than 10 bytes", start)

    def zigzag(self, bits: int) -> int:
        start = self.pos
        u = self.varint()
        v = (u >> 1) ^ -(u & 1)
        if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
            self.fail(f"value {v} out of range for i{bits}", start)
        return v

    def coll_header(self) -> tuple[int, int, bool]:
        start = self.pos
        b = self.byte()
        size, etype = b >> 4, b & 0x0F
        long = size == 15
        if long:
            size = self.varint()
        if size and not (1 <= etype <= 12):
            self.fail(f"invalid element type {etype} in collection header", start)
        # Every element takes at least one byte: reject absurd sizes before building anything.
        if size > self.end - self.pos:
            self.fail(f"collection of {size} elements exceeds the {self.end - self.pos} bytes left", start)
        return size, etype, long and size < 15

    def value(self, ttype: int, depth: int, in_coll: bool):
        if ttype in (T.BOOL, T.BOOL_FALSE):
            if in_coll:
                return self.byte() == T.BOOL  # Thrift reads any other byte as false
            return ttype == T.BOOL
        if ttype == T.BYTE:
            b = self.byte()
            return b - 256 if b > 127 else b
        if ttype == T.I16:
            return self.zigzag(16)
        if ttype == T.I32:
            return self.zigzag(32)
        if ttype == T.I64:
            return self.zigzag(64)
        if ttype == T.DOUBLE:
            return _struct.unpack("<d", self.take(8))[0]
        if ttype == T.BINARY:
            start = self.pos
            n = self.varint()
            if n > self.end - self.pos:
                self.fail(f"binary of {n} bytes exceeds the {self.end - self.pos} bytes left", start)
            return self.take(n)
        if depth >= MAX_DEPTH:
            self.fail(f"nesting deeper than {MAX_DEPTH}")
        if ttype in (T.LIST, T.SET):
            size, etype, long = self.coll_header()
            out = TList(etype, is_set=ttype == T.SET)
            out.long_header = long
            out.values = [self.value(etype, depth + 1, True) for _ in range(size)]
            return out
        if ttype == T.MAP:
            start = self.pos
            size = self.varint()
            if size == 0:
                return TMap(0, 0)
            if 2 * size > self.end - self.pos:
                self.fail(f"map of {size} entries exceeds the {self.end - self.pos} bytes left", start)
            kv = self.byte()
            kt, vt = kv >> 4, kv & 0x0F
            if not (1 <= kt <= 12 and 1 <= vt <= 12):
                self.fail(f"invalid map key/value types {kt}/{vt}", self.pos - 1)
            m = TMap(kt, vt)
            for _ in range(size):
                k = self.value(kt, depth + 1, True)
                m.items.append((k, self.value(vt, depth + 1, True)))
            return m
        if ttype == T.STRUCT:
            return self.struct(depth + 1)
        self.fail(f"invalid Thrift compact type {ttype}")

    def struct(self, depth: int) -> Struct:
        s = Struct()
        start = self.pos
        last = 0
        while True:
            hdr = self.pos
            b = self.byte()
            if b == 0:
                break
            ttype, delta = b & 0x0F, b >> 4
            if delta:
                fid = last + delta
            else:
                fid = self.zigzag(16)
                if 0 < fid - last <= 15:
                    s.long_ids.add(fid)
            if not 1 <= ttype <= 12:
                self.fail(f"invalid Thrift compact type {ttype} in field header", hdr)
            value = self.value(ttype, depth, False)
            # Wire order, not id order (Struct.set would sort), so re-encoding gives the same bytes.
            s.fields[fid] = (T.BOOL if ttype == T.BOOL_FALSE else ttype, value)
            last = fid
        s.span = (start, self.pos)
        return s


def decode_struct(buf, pos: int = 0, *, base_offset: int | None = None) -> tuple[Struct, int]:
    """Decode one compact-protocol struct starting at `pos`; returns (struct, end position).

    Raises ParquetFormatError naming the problem and the byte offset (plus the file offset when
    `base_offset`, the buffer's position in the file, is given) on any malformed input.
    """
    d = _Decoder(buf, pos, base_offset)
    return d.struct(0), d.pos


# --- encoding --------------------------------------------------------------------------------


class _Encoder:
    __slots__ = ("out",)

    def __init__(self):
        self.out = bytearray()

    def varint(self, n: int):
        n &= (1 << 64) - 1
        out = self.out
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)

    def zigzag(self, v: int, bits: int):
        if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
            raise ValueError(f"{v} does not fit i{bits}")
        self.varint((v << 1) ^ (v >> (bits - 1)))

    def coll_header(self, size: int, etype: int, long: bool = False):
        if size < 15 and not long:
            self.out.append((size << 4) | etype)
        else:
            self.out.append(0xF0 | etype)
            self.varint(size)

    def value(self, ttype: int, v, in_coll: bool):
        if ttype in (T.BOOL, T.BOOL_FALSE):
            if in_coll:
                self.out.append(T.BOOL if v else T.BOOL_FALSE)
        elif ttype == T.BYTE:
            if not -128 <= v < 128:
                raise ValueError(f"{v} does not fit a byte")
            self.out.append(v & 0xFF)
        elif ttype == T.I16:
            self.zigzag(v, 16)
        elif ttype == T.I32:
            self.zigzag(v, 32)
        elif ttype == T.I64:
            self.zigzag(v, 64)
        elif ttype == T.DOUBLE:
            self.out += _struct.pack("<d", v)
        elif ttype == T.BINARY:
            if isinstance(v, str):
                v = v.encode()
            self.varint(len(v))
            self.out += v
        elif ttype in (T.LIST, T.SET):
            self.coll_header(len(v.values), v.elem_type, v.long_header)
            for item in v.values:
                self.value(v.elem_type, item, True)
        elif ttype == T.MAP:
            self.varint(len(v.items))
            if v.items:
                self.out.append((v.key_type << 4) | v.val_type)
                for k, val in v.items:
                    self.value(v.key_type, k, True)
                    self.value(v.val_type, val, True)
        elif ttype == T.STRUCT:
            self.struct(v)
        else:
            raise ValueError(f"invalid Thrift compact type {ttype}")

    def field_header(self, fid: int, ttype: int, last: int, long: bool = False):
        delta = fid - last
        if 0 < delta <= 15 and not long:
            self.out.append((delta << 4) | ttype)
        else:
            self.out.append(ttype)
            self.zigzag(fid, 16)

    def struct(self, s: Struct):
        last = 0
        for fid, (ttype, v) in s.fields.items():
            if ttype in (T.BOOL, T.BOOL_FALSE):
                ttype = T.BOOL if v else T.BOOL_FALSE
            self.field_header(fid, ttype, last, fid in s.long_ids)
            self.value(ttype, v, False)
            last = fid
        self.out.append(T.STOP)


def encode_struct(s: Struct) -> bytes:
    """Encode a Struct with the compact protocol (fields in the Struct's order)."""
    e = _Encoder()
    e.struct(s)
    return bytes(e.out)


# --- Parquet field ids (parquet.thrift) --------------------------------------------------------

# FileMetaData
FMD_VERSION, FMD_SCHEMA, FMD_NUM_ROWS, FMD_ROW_GROUPS, FMD_KV, FMD_CREATED_BY, FMD_COLUMN_ORDERS = range(1, 8)
# RowGroup
RG_COLUMNS, RG_TOTAL_BYTE_SIZE, RG_NUM_ROWS, RG_SORTING_COLUMNS, RG_FILE_OFFSET = range(1, 6)
RG_TOTAL_COMPRESSED_SIZE, RG_ORDINAL = 6, 7
# ColumnChunk
CC_FILE_PATH, CC_FILE_OFFSET, CC_META_DATA, CC_OFFSET_INDEX_OFFSET = 1, 2, 3, 4
CC_COLUMN_INDEX_OFFSET = 6
# ColumnMetaData
CMD_TYPE, CMD_ENCODINGS, CMD_PATH, CMD_CODEC, CMD_NUM_VALUES = 1, 2, 3, 4, 5
CMD_TOTAL_UNCOMPRESSED, CMD_TOTAL_COMPRESSED, CMD_DATA_PAGE_OFFSET = 6, 7, 9
CMD_INDEX_PAGE_OFFSET, CMD_DICTIONARY_PAGE_OFFSET, CMD_STATISTICS = 10, 11, 12
CMD_BLOOM_FILTER_OFFSET = 14
# Statistics (note: 1/5 are the max, 2/6 the min)
ST_NULL_COUNT, ST_MAX_VALUE, ST_MIN_VALUE = 3, 5, 6

# LogicalType union members that are empty structs, by name -> union field id.
_LOGICAL_EMPTY = {
    "STRING": 1,
    "MAP": 2,
    "LIST": 3,
    "ENUM": 4,
    "DATE": 6,
    "UNKNOWN": 11,
    "JSON": 12,
    "BSON": 13,
    "UUID": 14,
    "FLOAT16": 15,
    "VECTOR": 19,
}
_TIME_UNIT_ID = {"MILLIS": 1, "MICROS": 2, "NANOS": 3}


# --- typed builders ------------------------------------------------------------------------------


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
    if kind in _LOGICAL_EMPTY:
        return u.set(_LOGICAL_EMPTY[kind], T.STRUCT, Struct())
    if kind == "DECIMAL":
        return u.set(5, T.STRUCT, Struct().set(1, T.I32, lt[1]).set(2, T.I32, lt[2]))
    if kind in ("TIME", "TIMESTAMP"):
        unit = Struct().set(_TIME_UNIT_ID[lt[1]], T.STRUCT, Struct())
        body = Struct().set(1, T.BOOL, bool(lt[2])).set(2, T.STRUCT, unit)
        return u.set(7 if kind == "TIME" else 8, T.STRUCT, body)
    if kind == "INTEGER":
        return u.set(10, T.STRUCT, Struct().set(1, T.BYTE, lt[1]).set(2, T.BOOL, bool(lt[2])))
    if kind == "VARIANT":
        body = Struct() if len(lt) < 2 or lt[1] is None else Struct().set(1, T.BYTE, lt[1])
        return u.set(16, T.STRUCT, body)
    if kind in ("GEOMETRY", "GEOGRAPHY"):
        body = Struct()
        if len(lt) > 1 and lt[1] is not None:
            body.set(1, T.BINARY, lt[1].encode())
        if kind == "GEOGRAPHY" and len(lt) > 2 and lt[2] is not None:
            body.set(2, T.I32, lt[2])
        return u.set(17 if kind == "GEOMETRY" else 18, T.STRUCT, body)
    if kind == "OTHER":
        return u.set(lt[1], T.STRUCT, Struct())  # the content of an unknown member is not kept
    raise ValueError(f"unknown logical type {lt!r}")


def schema_element_struct(el: SchemaElement) -> Struct:
    s = Struct()
    if el.type is not None:
        s.set(1, T.I32, el.type)
    if el.type_length is not None:
        s.set(2, T.I32, el.type_length)
    if el.repetition_type is not None:
        s.set(3, T.I32, el.repetition_type)
    s.set(4, T.BINARY, el.name.encode())
    if el.num_children is not None:
        s.set(5, T.I32, el.num_children)
    if el.converted_type is not None:
        s.set(6, T.I32, el.converted_type)
    if el.scale is not None:
        s.set(7, T.I32, el.scale)
    if el.precision is not None:
        s.set(8, T.I32, el.precision)
    if el.field_id is not None:
        s.set(9, T.I32, el.field_id)
    if el.logical_type is not None:
        s.set(10, T.STRUCT, logical_type_struct(el.logical_type))
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
    encodings: Sequence[int] = (0, 3)
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
    md.set(1, T.I32, spec.type)
    md.set(2, T.LIST, TList(T.I32, sorted(set(spec.encodings))))
    md.set(3, T.LIST, TList(T.BINARY, [p.encode() if isinstance(p, str) else p for p in spec.path]))
    md.set(4, T.I32, spec.codec)
    md.set(5, T.I64, spec.num_values)
    md.set(6, T.I64, spec.total_uncompressed_size)
    md.set(7, T.I64, spec.total_compressed_size)
    md.set(9, T.I64, spec.data_page_offset)
    if spec.index_page_offset is not None:
        md.set(10, T.I64, spec.index_page_offset)
    if spec.dictionary_page_offset is not None:
        md.set(11, T.I64, spec.dictionary_page_offset)
    if spec.statistics is not None:
        md.set(12, T.STRUCT, spec.statistics)
    return Struct().set(CC_FILE_OFFSET, T.I64, 0).set(CC_META_DATA, T.STRUCT, md)


def _chunk_start(spec: ColumnChunkSpec) -> int:
    d = spec.dictionary_page_offset
    return d if d is not None else spec.data_page_offset


def row_group_struct(spec: RowGroupSpec) -> Struct:
    cols = [c if isinstance(c, Struct) else column_chunk_struct(c) for c in spec.columns]
    total = spec.total_byte_size
    if total is None:
        total = sum(c.total_uncompressed_size for c in spec.columns if isinstance(c, ColumnChunkSpec))
    rg = Struct()
    rg.set(RG_COLUMNS, T.LIST, TList(T.STRUCT, cols))
    rg.set(RG_TOTAL_BYTE_SIZE, T.I64, total)
    rg.set(RG_NUM_ROWS, T.I64, spec.num_rows)
    if spec.sorting_columns:
        sc = [Struct().set(1, T.I32, i).set(2, T.BOOL, d).set(3, T.BOOL, n) for i, d, n in spec.sorting_columns]
        rg.set(RG_SORTING_COLUMNS, T.LIST, TList(T.STRUCT, sc))
    file_offset = spec.file_offset
    if file_offset is None and spec.columns and isinstance(spec.columns[0], ColumnChunkSpec):
        file_offset = _chunk_start(spec.columns[0])
    if file_offset is not None:
        rg.set(RG_FILE_OFFSET, T.I64, file_offset)
        specs = [c for c in spec.columns if isinstance(c, ColumnChunkSpec)]
        if len(specs) == len(spec.columns):
            rg.set(RG_TOTAL_COMPRESSED_SIZE, T.I64, sum(c.total_compressed_size for c in specs))
    if spec.ordinal is not None:
        rg.set(RG_ORDINAL, T.I16, spec.ordinal)
    return rg


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
    decoded from another footer); `row_groups` RowGroupSpecs or RowGroup Structs. `num_rows`
    defaults to the sum over row groups. `column_orders` are ColumnOrder union ids (1 TYPE_ORDER,
    2 IEEE_754_TOTAL_ORDER, 3 INT96_TIMESTAMP_ORDER), one per leaf.
    """
    rgs = [rg if isinstance(rg, Struct) else row_group_struct(rg) for rg in row_groups]
    if num_rows is None:
        num_rows = sum(rg.typed(RG_NUM_ROWS, T.I64, 0) for rg in rgs)
    meta = Struct()
    meta.set(FMD_VERSION, T.I32, version)
    elements = [el if isinstance(el, Struct) else schema_element_struct(el) for el in schema]
    meta.set(FMD_SCHEMA, T.LIST, TList(T.STRUCT, elements))
    meta.set(FMD_NUM_ROWS, T.I64, num_rows)
    meta.set(FMD_ROW_GROUPS, T.LIST, TList(T.STRUCT, rgs))
    if key_value_metadata:
        kvs = []
        for k, v in key_value_metadata:
            kv = Struct().set(1, T.BINARY, k.encode())
            if v is not None:
                kv.set(2, T.BINARY, v.encode())
            kvs.append(kv)
        meta.set(FMD_KV, T.LIST, TList(T.STRUCT, kvs))
    if created_by is not None:
        meta.set(FMD_CREATED_BY, T.BINARY, created_by.encode())
    if column_orders is not None:
        orders = [Struct().set(o, T.STRUCT, Struct()) for o in column_orders]
        meta.set(FMD_COLUMN_ORDERS, T.LIST, TList(T.STRUCT, orders))
    return encode_struct(meta)


def frame_footer(meta: bytes) -> bytes:
    """FileMetaData bytes + u32 length + PAR1: what ends a Parquet file."""
    return bytes(meta) + len(meta).to_bytes(4, "little") + b"PAR1"


# --- appending row groups ------------------------------------------------------------------------


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
    d = _Decoder(buf, pos, None)
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
        fields = _top_fields(buf)
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
    old_rows = _Decoder(buf, by_id[FMD_NUM_ROWS][2], None).value(T.I64, 0, False)

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

    e = _Encoder()
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
    fields = _top_fields(buf) if old_fields is None else old_fields
    new, _ = decode_struct(new_meta)
    old_schema = None
    for fid, ttype, start, _stop in fields:
        if fid == FMD_SCHEMA and ttype == T.LIST:
            lst = _Decoder(buf, start, None).value(T.LIST, 1, False)
            if lst.elem_type == T.STRUCT or not lst.values:
                old_schema = lst
    if old_schema != new.typed(FMD_SCHEMA, T.LIST, elem=T.STRUCT):
        raise ValueError("cannot append: the new row groups have a different schema")
    rgs = new.typed(FMD_ROW_GROUPS, T.LIST, elem=T.STRUCT)
    return append_row_groups(buf, rgs.values if rgs is not None else [], offset_delta=offset_delta, fields=fields)


def _top_fields(buf) -> list:
    from . import _thrift  # the kernel walks 10,000 old row groups without a Python object each

    return _thrift.scan_struct(buf, 0)[0]
