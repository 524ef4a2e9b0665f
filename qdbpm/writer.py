"""Write `_pm` files: fresh (atomic temp + fsync + rename) or in update mode (append at the base,
new footer chaining to the anchor, publish by patching the size at offset 0 last).

Byte layout decisions follow implementation-notes.md; `layout` holds every offset and flag.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import tempfile

import numpy as np

from . import layout as L
from .crc import crc32
from .desc import Description
from .errors import CorruptFileError, PmError

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


def _encode_chunks(d: Description) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Final chunk records (stat slots filled for inline stats) and the OOL lengths (R, C, 2)."""
    ch = d.chunks.copy()
    keep = L.STAT_MIN_EXACT | L.STAT_MAX_EXACT | L.STAT_NULL_COUNT_PRESENT | L.STAT_DISTINCT_COUNT_PRESENT
    flags = ch["stat_flags"] & keep
    ch["min_stat"] = 0
    ch["max_stat"] = 0
    ch["stat_sizes"] = 0
    ch["reserved"] = 0
    ool_len = np.zeros(ch.shape + (2,), np.int64)
    if d.stats is None:
        ch["stat_flags"] = flags & np.uint8(0xFF & ~(L.STAT_MIN_EXACT | L.STAT_MAX_EXACT))
        return ch, ool_len, ool_len
    st = d.stats
    if st.length.shape != ch.shape + (2,):
        raise PmError(f"stats have shape {st.length.shape}, expected {ch.shape + (2,)}")
    data = np.concatenate([np.asarray(st.data, np.uint8).reshape(-1), np.zeros(8, np.uint8)])
    sizes = np.zeros(ch.shape, np.uint8)
    for k, (slot, present, inlined, exact, shift) in enumerate(
        (
            ("min_stat", L.STAT_MIN_PRESENT, L.STAT_MIN_INLINED, L.STAT_MIN_EXACT, 0),
            ("max_stat", L.STAT_MAX_PRESENT, L.STAT_MAX_INLINED, L.STAT_MAX_EXACT, 4),
        )
    ):
        n = st.length[..., k]
        # Empty counts as absent; a payload over 65535 bytes has no OOL encoding, so it is
        # dropped, which only costs pruning power.
        has = (n > 0) & (n <= L.OOL_MAX_LENGTH)
        inl = has & (n <= L.INLINE_STAT_MAX)
        ool = has & ~inl
        s_k = st.start[..., k]
        if s_k.size and (np.any(s_k[has] < 0) or np.any(s_k[has] + n[has] > len(data) - 8)):
            raise PmError("stat bytes reference outside their buffer")
        flags = np.where(has, flags | present, flags & np.uint8(0xFF & ~exact)).astype(np.uint8)
        flags = np.where(inl, flags | inlined, flags).astype(np.uint8)
        idx = np.nonzero(inl)
        if idx[0].size:
            s = s_k[idx]
            m = n[idx]
            gather = data[s[:, None] + np.arange(8)]
            gather[np.arange(8)[None, :] >= m[:, None]] = 0
            ch[slot][idx] = gather.view(L.U64).reshape(-1)
            sizes[idx] |= (m << shift).astype(np.uint8)
        ool_len[..., k] = np.where(ool, n, 0)
    ch["stat_flags"] = flags
    ch["stat_sizes"] = sizes
    return ch, ool_len, data


def encode_blocks(d: Description, rows, base: int):
    """Encode the blocks of row groups `rows` laid out from absolute offset `base`.

    Returns (bytes from base, absolute block offsets (len(rows),), inline bloom entries
    (len(rows), B) as u32 offset >> 3, 0 = absent).
    """
    rows = np.asarray(rows, np.int64)
    ncols = len(d.columns)
    bloom_cols = bloom_columns_of(d)
    ch, ool_len, stat_data = _encode_chunks(d)
    ch = ch[rows]
    ool_len = ool_len[rows]
    fixed = L.block_size(ncols)
    inline_blooms = d.blooms is not None and not d.bloom_external and bloom_cols
    bl_len = np.full((len(rows), ncols), -1, np.int64)
    if inline_blooms:
        sel = np.asarray(bloom_cols)
        bl_len[:, sel] = d.blooms.length[rows][:, sel]
        bad = (bl_len >= 0) & ((bl_len < L.SBBF_BLOCK_BYTES) | (bl_len % L.SBBF_BLOCK_BYTES != 0))
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise PmError(f"bloom bitset of row group {rows[r]} column {c} is {bl_len[r, c]} bytes; "
                          "a split-block filter is a positive multiple of 32")
    has_ool = (ool_len.sum(axis=(1, 2)) > 0) | (bl_len >= 0).any(axis=1)

    # OOL region per row group that has one: per column min, max, then (pad to 8 + bloom).
    ool_parts = {}
    ool_size = np.zeros(len(rows), np.int64)
    refs = {}  # (i, c, k) -> OOL reference
    bloom_rel = {}  # (i, c) -> offset of the [i32 LENGTH] relative to the OOL region
    for i in np.nonzero(has_ool)[0]:
        r = rows[i]
        buf = bytearray()
        for c in range(ncols):
            for k in (0, 1):
                n = int(ool_len[i, c, k])
                if n:
                    s = int(d.stats.start[r, c, k])
                    refs[(i, c, k)] = (len(buf) << L.OOL_LENGTH_BITS) | n
                    buf += stat_data[s : s + n].tobytes()
            if bl_len[i, c] >= 0:
                # Bitsets sit at 8-aligned offsets because footer entries store offset >> 3;
                # fixed = 8 + 64*ncols keeps the region itself 8-aligned.
                buf += b"\0" * (-len(buf) % L.BLOCK_ALIGN)
                bloom_rel[(i, c)] = len(buf)
                s = int(d.blooms.start[r, c])
                n = int(bl_len[i, c])
                buf += _I32.pack(n) + np.asarray(d.blooms.data[s : s + n], np.uint8).tobytes()
        ool_parts[i] = bytes(buf)
        ool_size[i] = len(buf)
    for (i, c, k), ref in refs.items():
        ch[i, c]["min_stat" if k == 0 else "max_stat"] = ref

    # Blocks start 8-aligned; a block starting aligned ends where the next aligned start is
    # align8(end), so offsets follow from a prefix sum of aligned sizes.
    start = L.align8(base)
    sizes = np.asarray([L.align8(fixed + s) for s in ool_size], np.int64) if len(rows) else np.zeros(0, np.int64)
    rel = np.concatenate([[0], np.cumsum(sizes)[:-1]]) if len(rows) else np.zeros(0, np.int64)
    total_end = start + (int(rel[-1]) + fixed + int(ool_size[-1]) if len(rows) else 0)
    out = np.zeros(total_end - base, np.uint8)
    o = start - base
    chunk_bytes = ch.view(np.uint8).reshape(len(rows), L.CHUNK_SIZE * ncols)
    num_rows = np.asarray(d.num_rows, np.uint64)[rows]
    if not has_ool.any() and len(rows):
        grid = out[o : o + len(rows) * fixed].reshape(len(rows), fixed)
        grid[:, :8] = num_rows.astype(L.U64).view(np.uint8).reshape(-1, 8)
        grid[:, 8:] = chunk_bytes
    else:
        nr_bytes = num_rows.astype(L.U64).view(np.uint8).reshape(-1, 8)
        for i in range(len(rows)):
            p = o + int(rel[i])
            out[p : p + 8] = nr_bytes[i]
            out[p + 8 : p + fixed] = chunk_bytes[i]
            if i in ool_parts:
                out[p + fixed : p + fixed + ool_size[i]] = np.frombuffer(ool_parts[i], np.uint8)
    offsets = start + rel
    entries = np.zeros((len(rows), len(bloom_cols)), np.uint32)
    for (i, c), brel in bloom_rel.items():
        entries[i, bloom_cols.index(c)] = (int(offsets[i]) + fixed + brel) >> L.BLOCK_OFFSET_SHIFT
    if len(rows) and int(offsets[-1]) >> L.BLOCK_OFFSET_SHIFT > 0xFFFFFFFF:
        raise PmError("a row group block lies beyond 32 GiB; block offsets are u32 << 3")
    return out.tobytes(), offsets, entries


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
    _check_description(d)
    _check_parquet_footer(d)
    head = header_bytes(d)
    rows = np.arange(d.row_group_count)
    blocks, offsets, inline_entries = encode_blocks(d, rows, len(head))
    bloom_table = _bloom_table(d, rows, inline_entries)
    footer_start = len(head) + len(blocks)
    body = footer_body(d, offsets, bloom_table, 0)
    out = bytearray(head + blocks + body)
    crc = crc32(out, L.CRC_START, len(out))
    out += _U32.pack(crc) + _U32.pack(len(body) + L.CRC_SIZE)
    out[0:8] = _U64.pack(len(out))
    assert footer_start + len(body) + 8 == len(out)
    return bytes(out)


def _bloom_table(d: Description, rows, inline_entries):
    if not bloom_columns_of(d):
        return None
    return external_bloom_entries(d, rows) if d.bloom_external else inline_entries


# --- file I/O -------------------------------------------------------------------------------


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
    data = encode_file(d)
    pm_path = os.fspath(pm_path)
    directory = os.path.dirname(os.path.abspath(pm_path))
    fd_tmp, tmp = tempfile.mkstemp(prefix=".~" + os.path.basename(pm_path) + ".", dir=directory)
    os.close(fd_tmp)
    try:
        fd = ops.open_rw(tmp)
        try:
            ops.pwrite(fd, data, 0)
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
    return len(data)


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
    # A row group is unchanged when its column 0 chunk starts where it did (notes: update mode).
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
