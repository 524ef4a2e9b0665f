"""Parquet footers: read a file's tail, parse its FileMetaData, hand it out columnar.

`read_footer` reads the tail (one speculative read, a second only for footers longer than it),
checks the magic and lengths, and `parse_footer` runs the Cython kernel `_thrift` over the
Thrift bytes. The result, `ParquetFooter`, holds per-chunk fields as (row groups, leaf columns)
numpy arrays and min/max statistics as spans into the footer buffer, so a 10,000-row-group
footer costs no Python object per chunk. This module owns the checks that need the whole
picture: the schema tree (`leaves`), chunk types against leaves, paths, and byte ranges inside
the file.
"""

from __future__ import annotations

import os
from functools import cached_property
from typing import Sequence

import numpy as np

from . import _thrift
from ..pm import layout as L
from ..pm.description import ByteRefs
from ..errors import ParquetFormatError
from .build import ColumnChunkSpec, RowGroupSpec, SchemaElement, build_file_metadata
from .compact import T, decode_struct, decode_value
from . import constants as PQ
from .constants import MAGIC, MAGIC_ENCRYPTED, SE_NUM_CHILDREN
from .leaves import at_footer_byte, build_leaves
from .splice import append_footer

# Parquet Encoding enum value -> _pm ENCODINGS bit (RLE=3 and BIT_PACKED=4 set nothing).
PARQUET_ENCODING_TO_BIT = {
    PQ.ENCODING_PLAIN: L.ENC_PLAIN,
    PQ.ENCODING_PLAIN_DICTIONARY: L.ENC_RLE_DICTIONARY,
    PQ.ENCODING_RLE_DICTIONARY: L.ENC_RLE_DICTIONARY,
    PQ.ENCODING_DELTA_BINARY_PACKED: L.ENC_DELTA_BINARY_PACKED,
    PQ.ENCODING_DELTA_LENGTH_BYTE_ARRAY: L.ENC_DELTA_LENGTH_BYTE_ARRAY,
    PQ.ENCODING_DELTA_BYTE_ARRAY: L.ENC_DELTA_BYTE_ARRAY,
    PQ.ENCODING_BYTE_STREAM_SPLIT: L.ENC_BYTE_STREAM_SPLIT,
}


__all__ = ["ParquetFooter", "read_footer", "parse_footer", "TAIL_READ"]

TAIL_READ = 64 * 1024  # speculative tail read: most footers fit, so one round trip

# The kernel writes CHUNK_DTYPE records itself; make sure it agrees with layout.py.
assert tuple((n, L.CHUNK_DTYPE.fields[n][1], L.CHUNK_DTYPE[n].itemsize) for n in L.CHUNK_DTYPE.names) == (
    _thrift.CHUNK_LAYOUT
), "qdbpm._thrift.ChunkRec does not match layout.CHUNK_DTYPE"
_NATIVE_CHUNK_DTYPE = L.CHUNK_DTYPE.newbyteorder("=")


def _decode_name(raw: bytes, index: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ParquetFormatError(f"corrupt Parquet footer: schema element {index} name is not valid UTF-8") from None


def _text(raw: bytes | None) -> str | None:
    # Metadata strings are kept losslessly even when they are not UTF-8.
    return None if raw is None else raw.decode("utf-8", "surrogateescape")


class ParquetFooter:
    """A parsed Parquet footer, columnar: R row groups x C leaf columns.

    File position: file_size (None when unknown), footer_offset (where the Thrift bytes start in
    the file; 0 when unknown), footer_length, buffer (the footer bytes, 1-D uint8; stats point
    into it), metadata_length (bytes the FileMetaData struct itself takes, <= footer_length),
    fields (its top-level fields as (id, type, value start, value end)), schema_spans.

    File level: version, num_rows, created_by, key_value_metadata [(key, value | None)],
    column_orders ([ColumnOrder union id per leaf: 1 TYPE_ORDER, 2 IEEE_754_TOTAL_ORDER,
    3 INT96_TIMESTAMP_ORDER] or None), schema [SchemaElement], leaves [Leaf].

    Row groups, (R,) int64 (-1 absent): rg_num_rows, rg_total_byte_size, rg_file_offset,
    rg_total_compressed_size, rg_ordinal; rg_spans (R, 2): each RowGroup's bytes in `buffer`.
    Sorting columns as CSR: sort_offsets (R + 1,), sort_column_idx int32, sort_descending,
    sort_nulls_first (bool); `sorting_columns` gives them as lists of tuples.

    Chunks, (R, C): `chunks` (layout.CHUNK_DTYPE: codec, encodings, stat_flags, num_values,
    byte_range_start, total_compressed, null_count, distinct_count filled per
    docs/format.md#generation-from-parquet; stat_sizes / min_stat / max_stat zero, for the `_pm`
    writer to place), `stats`
    (ByteRefs (R, C, 2) of min_value / max_value inside `buffer`; empty = absent), `stat_legacy`
    (ByteRefs (R, C, 2) of the deprecated min / max, read on first use; an empty value stays
    present, length 0),
    int64 (-1 absent): data_page_offset, dictionary_page_offset, index_page_offset,
    total_uncompressed, bloom_offset, bloom_length, column_index_offset, column_index_length,
    offset_index_offset, offset_index_length, nan_count, statistics_offset (where the chunk's
    Statistics struct starts in `buffer`); uint8 physical_types; uint32 encodings_raw (bit e =
    Parquet Encoding e listed).
    """

    def __init__(self, buffer: np.ndarray, out: dict, *, footer_offset: int, file_size: int | None):
        self.buffer = buffer
        self.file_size = file_size
        self.footer_offset = footer_offset
        self.footer_length = int(buffer.shape[0])
        self.metadata_length = int(out["end"])
        self.fields = out["fields"]
        self.version = int(out["version"])
        self.num_rows = int(out["num_rows"])
        self.created_by = _text(out["created_by"])
        self.key_value_metadata = [(_text(k), _text(v)) for k, v in out["key_value_metadata"]]
        self.column_orders = out["column_orders"]
        self.schema = [
            SchemaElement(_decode_name(t[3], i), t[0], t[1], t[2], t[4], t[5], t[6], t[7], t[8], t[9])
            for i, t in enumerate(out["schema"])
        ]
        self.schema_spans = out["schema_spans"]
        self.leaves = build_leaves(self.schema, self.schema_spans, footer_offset)
        R, C = out["R"], len(self.leaves)
        if out["C"] >= 0 and out["C"] != C:
            raise ParquetFormatError(
                f"corrupt Parquet footer: row groups have {out['C']} column chunks but the schema has {C} leaf columns"
                + at_footer_byte(int(out["rg_spans"][0, 0]), footer_offset)
            )
        g = out["rg"]
        self.rg_num_rows, self.rg_total_byte_size, self.rg_file_offset = g[0], g[1], g[2]
        self.rg_total_compressed_size, self.rg_ordinal = g[3], g[4]
        self.rg_spans = out["rg_spans"]
        self.sort_offsets = out["sort_offsets"]
        self.sort_column_idx = out["sort_idx"]
        self.sort_descending = (out["sort_flags"] & 1).astype(bool)
        self.sort_nulls_first = (out["sort_flags"] & 2).astype(bool)
        if R and C:
            self._chunk_arrays(out, R, C)
        else:
            self._empty_chunk_arrays(R, C)
        self._validate(out)

    # --- construction ------------------------------------------------------------------------

    def _chunk_arrays(self, out, R, C):
        f = dict(zip(_thrift.I64_FIELDS, out["i64"]))
        spans = out["spans"]
        self.data_page_offset = f["data_page_offset"]
        self.dictionary_page_offset = f["dictionary_page_offset"]
        self.index_page_offset = f["index_page_offset"]
        self.total_uncompressed = f["total_uncompressed"]
        self.bloom_offset, self.bloom_length = f["bloom_offset"], f["bloom_length"]
        self.column_index_offset, self.column_index_length = f["column_index_offset"], f["column_index_length"]
        self.offset_index_offset, self.offset_index_length = f["offset_index_offset"], f["offset_index_length"]
        self.nan_count = f["nan_count"]
        self.statistics_offset = f["statistics_offset"]
        self.physical_types = out["physical_types"]
        self.encodings_raw = out["encodings_raw"]
        self.stats = ByteRefs(self.buffer, spans[0], spans[1])
        # Filled by the kernel (byte_range_start = dictionary page if present, else first data page).
        self.chunks = out["chunks"].view(_NATIVE_CHUNK_DTYPE).reshape(R, C).astype(L.CHUNK_DTYPE, copy=False)

    def _empty_chunk_arrays(self, R, C):
        neg = np.full((R, C), -1, np.int64)
        for name in ("data_page_offset", "dictionary_page_offset", "index_page_offset", "total_uncompressed",
                     "bloom_offset", "bloom_length", "column_index_offset", "column_index_length",
                     "offset_index_offset", "offset_index_length", "nan_count", "statistics_offset"):
            setattr(self, name, neg.copy())
        self.physical_types = np.zeros((R, C), np.uint8)
        self.encodings_raw = np.zeros((R, C), np.uint32)
        self.stats = ByteRefs(self.buffer, np.zeros((R, C, 2), np.int64), np.full((R, C, 2), -1, np.int64))
        self.chunks = np.zeros((R, C), L.CHUNK_DTYPE)

    def _validate(self, out):
        """Checks over the whole picture. The kernel already checked per chunk that later row
        groups repeat row group 0's column types and, with the footer offset known, that every
        range lies in the data region; here only row group 0 is compared with the schema."""
        R, C = self.chunks.shape
        if not (R and C):
            return
        for c, leaf in enumerate(self.leaves):
            t = int(self.physical_types[0, c])
            if t != leaf.physical_type:
                raise ParquetFormatError(
                    f"corrupt Parquet footer: row group 0, column chunk {c} ({leaf.name}): ColumnMetaData.type "
                    f"{L.PHYSICAL_TYPE_NAMES[t]} but the schema leaf is {L.PHYSICAL_TYPE_NAMES[leaf.physical_type]}"
                    + at_footer_byte(int(self.rg_spans[0, 0]), self.footer_offset)
                )
        # Row group 0's paths against the leaves; later row groups whose path bytes differ from
        # row group 0's (the kernel compared the rest) are decoded and judged one by one.
        for c, (s, n) in enumerate(out["path_spans"].tolist()):
            self._check_path(0, c, self._decode_path(self.buffer[s : s + n].tobytes()), s)
        for r, c, s, e in out["path_mismatch"].tolist():
            self._check_path(r, c, self._decode_path(self.buffer[s:e].tobytes()), s)
        if self.sort_column_idx.size and int(self.sort_column_idx.max()) >= C:
            k = int(np.argmax(self.sort_column_idx >= C))
            r = int(np.searchsorted(self.sort_offsets, k, "right")) - 1
            raise ParquetFormatError(f"corrupt Parquet footer: row group {r} sorts by column "
                                     f"{int(self.sort_column_idx[k])} but there are only {C} leaf columns"
                                     + at_footer_byte(int(self.rg_spans[r, 0]), self.footer_offset))

    @staticmethod
    def _decode_path(raw: bytes) -> tuple:
        lst = decode_value(raw, T.LIST)[0]
        return tuple(_text(p) for p in lst.values)

    def _check_path(self, r, c, path, at):
        if path != self.leaves[c].path:
            raise ParquetFormatError(f"corrupt Parquet footer: row group {r}, column chunk {c}: path_in_schema "
                                     f"{'.'.join(path)!r} does not match schema leaf {self.leaves[c].name!r}"
                                     + at_footer_byte(at, self.footer_offset))

    # --- views ----------------------------------------------------------------------------------

    @property
    def row_group_count(self) -> int:
        return int(self.chunks.shape[0])

    @property
    def column_count(self) -> int:
        return int(self.chunks.shape[1])

    @cached_property
    def stat_legacy(self) -> ByteRefs:
        """The deprecated Statistics min / max (fields 2 / 1) as ByteRefs (R, C, 2); not used for
        `_pm`, read on first use. Unlike `stats`, an empty value stays present (length 0)."""
        R, C = self.chunks.shape
        start, length = _thrift.binary_fields(self.buffer, self.statistics_offset.reshape(-1), 2, 1)
        return ByteRefs(self.buffer, start.reshape(R, C, 2), length.reshape(R, C, 2))

    @cached_property
    def sorting_columns(self) -> list:
        """Per row group: [(column_idx, descending, nulls_first)] ([] when none)."""
        idx = self.sort_column_idx.tolist()
        desc = self.sort_descending.tolist()
        nf = self.sort_nulls_first.tolist()
        off = self.sort_offsets.tolist()
        return [[(idx[k], desc[k], nf[k]) for k in range(off[r], off[r + 1])] for r in range(len(off) - 1)]

    def min_max(self, row_group: int, column: int) -> tuple[bytes | None, bytes | None]:
        """Verbatim min_value / max_value bytes of one chunk (None = absent)."""
        return self.stats.get((row_group, column, 0)), self.stats.get((row_group, column, 1))

    def encodings(self, row_group: int, column: int) -> list[int]:
        """Parquet Encoding values listed for one chunk, ascending (values >= 32 are not kept)."""
        bits = int(self.encodings_raw[row_group, column])
        return [e for e in range(32) if bits >> e & 1]

    def raw_row_group(self, row_group: int) -> bytes:
        """The RowGroup struct's Thrift bytes, as in the footer."""
        s, e = self.rg_spans[row_group]
        return self.buffer[s:e].tobytes()

    def metadata_bytes(self) -> bytes:
        """The FileMetaData Thrift bytes (the footer minus anything after the struct)."""
        return self.buffer[: self.metadata_length].tobytes()

    def append_footer(self, new_meta: bytes, offset_delta: int) -> bytes:
        """This footer with the row groups of another one (same schema) appended, their offsets
        moved by `offset_delta`; the old row groups are copied as raw bytes (splice.append_footer,
        without walking them again)."""
        return append_footer(self.buffer[: self.metadata_length], new_meta, offset_delta=offset_delta,
                               old_fields=self.fields)

    # --- footers for other files ------------------------------------------------------------------

    def schema_structs(self, leaf_indices: Sequence[int] | None = None) -> list:
        """The schema elements as Thrift Structs decoded from the footer (exact, unknown logical
        types included), pruned to the given leaves and their ancestors with num_children fixed."""
        raw = self.buffer.tobytes()
        structs = [decode_struct(raw, s)[0] for s, _ in self.schema_spans]
        if leaf_indices is None:
            return structs
        keep = {0}
        parent = self.parents()
        for li in leaf_indices:
            i = self.leaves[li].schema_index
            while i not in keep:
                keep.add(i)
                i = parent[i]
        children = {i: 0 for i in keep}
        for i in keep:
            if i:
                children[parent[i]] += 1
        out = []
        for i in sorted(keep):
            s = structs[i]
            if s.typed(SE_NUM_CHILDREN, T.I32, 0) > 0 or i == 0:  # mistyped: absent, a leaf
                s.set(SE_NUM_CHILDREN, T.I32, children[i])
            out.append(s)
        return out

    def parents(self) -> list[int]:
        parent = [-1] * len(self.schema)
        stack = [[self.schema[0].num_children or 0, 0]]
        for i in range(1, len(self.schema)):
            while stack[-1][0] == 0:
                stack.pop()
            stack[-1][0] -= 1
            parent[i] = stack[-1][1]
            if self.schema[i].num_children:
                stack.append([self.schema[i].num_children, i])
        return parent

    def synthesize(self, row_groups: Sequence[int], columns: Sequence[int], chunk_starts,
                   *, key_value_metadata=None) -> bytes:
        """FileMetaData (Thrift bytes; frame with `build.frame_footer`) for a new file holding only
        the chunks of `columns` (leaf indices, ascending) in `row_groups`, where chunk (i, j) now
        starts at chunk_starts[i][j] (its new byte_range_start; page offsets move with it).

        Enough for a Parquet reader to decode those chunks: schema (pruned), types, encodings,
        codec, counts, sizes, data/dictionary page offsets; no statistics or indexes.
        `key_value_metadata` defaults to the original's, without ARROW:schema unless every
        column is kept (a stored Arrow schema must describe exactly the file's columns).
        """
        cols = [int(c) for c in columns]
        if not cols or sorted(set(cols)) != cols or cols[-1] >= self.column_count or cols[0] < 0:
            raise ValueError("columns must be ascending leaf indices without repeats")
        starts = np.asarray(chunk_starts, np.int64).reshape(len(row_groups), len(cols))
        rgs = []
        for i, r in enumerate(row_groups):
            specs = []
            for j, c in enumerate(cols):
                base = int(self.chunks["byte_range_start"][r, c])
                shift = int(starts[i, j]) - base
                d = int(self.dictionary_page_offset[r, c])
                specs.append(ColumnChunkSpec(
                    type=int(self.physical_types[r, c]),
                    path=self.leaves[c].path,
                    codec=int(self.chunks["codec"][r, c]),
                    num_values=int(self.chunks["num_values"][r, c]),
                    total_uncompressed_size=int(self.total_uncompressed[r, c]),
                    total_compressed_size=int(self.chunks["total_compressed"][r, c]),
                    data_page_offset=int(self.data_page_offset[r, c]) + shift,
                    dictionary_page_offset=d + shift if d >= 0 else None,
                    encodings=self.encodings(r, c),
                ))
            rgs.append(RowGroupSpec(columns=specs, num_rows=int(self.rg_num_rows[r])))
        if key_value_metadata is None:
            every = len(cols) == self.column_count
            key_value_metadata = [(k, v) for k, v in self.key_value_metadata if every or k != "ARROW:schema"]
        orders = None
        if self.column_orders is not None and len(self.column_orders) == self.column_count:
            orders = [self.column_orders[c] for c in cols]
        return build_file_metadata(
            self.schema_structs(cols), rgs, version=self.version, created_by=self.created_by,
            key_value_metadata=key_value_metadata, column_orders=orders,
        )

    def __repr__(self) -> str:
        return (f"<ParquetFooter {self.row_group_count} row groups x {self.column_count} columns, "
                f"{self.num_rows} rows, footer {self.footer_length} bytes at {self.footer_offset}>")


def parse_footer(buf, *, footer_offset: int = 0, file_size: int | None = None) -> ParquetFooter:
    """Parse the FileMetaData Thrift bytes `buf` (bytes-like or 1-D uint8 array).

    footer_offset: where `buf` starts in the file (0 = unknown). When known, messages give file
    offsets too and every chunk / bloom / page-index range is checked to lie in [4, footer_offset).
    """
    arr = np.frombuffer(buf, np.uint8) if not isinstance(buf, np.ndarray) else buf
    if arr.dtype != np.uint8 or arr.ndim != 1:
        raise TypeError("buf must be bytes-like or a 1-D uint8 array")
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    out = _thrift.parse_file_metadata(arr, footer_offset)
    return ParquetFooter(arr, out, footer_offset=footer_offset, file_size=file_size)


def _size_of(f) -> int:
    size = getattr(f, "size", None)
    if callable(size):  # pyarrow NativeFile
        return int(size())
    pos = f.seek(0, 2)
    return int(pos if pos is not None else f.tell())


def _short(got: int, n: int, offset: int):
    raise ParquetFormatError(f"short read: {got} of {n} bytes at offset {offset} (file truncated?)")


def _read_at(f, offset: int, n: int) -> bytes:
    f.seek(offset)
    data = f.read(n)
    if len(data) != n:
        _short(len(data), n, offset)
    return bytes(data) if not isinstance(data, bytes) else data


def _read_into(f, offset: int, out: np.ndarray):
    """Fill `out` from `offset`, straight into its memory when the file supports readinto."""
    n = out.shape[0]
    readinto = getattr(f, "readinto", None)
    if readinto is None:
        out[:] = np.frombuffer(_read_at(f, offset, n), np.uint8)
        return
    f.seek(offset)
    view = memoryview(out)
    got = 0
    while got < n:
        k = readinto(view[got:])
        if not k:
            _short(got, n, offset)
        got += k


def _read_tail(f, file_size: int | None, check_header: bool) -> ParquetFooter:
    if file_size is None:
        file_size = _size_of(f)
    min_size = 2 * len(MAGIC) + 4
    if file_size < min_size:
        raise ParquetFormatError(f"not a Parquet file: {file_size} bytes, fewer than the {min_size} of an empty one")
    n = min(file_size, TAIL_READ)
    tail = _read_at(f, file_size - n, n)
    magic = tail[-4:]
    if magic == MAGIC_ENCRYPTED:
        raise ParquetFormatError("encrypted Parquet file (PARE magic: encrypted footer): encryption is not supported")
    if magic != MAGIC:
        raise ParquetFormatError(f"not a Parquet file: the last 4 bytes are {magic!r}, not {MAGIC!r}")
    length = int.from_bytes(tail[-8:-4], "little")
    if length == 0 or length > file_size - min_size:
        raise ParquetFormatError(
            f"corrupt Parquet file: footer length {length} does not fit a {file_size}-byte file "
            f"(at most {file_size - min_size})"
        )
    offset = file_size - L.PARQUET_TAIL - length
    if length + L.PARQUET_TAIL <= n:
        buf = np.frombuffer(tail, np.uint8, length, n - L.PARQUET_TAIL - length)
    else:
        buf = np.empty(length, np.uint8)
        head = length + L.PARQUET_TAIL - n
        _read_into(f, offset, buf[:head])
        buf[head:] = np.frombuffer(tail, np.uint8, n - L.PARQUET_TAIL)
    if n == file_size:
        first = tail[:4]
    elif check_header:
        first = _read_at(f, 0, 4)
    else:
        first = MAGIC
    if first != MAGIC:
        if first == MAGIC_ENCRYPTED:
            raise ParquetFormatError("encrypted Parquet file (PARE magic): encryption is not supported")
        raise ParquetFormatError(f"not a Parquet file: the first 4 bytes are {first!r}, not {MAGIC!r}")
    return parse_footer(buf, footer_offset=offset, file_size=file_size)


def read_footer(source, *, file_size: int | None = None, check_header: bool = True) -> ParquetFooter:
    """Read and parse the footer of a Parquet file: a path (str / PathLike), or a binary file
    object with seek/read (local, io.BytesIO, pyarrow NativeFile, fsspec).

    I/O: one read of the last min(file size, 64 KiB) bytes, one more only when the footer is
    longer, plus a 4-byte read of the leading magic when the file is bigger than the tail read
    (skip it with check_header=False, e.g. on object stores). `file_size` saves a size query.
    Errors name the path when there is one.
    """
    if isinstance(source, (str, os.PathLike)):
        name = os.fsdecode(source)
        try:
            with open(source, "rb") as f:
                return _read_tail(f, file_size, check_header)
        except ParquetFormatError as e:
            raise ParquetFormatError(f"{name}: {e}") from None
    return _read_tail(source, file_size, check_header)
