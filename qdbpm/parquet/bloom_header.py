"""Bloom filters inside Parquet files: the Thrift compact `BloomFilterHeader` before each bitset.

The header is read with the generic codec (`compact.Decoder`) under the bloom filter's own terms:
messages name the file offset, nesting stops at 16 (a header needs 2), newer Thrift's uuid values
are skipped, and input that ends early raises `_Truncated`, so a reader of a file can read more and
retry. Fields follow parquet.thrift: a mistyped one is skipped and counts as absent.
Also here: the size rule every split-block bitset obeys (`check_num_bytes`).
"""

import os

import numpy as np

from ..errors import ParquetFormatError
from ..pm.layout import SBBF_BLOCK_BYTES, SBBF_MAX_BLOCKS
from .compact import Decoder, Struct, T, encode_struct
from .constants import BF_ALGORITHM, BF_BLOCK, BF_COMPRESSION, BF_HASH, BF_NUM_BYTES, BF_UNCOMPRESSED, BF_XXHASH

__all__ = ["check_num_bytes", "parse_bloom_header", "bloom_header_bytes", "read_parquet_bloom"]

_HEADER_PROBE = 256  # bytes read first when the header length is unknown
_I32_MAX = (1 << 31) - 1

# The required fields, their wire types, and for the unions the one member Parquet defines.
_REQUIRED = ((BF_NUM_BYTES, "numBytes", T.I32), (BF_ALGORITHM, "algorithm", T.STRUCT),
             (BF_HASH, "hash", T.STRUCT), (BF_COMPRESSION, "compression", T.STRUCT))
_MEMBERS = ((BF_ALGORITHM, "algorithm", BF_BLOCK, "BLOCK"), (BF_HASH, "hash", BF_XXHASH, "XXHASH"),
            (BF_COMPRESSION, "compression", BF_UNCOMPRESSED, "UNCOMPRESSED"))
_TYPE_NAMES = {**T.NAMES, T.STRUCT: "a union"}  # every struct of the header is a union


def check_num_bytes(num_bytes, what="bitset") -> int:
    """`num_bytes` as an int when it is a split-block bitset size: a positive multiple of the
    32-byte block, at most SBBF_MAX_BLOCKS blocks (TypeError / ValueError otherwise)."""
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, (int, np.integer)):
        raise TypeError(f"{what} size must be an int, got {type(num_bytes).__name__}")
    num_bytes = int(num_bytes)
    if num_bytes < SBBF_BLOCK_BYTES or num_bytes % SBBF_BLOCK_BYTES:
        raise ValueError(f"{what} size {num_bytes} must be a positive multiple of {SBBF_BLOCK_BYTES}")
    if num_bytes // SBBF_BLOCK_BYTES > SBBF_MAX_BLOCKS:
        raise ValueError(f"{what} size {num_bytes} exceeds {SBBF_MAX_BLOCKS} blocks")
    return num_bytes


class _Truncated(ParquetFormatError):
    """The header runs past the bytes given (read_parquet_bloom reads more and retries)."""


class _HeaderDecoder(Decoder):
    """The codec with a bloom header's messages and caps; `base` is the file offset of buf[0]."""

    __slots__ = ()
    max_depth = 16  # nesting a bloom header never needs; stops hostile recursion
    max_type = T.UUID

    def where(self, at):
        return f"bloom filter header at offset {(self.base or 0) + (self.pos if at is None else at)}"

    def fail(self, what, at=None):
        raise ParquetFormatError(f"{self.where(at)}: {what}")

    def short(self, what, at=None):
        raise _Truncated(f"{self.where(at)}: " + (what if what.startswith("truncated") else f"truncated: {what}"))

    def fail_depth(self):
        self.fail("nested deeper than a bloom filter header can be")


def _member(d: Decoder, union: Struct, name: str) -> int:
    """Id of the one member set in a union whose members are all structs. A member of another
    wire type cannot be one of them: skipped, as Thrift skips a mistyped field."""
    members = [fid for fid, (t, _) in union.fields.items() if t == T.STRUCT]
    if len(members) != 1:
        d.fail(f"{name} union has " + ("no member set" if not members else "more than one member set"),
               union.span[0])
    return members[0]


def _parse_header(buf, offset, base):
    """(num_bytes, header_length) of the header at buf[offset:]; messages add `base` to positions."""
    d = _HeaderDecoder(buf, offset, base)
    s = d.struct()
    members = {}
    for fid, name, _, _ in _MEMBERS:
        union = s.typed(fid, T.STRUCT)
        if union is not None:
            members[fid] = (_member(d, union, name), union.span[0])
    for fid, name, want in _REQUIRED:
        if s.typed(fid, want) is None:
            t = s.type_of(fid)
            why = "" if t is None else (f": field {fid} has compact type {_TYPE_NAMES[t]}, "
                                        f"expected {_TYPE_NAMES[want]}, and is skipped")
            d.fail(f"required field {fid} ({name}) missing{why}", offset)
    for fid, name, want, what in _MEMBERS:
        member, at = members[fid]
        if member != want:
            d.fail(f"unsupported {name} (union member {member}); only {what} is supported", at)
    num_bytes = s.typed(BF_NUM_BYTES, T.I32)
    try:
        check_num_bytes(num_bytes, "numBytes")
    except ValueError as e:
        d.fail(str(e), offset)
    return num_bytes, d.pos - offset


def _offset_arg(offset):
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"offset must be an int, got {type(offset).__name__}")
    if offset < 0:
        raise ParquetFormatError(f"bloom filter offset {int(offset)} is negative")
    return int(offset)


def parse_bloom_header(buf, offset: int = 0) -> tuple[int, int]:
    """(num_bytes, header_length) of the Thrift compact BloomFilterHeader at buf[offset:].

    Raises ParquetFormatError (with the offset) on malformed or truncated bytes, or unless the
    filter is BLOCK / XXHASH / UNCOMPRESSED with num_bytes a positive multiple of 32."""
    offset = _offset_arg(offset)
    with memoryview(buf) as mv, mv.cast("B") as flat:
        return _parse_header(flat, offset, 0)


def bloom_header_bytes(num_bytes: int) -> bytes:
    """The Thrift compact BloomFilterHeader for a BLOCK / XXHASH / UNCOMPRESSED bitset."""
    num_bytes = check_num_bytes(num_bytes)
    if num_bytes > _I32_MAX:
        raise ValueError(f"numBytes {num_bytes} does not fit the header's i32")
    s = Struct().set(BF_NUM_BYTES, T.I32, num_bytes)
    for fid, _, member, _ in _MEMBERS:  # each union holds its one member, an empty struct
        s.set(fid, T.STRUCT, Struct().set(member, T.STRUCT, Struct()))
    return encode_struct(s)


def read_parquet_bloom(f_or_bytes, offset: int, length: int | None = None) -> bytes:
    """The raw bitset of the bloom filter at `offset` of a Parquet file (header skipped).

    `f_or_bytes`: a path, a binary file object (seek/read) or a buffer holding the whole file.
    `length` (ColumnMetaData.bloom_filter_length, header + bitset) is checked when given and lets
    a file be read with one call."""
    offset = _offset_arg(offset)
    if length is not None:
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
            raise TypeError(f"length must be an int or None, got {type(length).__name__}")
        length = int(length)
        if length <= 0:
            raise ParquetFormatError(f"bloom filter at offset {offset}: length {length} is not positive")
    if isinstance(f_or_bytes, (str, os.PathLike)):
        with open(f_or_bytes, "rb") as fh:
            return _read_from_file(fh, offset, length)
    if hasattr(f_or_bytes, "read") and hasattr(f_or_bytes, "seek"):
        return _read_from_file(f_or_bytes, offset, length)
    with memoryview(f_or_bytes) as mv, mv.cast("B") as flat:
        end = len(flat) if length is None else min(len(flat), offset + length)
        if offset >= len(flat):
            raise ParquetFormatError(f"bloom filter offset {offset} is past the end ({len(flat)} bytes)")
        with flat[:end] as window:
            num_bytes, hlen = _parse_header(window, offset, 0)
        _check_extent(offset, length, num_bytes, hlen, len(flat))
        return bytes(flat[offset + hlen:offset + hlen + num_bytes])


def _check_extent(offset, length, num_bytes, hlen, size):
    if length is not None and hlen + num_bytes > length:
        raise ParquetFormatError(f"bloom filter at offset {offset}: length {length} is smaller than its "
                                 f"header ({hlen}) + bitset ({num_bytes}) bytes")
    if offset + hlen + num_bytes > size:
        raise ParquetFormatError(f"bloom filter at offset {offset}: bitset of {num_bytes} bytes after a "
                                 f"{hlen}-byte header runs past the end ({size} bytes)")


def _read_from_file(fh, offset, length):
    want = length if length is not None else _HEADER_PROBE
    while True:
        fh.seek(offset)
        head = fh.read(want)
        try:
            num_bytes, hlen = _parse_header(memoryview(head), 0, offset)
            break
        except _Truncated:
            # The header is longer than what was read: read more unless the file (or length) ended.
            if len(head) < want or length is not None or want >= (1 << 20):
                raise
            want *= 4
    if length is not None and hlen + num_bytes > length:
        _check_extent(offset, length, num_bytes, hlen, offset + len(head))
    bits = head[hlen:hlen + num_bytes]
    if len(bits) < num_bytes:
        bits += fh.read(num_bytes - len(bits))
    if len(bits) < num_bytes:
        raise ParquetFormatError(f"bloom filter at offset {offset}: bitset of {num_bytes} bytes after a "
                                 f"{hlen}-byte header runs past the end of the file")
    return bytes(bits)
