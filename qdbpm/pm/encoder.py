"""Encode `_pm` bytes from a `Description`: header, row group blocks, footer, whole fresh files.

No I/O: pm/writer.py writes what this produces. Byte layout decisions follow
docs/format.md#writing; `layout` holds every offset and flag.

Speed (a 10,000-row-group description is 80,000 chunk records): the kernel in `_encode.pyx`
sizes every out-of-line region and writes whole blocks, stat slots included, in one pass per row
group; without out-of-line bytes the layout is a plain grid. Any run of blocks can be produced on
its own (`BlockPlan.fill_rows`), so the writer streams a fresh file piece by piece.
"""

from __future__ import annotations

import struct

import numpy as np

from . import _encode
from . import layout as L
from .crc import crc32
from .description import Description
from .stat_slots import KIND_KEEP, KIND_SET, ool_rows
from ..errors import PmError

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")


# --- validation of a description ------------------------------------------------------------


def check_description(d: Description) -> None:
    """PmError unless the writer can encode `d` as a valid file."""
    ncols = len(d.columns)
    if not 0 <= d.parquet_footer_length <= 0xFFFFFFFF or d.parquet_footer_offset < 0:
        raise PmError(f"Parquet footer ({d.parquet_footer_offset}, {d.parquet_footer_length}) out of range")
    if d.chunks.dtype != L.CHUNK_DTYPE or d.chunks.ndim != 2 or d.chunks.shape[1] != ncols:
        raise PmError(f"chunks must be a (row_groups, {ncols}) array of CHUNK_DTYPE, got {d.chunks.dtype} {d.chunks.shape}")
    if np.shape(d.num_rows) != (d.chunks.shape[0],):
        raise PmError(f"num_rows has shape {np.shape(d.num_rows)}, expected ({d.chunks.shape[0]},)")
    if d.chunks.size and int(d.chunks["codec"].max()) > L.CODEC_MAX:
        raise PmError(f"codec {int(d.chunks['codec'].max())} is not a Parquet codec (0..7)")
    for i, c in enumerate(d.columns):
        if not 0 <= c.physical_type <= L.PHYSICAL_TYPE_MAX:
            raise PmError(f"column {i} ({c.name!r}): physical type {c.physical_type} is not 0..7")
        if L.flags_repetition(c.flags) == 3:
            raise PmError(f"column {i} ({c.name!r}): repetition value 3 in flags 0x{c.flags:x}")
        if not (0 <= c.max_rep_level <= 255 and 0 <= c.max_def_level <= 255):
            raise PmError(f"column {i} ({c.name!r}): levels out of u8 range")
        if c.physical_type == L.PT_FIXED_LEN_BYTE_ARRAY and c.fixed_byte_len <= 0:
            raise PmError(f"column {i} ({c.name!r}): FIXED_LEN_BYTE_ARRAY needs fixed_byte_len > 0")
    if not -1 <= d.designated_timestamp < ncols:
        raise PmError(f"designated_timestamp {d.designated_timestamp} not in [-1, {ncols})")
    for s in d.sorting_columns:
        if not 0 <= s < ncols:
            raise PmError(f"sorting column index {s} not in [0, {ncols})")
    if d.sorting_is_dts_asc:
        if d.designated_timestamp < 0:
            raise PmError("SORTING_IS_DTS_ASC needs a designated timestamp")
        if d.columns[d.designated_timestamp].flags & L.COLUMN_FLAG_DESCENDING:
            raise PmError("SORTING_IS_DTS_ASC with a DESCENDING designated timestamp column")
        if list(d.sorting_columns) not in ([], [d.designated_timestamp]):
            raise PmError("SORTING_IS_DTS_ASC replaces the sorting column list; it must be empty or [dts]")
    bc = bloom_columns_of(d)
    if list(bc) != sorted(set(bc)) or any(not 0 <= b < ncols for b in bc):
        raise PmError(f"bloom columns {bc} must be unique, ascending column indices < {ncols}")
    if d.scratchpad is not None:
        size = L.SCRATCHPAD_COUNT_SIZE + sum(L.SCRATCHPAD_ENTRY_HEAD_SIZE + len(v) for _, v in d.scratchpad)
        if size > L.SCRATCHPAD_MAX_BYTES:
            raise PmError(f"scratchpad is {size} bytes, more than the 1 MiB limit")


def bloom_columns_of(d: Description) -> list:
    """The header's bloom column list: `d.bloom_columns`, or every column with a bitset."""
    if d.bloom_columns is not None:
        return [int(c) for c in d.bloom_columns]
    if d.blooms is None:
        return []
    return [int(c) for c in np.nonzero((d.blooms.length >= 0).any(axis=0))[0]]



# --- header ---------------------------------------------------------------------------------


def header_bytes(d: Description) -> bytes:
    ncols = len(d.columns)
    bloom_cols = bloom_columns_of(d)
    flags = 0
    if bloom_cols:
        flags |= L.FEATURE_BLOOM_FILTERS
        if d.bloom_external:
            flags |= L.FEATURE_BLOOM_FILTERS_EXTERNAL
    if d.sorting_is_dts_asc:
        flags |= L.FEATURE_SORTING_IS_DTS_ASC
    if d.squash_tracker is not None:
        flags |= L.FEATURE_SQUASH_TRACKER
    sorting = [] if d.sorting_is_dts_asc else [int(s) for s in d.sorting_columns]
    names = [c.name.encode("utf-8") for c in d.columns]
    names_start = L.HEADER_SIZE + L.COLUMN_SIZE * ncols + L.SORTING_COLUMN_SIZE * len(sorting)

    head = np.zeros(1, L.HEADER_DTYPE)
    head["feature_flags"] = flags
    head["designated_timestamp"] = d.designated_timestamp
    head["sorting_column_count"] = len(sorting)
    head["column_count"] = ncols
    desc = np.zeros(ncols, L.COLUMN_DTYPE)
    pos = names_start
    for i, (c, nm) in enumerate(zip(d.columns, names)):
        desc[i] = (pos, c.id, c.type, c.flags, c.fixed_byte_len, len(nm), c.physical_type,
                   c.max_rep_level, c.max_def_level, 0)
        pos += len(nm)
    parts = [head.tobytes(), desc.tobytes(), np.asarray(sorting, L.U32).tobytes(), b"".join(names)]
    if bloom_cols:
        parts.append(_U32.pack(len(bloom_cols)) + np.asarray(bloom_cols, L.U32).tobytes())
    if d.squash_tracker is not None:
        parts.append(_I64.pack(d.squash_tracker))
    return b"".join(parts)


# --- row group blocks -----------------------------------------------------------------------


def encode_blocks(d: Description, rows, base: int):
    """Encode the blocks of row groups `rows` laid out from absolute offset `base`.

    Returns (bytes from base, absolute block offsets (len(rows),), inline bloom entries
    (len(rows), B) as u32 offset >> 3, 0 = absent).
    """
    plan = BlockPlan(d, rows, base)
    out = np.empty(plan.nbytes, np.uint8)
    plan.fill(out)
    return out.tobytes(), plan.offsets, plan.entries


class BlockPlan:
    """Layout of the blocks of row groups `rows` from absolute offset `base`: offsets, inline
    bloom entries and size (`nbytes`, from base) first; `fill(out)` then writes the bytes into a
    caller's buffer, so `encode_file` assembles the file without intermediate copies.

    Dense case (no OOL bytes anywhere): the blocks are a (rows, 8 + 64 * columns) grid after the
    alignment pad. Otherwise, per row group: the OOL region holds per column min, max, then (pad
    to 8 + bloom); the kernel sizes every region (`_encode.ool_layout`) and offsets are a prefix
    sum. Either way `_encode.fill_blocks` writes the bytes, any run of rows on its own
    (`fill_rows`), so the writer streams a fresh file piece by piece.
    """

    def __init__(self, d: Description, rows, base: int):
        self.d = d
        rows = self.rows = np.asarray(rows, np.int64)
        nrows = len(rows)
        ncols = self.ncols = len(d.columns)
        R = d.chunks.shape[0]
        bloom_cols = bloom_columns_of(d)
        fixed = self.fixed = L.block_size(ncols)
        inline_blooms = d.blooms is not None and not d.bloom_external and bloom_cols
        bl_len = np.full((nrows, ncols), -1, np.int64)
        if inline_blooms:
            sel = np.asarray(bloom_cols)
            bl_len[:, sel] = d.blooms.length[rows][:, sel]
            bad = (bl_len >= 0) & ((bl_len < L.SBBF_BLOCK_BYTES) | (bl_len % L.SBBF_BLOCK_BYTES != 0))
            if bad.any():
                r, c = np.argwhere(bad)[0]
                raise PmError(f"bloom bitset of row group {rows[r]} column {c} is {bl_len[r, c]} bytes; "
                              "a split-block filter is a positive multiple of 32")
            self.bl_len, self.bl_start = bl_len, np.asarray(d.blooms.start, np.int64)
            self.bl_data = np.ascontiguousarray(d.blooms.data, np.uint8).reshape(-1)
        else:  # the kernel's bloom inputs, empty
            self.bl_len = self.bl_start = np.zeros((0, 0), np.int64)
            self.bl_data = np.zeros(0, np.uint8)
        # The kernel's whole-file inputs, made contiguous once for every piece fill_rows writes.
        if d.stats is None:
            self.st_start = np.zeros((R, ncols, 2), np.int64)
            self.st_length = np.full((R, ncols, 2), -1, np.int64)
            self.stat_data = np.zeros(0, np.uint8)
        else:
            if d.stats.length.shape != (R, ncols, 2):
                raise PmError(f"stats have shape {d.stats.length.shape}, expected {(R, ncols, 2)}")
            self.st_start = np.asarray(d.stats.start, np.int64)
            self.st_length = np.asarray(d.stats.length, np.int64)
            self.stat_data = np.ascontiguousarray(np.asarray(d.stats.data, np.uint8).reshape(-1))
        self.chunk_bytes = np.ascontiguousarray(d.chunks).view(np.uint8).reshape(R, L.CHUNK_SIZE * ncols)
        self.num_rows = np.ascontiguousarray(d.num_rows, L.U64)
        bloom_row = (bl_len >= 0).any(axis=1)
        every = nrows == R and (nrows == 0 or bool((rows == np.arange(nrows)).all()))
        stat_row = ool_rows(self.st_length if every else self.st_length[rows]) & ~bloom_row
        self.dense = not (stat_row.any() or bloom_row.any())
        self.base = base
        start = L.align8(base)
        if self.dense:
            self.rel = np.arange(nrows, dtype=np.int64) * fixed
            self.offsets = start + self.rel
            self.nbytes = start - base + nrows * fixed
            self.entries = np.zeros((nrows, len(bloom_cols)), np.uint32)
            self._check_reach()
            return

        ool_size = np.empty(nrows, np.int64)
        bloom_rel = np.full((nrows, ncols), -1, np.int64) if inline_blooms else np.zeros((0, 0), np.int64)
        _encode.ool_layout(self.st_length, rows, self.bl_len, L.INLINE_STAT_MAX, L.OOL_MAX_LENGTH, ool_size, bloom_rel)
        # Blocks start 8-aligned; a block starting aligned ends where the next aligned start is
        # align8(end), so offsets follow from a prefix sum of aligned sizes.
        sizes = (fixed + ool_size + (L.BLOCK_ALIGN - 1)) & ~(L.BLOCK_ALIGN - 1)
        self.rel = rel = np.cumsum(sizes) - sizes
        total_end = start + (int(rel[-1]) + fixed + int(ool_size[-1]) if nrows else 0)
        self.nbytes = total_end - base
        self.offsets = offsets = start + rel
        entries = np.zeros((nrows, len(bloom_cols)), np.uint32)
        if inline_blooms:
            br = bloom_rel[:, np.asarray(bloom_cols)]
            entries[:] = np.where(br >= 0, (offsets[:, None] + fixed + br) >> L.BLOCK_OFFSET_SHIFT, 0)
        self.entries = entries
        self._check_reach()

    def _check_reach(self):
        if len(self.rows) and int(self.offsets[-1]) >> L.BLOCK_OFFSET_SHIFT > 0xFFFFFFFF:
            raise PmError("a row group block lies beyond 32 GiB; block offsets are u32 << 3")

    @property
    def pad(self) -> int:
        """Zero bytes before the first block (from base to the 8-aligned start)."""
        return L.align8(self.base) - self.base

    def span(self, i0: int, i1: int) -> tuple:
        """Where blocks i0..i1 (positions in `rows`) lie, as [start, end) from the first block's
        start: from block i0's start to block i1's (the last ends unpadded)."""
        n = len(self.rows)
        end = int(self.rel[i1]) if i1 < n else self.nbytes - self.pad
        return (int(self.rel[i0]) if i0 < n else end), end

    def fill_rows(self, out: np.ndarray, i0: int, i1: int) -> None:
        """Write blocks i0..i1 (the bytes of `span(i0, i1)`) into `out`, every byte of it."""
        at = self.rel[i0:i1] - self.span(i0, i1)[0]
        _encode.fill_blocks(out, at, self.rows[i0:i1], self.num_rows, self.chunk_bytes, self.st_start,
                            self.st_length, self.stat_data, KIND_KEEP, KIND_SET, L.INLINE_STAT_MAX,
                            L.OOL_MAX_LENGTH, self.bl_len[i0:i1], self.bl_start, self.bl_data)

    def fill(self, out: np.ndarray) -> None:
        """Write the `nbytes` bytes of the blocks (from `base`) into the uint8 array `out`."""
        o = self.pad
        out[:o] = 0
        self.fill_rows(out[o:], 0, len(self.rows))


def external_bloom_entries(d: Description, rows) -> np.ndarray:
    bloom_cols = bloom_columns_of(d)
    ent = np.zeros((len(rows), len(bloom_cols)), L.BLOOM_EXTERNAL_DTYPE)
    if d.blooms is None or not bloom_cols:
        return ent
    sel = np.asarray(bloom_cols)
    n = d.blooms.length[np.asarray(rows, np.int64)][:, sel]
    s = d.blooms.start[np.asarray(rows, np.int64)][:, sel]
    present = n > 0
    if np.any(s[present] <= 0) or np.any(s[present] + n[present] > d.parquet_footer_offset):
        raise PmError("an external bloom filter must lie inside the Parquet data: after the magic and "
                      f"before the footer at {d.parquet_footer_offset}")
    if np.any(n[present] % L.SBBF_BLOCK_BYTES != 0):
        raise PmError(f"an external bloom filter's bitset length must be a multiple of {L.SBBF_BLOCK_BYTES} "
                      "bytes (readers refuse any other)")
    ent["offset"] = np.where(present, s, 0)
    ent["length"] = np.where(present, n, 0)
    return ent


# --- footer ---------------------------------------------------------------------------------


def footer_body(d: Description, block_offsets, bloom_table, prev_pm_size: int) -> bytes:
    """Footer bytes from its start up to (not including) the CRC."""
    block_offsets = np.asarray(block_offsets, np.int64)
    if np.any(block_offsets % L.BLOCK_ALIGN):
        raise PmError("row group blocks must be 8-aligned")
    ff = 0
    if d.seq_txn is not None:
        ff |= L.FOOTER_FEATURE_SEQ_TXN
    if d.scratchpad is not None:
        ff |= L.FOOTER_FEATURE_SCRATCHPAD
    fixed = np.zeros(1, L.FOOTER_DTYPE)
    fixed[0] = (d.parquet_footer_offset, d.parquet_footer_length, len(block_offsets),
                d.unused_bytes, prev_pm_size, ff)
    parts = [fixed.tobytes(), (block_offsets >> L.BLOCK_OFFSET_SHIFT).astype(L.U32).tobytes()]
    if bloom_table is not None:
        parts.append(np.ascontiguousarray(bloom_table).tobytes())
    if d.seq_txn is not None:
        parts.append(_I64.pack(d.seq_txn))
    if d.scratchpad is not None:
        parts.append(_U32.pack(len(d.scratchpad)))
        for code, val in d.scratchpad:
            parts.append(_U32.pack(code) + _U32.pack(len(val)) + bytes(val))
    return b"".join(parts)


def footer_tail(crc: int, body_length: int) -> bytes:
    """The CRC and the FOOTER_LENGTH trailer that end a footer of `body_length` bytes."""
    return _U32.pack(crc) + _U32.pack(body_length + L.CRC_SIZE)


def encode_file(d: Description) -> bytes:
    """All bytes of a fresh `_pm` file for `d`, size field included."""
    return FileLayout(d).encode().tobytes()


class FileLayout:
    """A fresh file for `d`: header, block plan, footer body and total size, known before any
    block byte is produced. `encode()` gives all bytes in one buffer; the writer streams large
    block regions piece by piece instead (`plan.fill_rows`), to the same bytes."""

    def __init__(self, d: Description):
        check_description(d)
        head = header_bytes(d)
        rows = np.arange(d.row_group_count)
        self.plan = plan = BlockPlan(d, rows, len(head))
        bloom_table = _bloom_table(d, rows, plan.entries)
        self.footer_start = len(head) + plan.nbytes
        self.body = footer_body(d, plan.offsets, bloom_table, 0)
        self.crc_pos = self.footer_start + len(self.body)
        self.size = self.crc_pos + L.CRC_SIZE + L.TRAILER_SIZE
        self.head = _U64.pack(self.size) + head[L.PM_SIZE_BYTES :]

    def tail(self, crc) -> bytes:
        return footer_tail(crc, len(self.body))

    def encode(self) -> np.ndarray:
        head, plan = self.head, self.plan
        out = np.empty(self.size, np.uint8)
        out[: len(head)] = np.frombuffer(head, np.uint8)
        plan.fill(out[len(head) : self.footer_start])
        out[self.footer_start : self.crc_pos] = np.frombuffer(self.body, np.uint8)
        crc = crc32(out, L.CRC_START, self.crc_pos)
        out[self.crc_pos :] = np.frombuffer(self.tail(crc), np.uint8)
        return out


def _bloom_table(d: Description, rows, inline_entries):
    if not bloom_columns_of(d):
        return None
    return external_bloom_entries(d, rows) if d.bloom_external else inline_entries
