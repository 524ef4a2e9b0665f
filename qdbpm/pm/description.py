"""In-memory description of one `_pm` snapshot: what the writer takes and the reader gives back.

Columnar on purpose: chunk records are one (row_groups, columns) array of the on-disk dtype and
stat / bloom bytes are slices of one buffer, so a 10,000-row-group description costs no Python
object per chunk. Min/max travel as verbatim Parquet stat bytes; the writer alone decides inline
vs out-of-line placement, so callers never hand-encode a stat slot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import layout as L


@dataclass(frozen=True)
class Column:
    name: str
    type: int = -1  # full QuestDB type code, -1 when unknown
    id: int = -1
    flags: int = 0
    physical_type: int = L.PT_INT64
    fixed_byte_len: int = 0
    max_rep_level: int = 0
    max_def_level: int = 1


@dataclass
class ByteRefs:
    """Variable-length byte strings as slices of one buffer, without a Python object per value.

    data: 1-D uint8 array; start / length: int64 arrays of one shape; length -1 means absent.
    The Thrift reader hands the footer buffer itself as `data`, so stats are never copied.
    For external bloom filters `data` is empty and (start, length) address the Parquet file.
    """

    data: np.ndarray
    start: np.ndarray
    length: np.ndarray

    def get(self, index) -> bytes | None:
        n = int(self.length[index])
        if n < 0:
            return None
        s = int(self.start[index])
        return bytes(self.data[s : s + n])

    @classmethod
    def from_objects(cls, values, shape=None) -> "ByteRefs":
        """Build from a nested list / object array of bytes-or-None."""
        if isinstance(values, np.ndarray) and values.dtype == object:
            arr = values
        else:
            arr = np.empty(shape if shape is not None else np.shape(values), dtype=object)
            arr[...] = values if shape is None else np.asarray(values, dtype=object).reshape(shape)
        flat = arr.reshape(-1)
        lengths = np.full(flat.shape, -1, dtype=np.int64)
        starts = np.zeros(flat.shape, dtype=np.int64)
        parts, pos = [], 0
        for i, v in enumerate(flat):
            if v is None:
                continue
            b = bytes(v)
            starts[i], lengths[i] = pos, len(b)
            parts.append(b)
            pos += len(b)
        data = np.frombuffer(b"".join(parts), dtype=np.uint8)
        return cls(data, starts.reshape(arr.shape), lengths.reshape(arr.shape))


@dataclass
class Description:
    """Everything one snapshot of a `_pm` file holds.

    chunks: (R, C) CHUNK_DTYPE. codec, encodings, num_values, byte_range_start, total_compressed,
      null_count, distinct_count are written as given; of stat_flags only the EXACT,
      NULL_COUNT_PRESENT and DISTINCT_COUNT_PRESENT bits are taken (EXACT only with a stat):
      presence, inlining, STAT_SIZES and the stat slots are derived from `stats`.
    stats: ByteRefs of shape (R, C, 2), [..., 0] = min, [..., 1] = max; None = no stats at all.
    blooms: ByteRefs of shape (R, C): inline bitsets, or (offset, length) of the raw bitset inside
      the Parquet file when bloom_external; None = no filters. Columns outside bloom_columns are
      ignored.
    """

    columns: list
    num_rows: np.ndarray
    chunks: np.ndarray
    stats: ByteRefs | None = None
    blooms: ByteRefs | None = None
    designated_timestamp: int = -1
    sorting_columns: list = field(default_factory=list)  # column indices; DESCENDING is a column flag
    sorting_is_dts_asc: bool = False  # header bit 2: sorted by the designated timestamp, no list
    parquet_footer_offset: int = 0
    parquet_footer_length: int = 0
    unused_bytes: int = 0
    bloom_columns: list | None = None  # None: every column that has a bitset in some row group
    bloom_external: bool = False
    squash_tracker: int | None = None  # header bit 3
    seq_txn: int | None = None  # footer bit 0
    scratchpad: list | None = None  # footer bit 1: [(code, bytes), ...]

    @property
    def row_group_count(self) -> int:
        return int(self.chunks.shape[0])

    @property
    def parquet_size(self) -> int:
        return L.parquet_size(self.parquet_footer_offset, self.parquet_footer_length)

    @classmethod
    def from_row_groups(cls, columns, row_groups, **kw) -> "Description":
        """Convenience builder from per-row-group dicts.

        Each row group: {"num_rows": int, "chunks": (C,) CHUNK_DTYPE or None,
        "mins": [bytes|None]*C, "maxs": [...], "blooms": {col: bitset or (offset, length)}}.
        """
        ncols = len(columns)
        nrg = len(row_groups)
        chunks = np.zeros((nrg, ncols), dtype=L.CHUNK_DTYPE)
        num_rows = np.zeros(nrg, dtype=np.uint64)
        stats = np.empty((nrg, ncols, 2), dtype=object)
        blooms = np.empty((nrg, ncols), dtype=object)
        any_stats = any_bloom = False
        external = kw.get("bloom_external", False)
        ext_start = np.zeros((nrg, ncols), np.int64)
        ext_len = np.full((nrg, ncols), -1, np.int64)
        for r, rg in enumerate(row_groups):
            num_rows[r] = rg["num_rows"]
            if rg.get("chunks") is not None:
                chunks[r] = rg["chunks"]
            for c in range(ncols):
                for k, key in enumerate(("mins", "maxs")):
                    v = (rg.get(key) or [None] * ncols)[c]
                    stats[r, c, k] = v
                    any_stats |= v is not None
            for c, b in (rg.get("blooms") or {}).items():
                any_bloom = True
                if external:
                    ext_start[r, c], ext_len[r, c] = b
                else:
                    blooms[r, c] = b
        kw.setdefault("stats", ByteRefs.from_objects(stats) if any_stats else None)
        if any_bloom:
            if external:
                kw.setdefault("blooms", ByteRefs(np.zeros(0, np.uint8), ext_start, ext_len))
            else:
                kw.setdefault("blooms", ByteRefs.from_objects(blooms))
        return cls(columns=list(columns), num_rows=num_rows, chunks=chunks, **kw)
