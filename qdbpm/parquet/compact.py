"""Thrift compact protocol in pure Python: the one generic codec (decoder, encoder, caps).

The fast, specialised FileMetaData reader is the Cython kernel `_thrift`; this module is the
full-fidelity side. `decode_struct` / `encode_struct` round-trip any compact-protocol struct.
Decoding keeps fields in wire order, remembers long-form field headers and list headers, and
records the byte span of every struct (also struct elements of lists), so re-encoding an unmodified
canonical footer gives the same bytes. Not preserved: non-minimal varints and bools inside
collections written as 0 (both are normalised; no known Parquet writer produces them).

Every read is bounded: varints stop at 10 bytes, nesting at MAX_DEPTH, and no collection or binary
may claim more than the bytes left. A known field id carrying another wire type than parquet.thrift
declares is kept as decoded; `Struct.typed` reads it as absent (Apache Thrift's skip rule).
`Decoder` is subclassed for other messages / caps (the bloom filter header reader).

Wire types (`T`), parquet.thrift field ids and enums are defined in `constants` and re-exported
here. Building footers: `build`; appending row groups to one: `splice`.
"""

from __future__ import annotations

import struct as _struct
from typing import Any

from . import _thrift
from ..errors import ParquetFormatError
from .constants import *  # noqa: F401,F403  (re-exported: `compact.T`, `compact.FMD_SCHEMA`, ...)
from .constants import __all__ as _constants_all
from .constants import T

__all__ = [
    "Struct",
    "TList",
    "TMap",
    "Decoder",
    "Encoder",
    "decode_struct",
    "encode_struct",
    "decode_value",
    "encode_value",
    "top_fields",
    "MAX_DEPTH",
    "MAX_VARINT_BYTES",
    *_constants_all,
]

MAX_DEPTH = 64  # nesting cap for both decoders: Parquet footers nest 6 deep at most
MAX_VARINT_BYTES = 10


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


class Decoder:
    """A bounded compact-protocol reader over `buf` from `pos`.

    Subclass hooks: `fail` (how an error is raised), `short` (the input ends before a value does;
    by default a failure like any other), `fail_depth`, and the caps `max_depth` and `max_type`
    (the highest type code accepted; T.UUID lets a reader skip newer Thrift's uuid values).
    """

    __slots__ = ("buf", "pos", "end", "base")
    max_depth = MAX_DEPTH
    max_type = T.STRUCT

    def __init__(self, buf, pos: int = 0, base_offset: int | None = None):
        if not isinstance(buf, bytes) and not (isinstance(buf, memoryview) and buf.format == "B" and buf.ndim == 1):
            buf = memoryview(buf).cast("B")
        self.buf = buf  # a caller's byte view is used as is: releasing it frees the buffer
        self.pos = pos
        self.end = len(self.buf)
        self.base = base_offset

    def fail(self, what: str, at: int | None = None):
        at = self.pos if at is None else at
        where = f"footer byte {at}"
        if self.base is not None and self.base > 0:
            where += f" (file offset {self.base + at})"
        raise ParquetFormatError(f"corrupt Parquet footer: {what} at {where}")

    def short(self, what: str, at: int | None = None):
        self.fail(what, at)

    def fail_depth(self):
        self.fail(f"nesting deeper than {self.max_depth}")

    def byte(self) -> int:
        if self.pos >= self.end:
            self.short("truncated (need 1 more byte)")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def take(self, n: int) -> bytes:
        if n > self.end - self.pos:
            self.short(f"truncated: {n} bytes needed, {self.end - self.pos} left")
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
            self.fail(f"varint value {v} out of range for i{bits}", start)
        return v

    def coll_header(self) -> tuple[int, int, bool]:
        """(size, element type, whether a size < 15 used the long form) of a list / set header."""
        start = self.pos
        b = self.byte()
        size, etype = b >> 4, b & 0x0F
        long = size == 15
        if long:
            size = self.varint()
        if size and not (1 <= etype <= self.max_type):
            self.fail(f"invalid element type {etype} in collection header", start)
        # Every element takes at least one byte: reject absurd sizes before building anything.
        if size > self.end - self.pos:
            self.short(f"collection of {size} elements exceeds the {self.end - self.pos} bytes left", start)
        return size, etype, long and size < 15

    def value(self, ttype: int, depth: int, in_coll: bool):
        """The value of type `ttype` at the cursor; `depth` counts the containers around it."""
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
                self.short(f"binary of {n} bytes exceeds the {self.end - self.pos} bytes left", start)
            return self.take(n)
        if ttype == T.UUID:  # reached only when max_type admits it
            return self.take(16)
        if depth >= self.max_depth:
            self.fail_depth()
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
                self.short(f"map of {size} entries exceeds the {self.end - self.pos} bytes left", start)
            kv = self.byte()
            kt, vt = kv >> 4, kv & 0x0F
            if not (1 <= kt <= self.max_type and 1 <= vt <= self.max_type):
                self.fail(f"invalid map key/value types {kt}/{vt}", self.pos - 1)
            m = TMap(kt, vt)
            for _ in range(size):
                k = self.value(kt, depth + 1, True)
                m.items.append((k, self.value(vt, depth + 1, True)))
            return m
        if ttype == T.STRUCT:
            return self.struct(depth + 1)
        self.fail(f"invalid Thrift compact type {ttype}")

    def struct(self, depth: int = 0) -> Struct:
        s = Struct()
        fields = s.fields
        start = self.pos
        last = 0
        buf, end, max_type = self.buf, self.end, self.max_type
        while True:
            hdr = self.pos
            if hdr >= end:
                self.byte()  # raises: truncated
            b = buf[hdr]
            self.pos = hdr + 1
            if b == 0:
                break
            ttype, delta = b & 0x0F, b >> 4
            if delta:
                fid = last + delta
            else:
                fid = self.zigzag(16)
                if 0 < fid - last <= 15:
                    s.long_ids.add(fid)
            if not 1 <= ttype <= max_type:
                self.fail(f"invalid Thrift compact type {ttype} in field header", hdr)
            if ttype == T.STRUCT:  # the common nested case, without value()'s type chain
                if depth >= self.max_depth:
                    self.fail_depth()
                value = self.struct(depth + 1)
            else:
                value = self.value(ttype, depth, False)
            # Wire order, not id order (Struct.set would sort), so re-encoding gives the same bytes.
            fields[fid] = (T.BOOL if ttype == T.BOOL_FALSE else ttype, value)
            last = fid
        s.span = (start, self.pos)
        return s


def decode_struct(buf, pos: int = 0, *, base_offset: int | None = None) -> tuple[Struct, int]:
    """Decode one compact-protocol struct starting at `pos`; returns (struct, end position).

    Raises ParquetFormatError naming the problem and the byte offset (plus the file offset when
    `base_offset`, the buffer's position in the file, is given) on any malformed input.
    """
    d = Decoder(buf, pos, base_offset)
    return d.struct(0), d.pos


def decode_value(buf, ttype: int, pos: int = 0) -> tuple[Any, int]:
    """Decode one value of wire type `ttype` (as a field of a top-level struct holds it) at `pos`;
    returns (value, end position). E.g. one FileMetaData field located by `top_fields`."""
    d = Decoder(buf, pos, None)
    return d.value(ttype, 0, False), d.pos


def top_fields(buf, pos: int = 0) -> list:
    """(field id, wire type, value start, value end) of each field of the struct at `pos`, found
    by the kernel: it walks 10,000 row groups without a Python object each."""
    return _thrift.scan_struct(buf, pos)[0]


# --- encoding --------------------------------------------------------------------------------


class Encoded(bytes):
    """A value already in compact bytes, exactly as `Encoder.value` would write it: a Struct field
    holding one is written verbatim (what does not change between footers, encoded once)."""

    __slots__ = ()


class Encoder:
    """Compact-protocol writer into `out` (a bytearray)."""

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
        if isinstance(v, Encoded):
            self.out += v
        elif ttype in (T.BOOL, T.BOOL_FALSE):
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
        elif ttype == T.UUID:
            self.out += bytes(v)
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
    e = Encoder()
    e.struct(s)
    return bytes(e.out)


def encode_value(ttype: int, v) -> bytes:
    """Encode one value of wire type `ttype` as a struct field holds it (the inverse of
    `decode_value`; a bool field's value lives in its header: nothing is written)."""
    e = Encoder()
    e.value(ttype, v, False)
    return bytes(e.out)


