"""Write `_pm` files: fresh (atomic temp + fsync + rename) or in update mode (append at the base,
new footer chaining to the anchor, publish by patching the size at offset 0 last).

Byte layout decisions follow docs/format.md#writing; `layout` holds every offset and flag.

Speed (a 10,000-row-group description is 80,000 chunk records): stat slots, flags and sizes are
computed a block of row groups at a time with a few vector operations (`_Stats`); without any
out-of-line bytes the blocks are a dense grid filled in place (`_BlockPlan.fill_dense`), and
`write_new` streams such a file in 1 MiB pieces, starting each piece's writeback while the next
is computed (`FileOps.start_writeback`), so its fsync has little left to wait for. The bytes are
the same whichever path writes them.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import sys
import tempfile

import numpy as np

from . import layout as L
from .crc import crc32
from .description import Description
from ..errors import CorruptFileError, PmError

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")


# --- validation of a description ------------------------------------------------------------


def _check_description(d: Description) -> None:
    ncols = len(d.columns)
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
        size = 4 + sum(8 + len(v) for _, v in d.scratchpad)
        if size > L.SCRATCHPAD_MAX_BYTES:
            raise PmError(f"scratchpad is {size} bytes, more than the 1 MiB limit")


def bloom_columns_of(d: Description) -> list:
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


_STAT_FIELDS = ("stat_flags", "stat_sizes", "min_stat", "max_stat")


class _U64Loader:
    """Little-endian u64 loads at arbitrary byte offsets of a 1-D uint8 array, without copying
    it: one gather through a byte-strided (unaligned) u64 view; offsets within 8 bytes of the
    end take a byte gather, bytes past the end reading as 0. A negative offset gives 0."""

    def __init__(self, data: np.ndarray):
        self.data = data
        self.n = n = data.shape[0]
        self.view = np.ndarray((n - 7,), L.U64, buffer=data, strides=(1,)) if n >= 8 else None

    def __call__(self, starts: np.ndarray, checked: bool = False) -> np.ndarray:
        """checked: the caller knows every start is >= 0."""
        n = self.n
        if self.view is None:
            out = np.zeros(starts.shape, L.U64)
            slow = starts >= 0
        else:
            out = self.view[np.minimum(starts, n - 8) if checked else np.clip(starts, 0, n - 8)]
            if not checked:
                neg = starts < 0
                if neg.any():
                    out[neg] = 0
            slow = starts > n - 8
        if slow.any():
            idx = starts[slow][:, None] + np.arange(8)
            got = self.data[np.minimum(idx, n - 1)] if n else np.zeros(idx.shape, np.uint8)
            got[idx >= n] = 0
            out[slow] = np.ascontiguousarray(got).view(L.U64).reshape(-1)
        return out


def _load_u64(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The little-endian u64 at each byte offset of `starts` in `data` (see _U64Loader)."""
    return _U64Loader(data)(starts)


def _kind_tables():
    """STAT_FLAGS by (min kind, max kind), kind 0 absent / 1 out of line / 2 inline: the bits of
    the footer's flags kept (NULL / DISTINCT_COUNT_PRESENT, and EXACT only with a stat) and the
    bits set (PRESENT, INLINED)."""
    keep = np.zeros((3, 3), np.uint8)
    put = np.zeros((3, 3), np.uint8)
    for a in range(3):
        for b in range(3):
            k = L.STAT_NULL_COUNT_PRESENT | L.STAT_DISTINCT_COUNT_PRESENT
            p = 0
            if a:
                k |= L.STAT_MIN_EXACT
                p |= L.STAT_MIN_PRESENT | (L.STAT_MIN_INLINED if a == 2 else 0)
            if b:
                k |= L.STAT_MAX_EXACT
                p |= L.STAT_MAX_PRESENT | (L.STAT_MAX_INLINED if b == 2 else 0)
            keep[a, b], put[a, b] = k, p
    return keep, put


_KIND_KEEP, _KIND_SET = (t.reshape(-1) for t in _kind_tables())  # indexed by 3 * min kind + max kind
_LOW_BYTES = np.array([(1 << (8 * m)) - 1 for m in range(9)], L.U64)  # the low m bytes of a u64

# Row groups per step of the stat computation, as elements (row groups x columns x 2): the
# temporaries of a step stay in cache and come from the allocator's free lists, where
# whole-file temporaries (megabytes each) would page-fault fresh memory on every call.
_STAT_STEP = 1 << 14


class _Stats:
    """The derived fields of final chunk records, computed a block of row groups at a time.

    `block(sel)` (a slice or an index array of row groups) gives (stat_flags, stat_sizes, slots,
    ool): slots (k, C, 2) u64 hold inline stats (min, max), 0 elsewhere; ool (k, C, 2) int64 the
    out-of-line lengths, or None when there are none. Min and max are handled together, as the
    last axis. Everything else in a record is copied from `d.chunks` (RESERVED written 0)."""

    def __init__(self, d: Description):
        self.d = d
        shape = d.chunks.shape
        self.step = max(1, _STAT_STEP // max(1, 2 * shape[1]))
        st = d.stats
        if st is None:
            self.data = np.zeros(0, np.uint8)
            return
        if st.length.shape != shape + (2,):
            raise PmError(f"stats have shape {st.length.shape}, expected {shape + (2,)}")
        self.data = np.ascontiguousarray(np.asarray(st.data, np.uint8).reshape(-1))
        self.load = _U64Loader(self.data)

    def ool_rows(self, rows=None) -> np.ndarray:
        """(R,) or (len(rows),) bool: row groups with an out-of-line stat."""
        st = self.d.stats
        if st is None:
            return np.zeros(self.d.chunks.shape[0] if rows is None else len(rows), bool)
        n = st.length if rows is None else st.length[rows]
        return ((n > L.INLINE_STAT_MAX) & (n <= L.OOL_MAX_LENGTH)).any(axis=(1, 2))

    def block(self, sel):
        d = self.d
        src_flags = d.chunks["stat_flags"][sel]
        st = d.stats
        if st is None:
            k = src_flags.shape
            return (src_flags & np.uint8(L.STAT_NULL_COUNT_PRESENT | L.STAT_DISTINCT_COUNT_PRESENT),
                    np.zeros(k, np.uint8), np.zeros(k + (2,), L.U64), None)
        n, start = st.length[sel], st.start[sel]
        # Per stat: 0 absent (empty counts as absent; a payload over 65535 bytes has no OOL
        # encoding, so it is dropped, which only costs pruning power), 1 out of line, 2 inline.
        # n - 1 read unsigned puts n <= 0 above every bound: one compare per class.
        nm1 = (n.astype(np.int64, copy=False) - 1).view(np.uint64)
        has = nm1 < np.uint64(L.OOL_MAX_LENGTH)
        inl = nm1 < np.uint64(L.INLINE_STAT_MAX)
        if (has & ((start < 0) | (start + n > self.data.shape[0]))).any():
            raise PmError("stat bytes reference outside their buffer")
        kind = has.view(np.uint8) + inl.view(np.uint8)
        code = kind[..., 0] * np.uint8(3) + kind[..., 1]
        flags = (src_flags & _KIND_KEEP.take(code)) | _KIND_SET.take(code)
        # Inline: the payload's bytes in the low bytes of the slot, the rest zero; the mask of
        # m = 0 clears what was loaded for the others (offset 0 for them: always loadable).
        m = n * inl
        slots = self.load(start * inl, checked=True)
        slots &= _LOW_BYTES.take(m)
        m8 = m.astype(np.uint8)
        sizes = m8[..., 0] | (m8[..., 1] << np.uint8(4))
        ool = kind == 1
        return flags, sizes, slots, (n * ool if ool.any() else None)

    def all(self, rows=None):
        """block() over every row group (or `rows`), as whole arrays: fields dict, OOL lengths."""
        R, C = self.d.chunks.shape
        nrows = R if rows is None else len(rows)
        f = {"stat_flags": np.empty((nrows, C), np.uint8), "stat_sizes": np.empty((nrows, C), np.uint8)}
        slots = np.empty((nrows, C, 2), L.U64)
        ool_len = np.zeros((nrows, C, 2), np.int64)
        for i0 in range(0, nrows, self.step):
            i1 = min(nrows, i0 + self.step)
            sel = slice(i0, i1) if rows is None else rows[i0:i1]
            f["stat_flags"][i0:i1], f["stat_sizes"][i0:i1], slots[i0:i1], ool = self.block(sel)
            if ool is not None:
                ool_len[i0:i1] = ool
        f["min_stat"], f["max_stat"] = slots[..., 0], slots[..., 1]
        return f, ool_len


def _stat_fields(d: Description) -> tuple[dict, np.ndarray, np.ndarray]:
    """The derived fields of the final chunk records as (R, C) arrays {stat_flags, stat_sizes,
    min_stat, max_stat} (slots hold inline stats, 0 elsewhere), the OOL lengths (R, C, 2) and
    the stat bytes buffer (1-D uint8) that `d.stats` addresses."""
    stats = _Stats(d)
    f, ool_len = stats.all()
    return f, ool_len, stats.data


def _encode_chunks(d: Description) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Final chunk records (stat slots filled for inline stats; OOL references are placed by
    the block encoder), the OOL lengths (R, C, 2) and the stat bytes buffer."""
    f, ool_len, data = _stat_fields(d)
    ch = d.chunks.copy()
    ch["reserved"] = 0
    for name in _STAT_FIELDS:
        ch[name] = f[name]
    return ch, ool_len, data


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated aranges [s, s + n) for each (s, n) with n > 0, as one int64 index array."""
    keep = lengths > 0
    starts, lengths = starts[keep].astype(np.int64), lengths[keep].astype(np.int64)
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    first = np.cumsum(lengths) - lengths  # where each range begins in the output
    return np.repeat(starts - first, lengths) + np.arange(total, dtype=np.int64)


def encode_blocks(d: Description, rows, base: int):
    """Encode the blocks of row groups `rows` laid out from absolute offset `base`.

    Returns (bytes from base, absolute block offsets (len(rows),), inline bloom entries
    (len(rows), B) as u32 offset >> 3, 0 = absent).
    """
    plan = _BlockPlan(d, rows, base)
    out = np.empty(plan.nbytes, np.uint8)
    plan.fill(out)
    return out.tobytes(), plan.offsets, plan.entries


class _BlockPlan:
    """Layout of the blocks of row groups `rows` from absolute offset `base`: offsets, inline
    bloom entries and size (`nbytes`, from base) first; `fill(out)` then writes the bytes into a
    caller's buffer, so `encode_file` assembles the file without intermediate copies.

    Dense case (no OOL bytes anywhere): the blocks are a (rows, 8 + 64 * columns) grid after the
    alignment pad, and `fill_dense` writes any run of rows, computing their stats as it goes
    (the streaming writer writes them piece by piece).

    Otherwise, per row group: the OOL region holds per column min, max, then (pad to 8 +
    bloom). Row groups with OOL stats only are laid out at once (their offsets are a prefix sum
    over (column, min/max)); the ones with inline bitsets one by one.
    """

    def __init__(self, d: Description, rows, base: int):
        self.d = d
        rows = self.rows = np.asarray(rows, np.int64)
        nrows = len(rows)
        ncols = self.ncols = len(d.columns)
        bloom_cols = bloom_columns_of(d)
        self.stats = stats = _Stats(d)
        self.stat_data = stats.data
        self.every = nrows == d.chunks.shape[0] and (nrows == 0 or bool((rows == np.arange(nrows)).all()))
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
        bloom_row = (bl_len >= 0).any(axis=1)
        stat_row = stats.ool_rows(None if self.every else rows) & ~bloom_row
        self.dense = not (stat_row.any() or bloom_row.any())
        self.base = base
        start = L.align8(base)
        if self.dense:
            self.offsets = start + np.arange(nrows, dtype=np.int64) * fixed
            self.nbytes = start - base + nrows * fixed
            self.entries = np.zeros((nrows, len(bloom_cols)), np.uint32)
            self._check_reach()
            return

        f, ool_len = stats.all(None if self.every else rows)
        self.fields = f
        ool_size = np.zeros(nrows, np.int64)
        self.ool_parts = {}  # bloom rows: i -> bytes of the OOL region
        bloom_rel = {}  # (i, c) -> offset of the [i32 LENGTH] relative to the OOL region
        self.stat_idx = stat_idx = np.nonzero(stat_row)[0]
        if stat_idx.size:
            lens = self.stat_lens = ool_len[stat_idx].reshape(len(stat_idx), 2 * ncols)
            rel_off = self.stat_rel = np.cumsum(lens, axis=1) - lens
            ref = ((rel_off << L.OOL_LENGTH_BITS) | lens).reshape(len(stat_idx), ncols, 2)
            has = lens.reshape(len(stat_idx), ncols, 2) > 0
            ool_size[stat_idx] = lens.sum(axis=1)
            for k, slot in ((0, "min_stat"), (1, "max_stat")):
                f[slot][stat_idx] = np.where(has[..., k], ref[..., k].astype(L.U64), f[slot][stat_idx])
        stat_data = self.stat_data
        for i in np.nonzero(bloom_row)[0]:
            r = rows[i]
            buf = bytearray()
            for c in range(ncols):
                for k, slot in ((0, "min_stat"), (1, "max_stat")):
                    n = int(ool_len[i, c, k])
                    if n:
                        s = int(d.stats.start[r, c, k])
                        f[slot][i, c] = (len(buf) << L.OOL_LENGTH_BITS) | n
                        buf += stat_data[s : s + n].tobytes()
                if bl_len[i, c] >= 0:
                    # Bitsets sit at 8-aligned offsets because footer entries store offset >> 3;
                    # fixed = 8 + 64*ncols keeps the region itself 8-aligned.
                    buf += b"\0" * (-len(buf) % L.BLOCK_ALIGN)
                    bloom_rel[(i, c)] = len(buf)
                    s = int(d.blooms.start[r, c])
                    n = int(bl_len[i, c])
                    buf += _I32.pack(n) + np.asarray(d.blooms.data[s : s + n], np.uint8).tobytes()
            self.ool_parts[i] = bytes(buf)
            ool_size[i] = len(buf)
        self.ool_size = ool_size

        # Blocks start 8-aligned; a block starting aligned ends where the next aligned start is
        # align8(end), so offsets follow from a prefix sum of aligned sizes.
        sizes = (fixed + ool_size + (L.BLOCK_ALIGN - 1)) & ~(L.BLOCK_ALIGN - 1)
        self.rel = rel = np.cumsum(sizes) - sizes
        total_end = start + (int(rel[-1]) + fixed + int(ool_size[-1]) if nrows else 0)
        self.nbytes = total_end - base
        self.offsets = offsets = start + rel
        entries = np.zeros((nrows, len(bloom_cols)), np.uint32)
        for (i, c), brel in bloom_rel.items():
            entries[i, bloom_cols.index(c)] = (int(offsets[i]) + fixed + brel) >> L.BLOCK_OFFSET_SHIFT
        self.entries = entries
        self._check_reach()

    def _check_reach(self):
        if len(self.rows) and int(self.offsets[-1]) >> L.BLOCK_OFFSET_SHIFT > 0xFFFFFFFF:
            raise PmError("a row group block lies beyond 32 GiB; block offsets are u32 << 3")

    @property
    def pad(self) -> int:
        """Zero bytes before the first block (from base to the 8-aligned start)."""
        return L.align8(self.base) - self.base

    def _nr_bytes(self, sel):
        return np.asarray(self.d.num_rows, np.uint64)[sel].astype(L.U64).view(np.uint8).reshape(-1, 8)

    def fill_dense(self, out: np.ndarray, i0: int, i1: int) -> None:
        """Dense case: write blocks i0..i1 (positions in `rows`) into `out`, (i1 - i0) * fixed bytes."""
        d, fixed, ncols = self.d, self.fixed, self.ncols
        grid = out.reshape(i1 - i0, fixed)
        sel = slice(i0, i1) if self.every else self.rows[i0:i1]
        grid[:, :8] = self._nr_bytes(sel)
        grid[:, 8:] = np.ascontiguousarray(d.chunks[sel]).view(np.uint8).reshape(i1 - i0, L.CHUNK_SIZE * ncols)
        recs = grid[:, 8:].view(L.CHUNK_DTYPE)
        recs["reserved"] = 0
        step = self.stats.step
        for j0 in range(i0, i1, step):
            j1 = min(i1, j0 + step)
            sub = slice(j0, j1) if self.every else self.rows[j0:j1]
            flags, sizes, slots, _ = self.stats.block(sub)
            r = recs[j0 - i0 : j1 - i0]
            r["stat_flags"], r["stat_sizes"] = flags, sizes
            r["min_stat"], r["max_stat"] = slots[..., 0], slots[..., 1]

    def fill(self, out: np.ndarray) -> None:
        """Write the `nbytes` bytes of the blocks (from `base`) into the uint8 array `out`."""
        d, rows, fixed, ncols = self.d, self.rows, self.fixed, self.ncols
        nrows = len(rows)
        o = self.pad
        out[:o] = 0
        if self.dense:
            self.fill_dense(out[o:], 0, nrows)
            return
        out[:] = 0
        rel = self.rel
        recs = np.array(d.chunks if self.every else d.chunks[rows], L.CHUNK_DTYPE, order="C")  # a copy
        recs["reserved"] = 0
        for name in _STAT_FIELDS:
            recs[name] = self.fields[name]
        nr_bytes = self._nr_bytes(rows)
        chunk_bytes = recs.view(np.uint8).reshape(nrows, L.CHUNK_SIZE * ncols)
        for i in range(nrows):
            p = o + int(rel[i])
            out[p : p + 8] = nr_bytes[i]
            out[p + 8 : p + fixed] = chunk_bytes[i]
            part = self.ool_parts.get(i)
            if part is not None:
                out[p + fixed : p + fixed + len(part)] = np.frombuffer(part, np.uint8)
        stat_idx = self.stat_idx
        if stat_idx.size:
            # Every OOL stat of those row groups in one gather / scatter.
            lens = self.stat_lens
            src_start = d.stats.start[rows[stat_idx]].reshape(len(stat_idx), 2 * ncols)
            dst = (o + rel[stat_idx] + fixed)[:, None] + self.stat_rel
            out[_ranges(dst.reshape(-1), lens.reshape(-1))] = \
                self.stat_data[_ranges(src_start.reshape(-1), lens.reshape(-1))]


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


def _check_parquet_footer(d: Description) -> None:
    if not 0 <= d.parquet_footer_length <= 0xFFFFFFFF or d.parquet_footer_offset < 0:
        raise PmError(f"Parquet footer ({d.parquet_footer_offset}, {d.parquet_footer_length}) out of range")


def encode_file(d: Description) -> bytes:
    """All bytes of a fresh `_pm` file for `d`, size field included."""
    return _FileLayout(d).encode().tobytes()


def _encode_file(d: Description) -> np.ndarray:
    """encode_file as a uint8 array, assembled in one buffer without intermediate copies."""
    return _FileLayout(d).encode()


# Blocks a streaming write hands to the kernel at a time (see _FileLayout.write).
STREAM_PIECE_BYTES = 1 << 20


class _FileLayout:
    """A fresh file for `d`: header, block plan, footer body and total size, known before any
    block byte is produced. `encode()` gives all bytes in one buffer; `write(fd, ops)` writes
    the same bytes, streaming large dense block regions piece by piece (each piece is written
    and its writeback started while the next one is computed, so the final fsync has little
    left to wait for)."""

    def __init__(self, d: Description):
        _check_description(d)
        _check_parquet_footer(d)
        head = header_bytes(d)
        rows = np.arange(d.row_group_count)
        self.plan = plan = _BlockPlan(d, rows, len(head))
        bloom_table = _bloom_table(d, rows, plan.entries)
        self.footer_start = len(head) + plan.nbytes
        self.body = footer_body(d, plan.offsets, bloom_table, 0)
        self.crc_pos = self.footer_start + len(self.body)
        self.size = self.crc_pos + L.CRC_SIZE + L.TRAILER_SIZE
        self.head = _U64.pack(self.size) + head[L.PM_SIZE_BYTES :]

    def _tail(self, crc) -> bytes:
        return _U32.pack(crc) + _U32.pack(len(self.body) + L.CRC_SIZE)

    def encode(self) -> np.ndarray:
        head, plan = self.head, self.plan
        out = np.empty(self.size, np.uint8)
        out[: len(head)] = np.frombuffer(head, np.uint8)
        plan.fill(out[len(head) : self.footer_start])
        out[self.footer_start : self.crc_pos] = np.frombuffer(self.body, np.uint8)
        crc = crc32(out, L.CRC_START, self.crc_pos)
        out[self.crc_pos :] = np.frombuffer(self._tail(crc), np.uint8)
        return out

    def write(self, fd, ops) -> None:
        plan = self.plan
        nrows = len(plan.rows)
        per_piece = max(1, STREAM_PIECE_BYTES // plan.fixed)
        if not plan.dense or nrows <= 2 * per_piece:
            ops.pwrite(fd, memoryview(self.encode()), 0)
            return
        first = self.head + bytes(plan.pad)
        ops.pwrite(fd, first, 0)
        crc = crc32(first, L.CRC_START, len(first))
        pos = len(first)
        buf = np.empty(per_piece * plan.fixed, np.uint8)  # reused: pwrite copies it out
        start_writeback = getattr(ops, "start_writeback", None)  # a hint; seams may lack it
        for i0 in range(0, nrows, per_piece):
            i1 = min(nrows, i0 + per_piece)
            piece = buf[: (i1 - i0) * plan.fixed]
            plan.fill_dense(piece, i0, i1)
            ops.pwrite(fd, piece, pos)
            if start_writeback is not None:
                start_writeback(fd, pos, len(piece))
            crc = crc32(piece, 0, len(piece), crc)
            pos += len(piece)
        assert pos == self.footer_start
        crc = crc32(self.body, 0, len(self.body), crc)
        ops.pwrite(fd, self.body + self._tail(crc), pos)


def _bloom_table(d: Description, rows, inline_entries):
    if not bloom_columns_of(d):
        return None
    return external_bloom_entries(d, rows) if d.bloom_external else inline_entries


# --- file I/O -------------------------------------------------------------------------------


_SFR = []


def _sync_file_range():
    """libc's sync_file_range through ctypes (Python's os module does not expose it), or None."""
    if not _SFR:
        f = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                f = ctypes.CDLL(None, use_errno=True).sync_file_range
                f.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
                f.restype = ctypes.c_int
            except (OSError, AttributeError):
                f = None
        _SFR.append(f)
    return _SFR[0]


class FileOps:
    """The writer's I/O seam. Crash tests substitute one that counts and kills at boundaries."""

    def open_rw(self, path):
        return os.open(path, os.O_RDWR)

    def pwrite(self, fd, data, offset):
        view = memoryview(data)
        while view:
            n = os.pwrite(fd, view, offset)
            view = view[n:]
            offset += n

    def fsync(self, fd):
        os.fsync(fd)

    def start_writeback(self, fd, offset, length):
        """Ask the kernel to start writing [offset, offset + length) back now, without waiting
        (Linux sync_file_range(SYNC_FILE_RANGE_WRITE)); a later fsync then has less to wait for.
        Only a hint: no durability boundary, a no-op where unsupported."""
        f = _sync_file_range()
        if f is not None:
            f(fd, offset, length, 2)  # SYNC_FILE_RANGE_WRITE; a failure is harmless

    def truncate(self, fd, size):
        os.ftruncate(fd, size)

    def close(self, fd):
        os.close(fd)

    def replace(self, src, dst):
        os.replace(src, dst)

    def fsync_dir(self, path):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


DEFAULT_OPS = FileOps()


def write_new(pm_path, d: Description, *, ops: FileOps = DEFAULT_OPS) -> int:
    """Create (or replace) `pm_path` atomically: temp file in the same directory, fsync, rename.

    Readers see the old file or the new one, never a partial one. Returns the committed size.
    """
    layout = _FileLayout(d)
    pm_path = os.fspath(pm_path)
    directory = os.path.dirname(os.path.abspath(pm_path))
    fd_tmp, tmp = tempfile.mkstemp(prefix=".~" + os.path.basename(pm_path) + ".", dir=directory)
    os.close(fd_tmp)
    try:
        fd = ops.open_rw(tmp)
        try:
            layout.write(fd, ops)
            ops.fsync(fd)
        finally:
            ops.close(fd)
        ops.replace(tmp, pm_path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    ops.fsync_dir(directory)
    return layout.size


def write_update(pm_path, d: Description, *, anchor_parquet_size=None, ops: FileOps = DEFAULT_OPS) -> int:
    """Update mode: append new / changed blocks and a footer, then publish the size at offset 0.

    The anchor is the snapshot being updated (its committed size becomes PREV); new bytes go at
    the append base (the header's current size), so an orphaned footer between the two stays
    untouched and unreachable. Returns the new committed size.
    """
    from .reader import open as open_pm  # reader imports nothing from here; avoid a cycle at import

    _check_description(d)
    _check_parquet_footer(d)
    with open_pm(pm_path, verify=True) as latest:
        append_base = latest.pm_size
    with open_pm(pm_path, parquet_size=anchor_parquet_size, verify=True) as old:
        anchor = old.snapshot_pm_size
        _check_same_schema(old, d)
        old_rows = old.row_group_count
        if d.row_group_count < old_rows:
            raise PmError(f"update has {d.row_group_count} row groups, fewer than the snapshot's {old_rows}; "
                          "removing row groups needs a rewrite (qdbpm.compact / generate)")
        old_offsets = old.block_offsets.copy()
        old_bloom = None if old.bloom_table is None else old.bloom_table.copy()
        old_first = old.chunks["byte_range_start"][:, 0].copy() if old.column_count else None
        old_crc = old.stored_crc
        old_crc_pos = old.crc_offset
        header_bloom_cols = list(old.bloom_columns)
        header_external = bool(old.feature_flags & L.FEATURE_BLOOM_FILTERS_EXTERNAL)
    # The header (bloom column list, squash tracker) is fixed until a rewrite.
    d = _with_header_of(d, header_bloom_cols, header_external)

    unchanged = np.zeros(d.row_group_count, bool)
    # A row group is unchanged when its column 0 chunk starts where it did (docs/format.md#update-mode).
    if len(d.columns) and old_rows:
        new_first = d.chunks["byte_range_start"][:old_rows, 0]
        unchanged[:old_rows] = new_first == old_first
    changed_rows = np.nonzero(~unchanged)[0]

    blocks, new_offsets, inline_entries = encode_blocks(d, changed_rows, append_base)
    offsets = np.zeros(d.row_group_count, np.int64)
    offsets[unchanged] = old_offsets[unchanged[:old_rows]] if old_rows else []
    offsets[changed_rows] = new_offsets
    bloom_table = None
    if header_bloom_cols:
        if header_external:
            bloom_table = np.zeros((d.row_group_count, len(header_bloom_cols)), L.BLOOM_EXTERNAL_DTYPE)
            bloom_table[changed_rows] = external_bloom_entries(d, changed_rows)
        else:
            bloom_table = np.zeros((d.row_group_count, len(header_bloom_cols)), L.U32)
            bloom_table[changed_rows] = inline_entries
        if old_rows:
            keep = np.nonzero(unchanged[:old_rows])[0]
            bloom_table[keep] = old_bloom[keep]
    body = footer_body(d, offsets, bloom_table, anchor)
    new_bytes = blocks + body
    crc_pos = append_base + len(new_bytes)

    fd = ops.open_rw(pm_path)
    try:
        # CRC over [8, crc_pos) of the whole physical file: resume from the anchor's stored
        # (and just verified) CRC and cover everything after it, orphaned bytes included.
        gap = os.pread(fd, append_base - old_crc_pos, old_crc_pos)
        if len(gap) != append_base - old_crc_pos:
            raise CorruptFileError(f"{pm_path}: file shorter than its committed size {append_base}")
        crc = crc32(gap, 0, len(gap), old_crc)
        crc = crc32(new_bytes, 0, len(new_bytes), crc)
        tail = _U32.pack(crc) + _U32.pack(len(body) + L.CRC_SIZE)
        ops.pwrite(fd, new_bytes + tail, append_base)
        new_size = crc_pos + len(tail)
        # Bytes past the new end were never published (a crashed writer's): drop them.
        ops.truncate(fd, new_size)
        ops.fsync(fd)
        ops.pwrite(fd, _U64.pack(new_size), L.PM_SIZE_OFFSET)
        ops.fsync(fd)
    finally:
        ops.close(fd)
    return new_size


def _with_header_of(d: Description, bloom_cols, external) -> Description:
    return dataclasses.replace(d, bloom_columns=bloom_cols, bloom_external=external)


def _check_same_schema(old, d: Description) -> None:
    if old.column_count != len(d.columns):
        raise PmError(f"update has {len(d.columns)} columns, the file has {old.column_count}; a schema change needs a rewrite")
    for i, c in enumerate(d.columns):
        o = old.columns[i]
        got = (old.column_names[i], int(o["type"]), int(o["physical_type"]), int(o["fixed_byte_len"]))
        want = (c.name, c.type, c.physical_type, c.fixed_byte_len)
        if got != want:
            raise PmError(f"update column {i} is {want}, the file has {got}; a schema change needs a rewrite")
