"""Write `_pm` files: fresh (atomic temp + fsync + rename), in update mode (append at the base,
new footer chaining to the anchor, publish by patching the size at offset 0 last), or compacted.

The bytes come from pm/encoder.py; every I/O call goes through `ops` (pm/fileops.py), the seam
crash tests replace. `write_new` streams a large dense file in pieces, starting each piece's
writeback while the next is computed (`FileOps.start_writeback`), so its fsync has little left
to wait for.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile

import numpy as np

from . import layout as L
from .crc import crc32
from .description import Description
from .encoder import FileLayout, check_description, encode_blocks, external_bloom_entries, footer_body, footer_tail
from .fileops import DEFAULT_OPS, FileOps
from .reader import PmFile
from ..errors import CorruptFileError, PmError

# Blocks a streaming write hands to the kernel at a time.
STREAM_PIECE_BYTES = 1 << 20


def first_chunk_starts(chunks) -> np.ndarray:
    """Where each row group's column-0 chunk starts: what `unchanged_row_groups` compares (a copy,
    so it outlives the file it was read from)."""
    if not chunks.shape[1]:
        return np.zeros(0, np.uint64)
    return np.array(chunks["byte_range_start"][:, 0], np.uint64)


def unchanged_row_groups(old_starts, new_chunks) -> np.ndarray:
    """The one rule for update mode (docs/format.md#update-mode): a row group is unchanged when
    its column-0 chunk starts where it did in the old snapshot (`old_starts`, from
    `first_chunk_starts`). Bool per row group of `new_chunks`; rows past the old ones are new."""
    out = np.zeros(new_chunks.shape[0], bool)
    n = min(len(old_starts), len(out))
    if n and new_chunks.shape[1]:
        out[:n] = new_chunks["byte_range_start"][:n, 0] == old_starts[:n]
    return out


def _write_layout(layout: FileLayout, fd, ops) -> None:
    """The bytes of `layout.encode()`, written at offset 0; a large block region streamed piece
    by piece, each piece written and its writeback started while the next is computed."""
    plan = layout.plan
    nrows = len(plan.rows)
    total = plan.span(0, nrows)[1]
    if total <= 2 * STREAM_PIECE_BYTES:
        ops.pwrite(fd, memoryview(layout.encode()), 0)
        return
    # Pieces of whole blocks of about STREAM_PIECE_BYTES each.
    cuts = np.unique(np.r_[np.searchsorted(plan.rel, np.arange(0, total, STREAM_PIECE_BYTES)), nrows]).tolist()
    spans = [plan.span(i0, i1) for i0, i1 in zip(cuts[:-1], cuts[1:])]
    first = layout.head + bytes(plan.pad)
    ops.pwrite(fd, first, 0)
    crc = crc32(first, L.CRC_START, len(first))
    pos = len(first)
    buf = np.empty(max(e - s for s, e in spans), np.uint8)  # reused: pwrite copies it out
    start_writeback = getattr(ops, "start_writeback", None)  # a hint; seams may lack it
    for (i0, i1), (s, e) in zip(zip(cuts[:-1], cuts[1:]), spans):
        piece = buf[: e - s]
        plan.fill_rows(piece, i0, i1)
        ops.pwrite(fd, piece, pos)
        if start_writeback is not None:
            start_writeback(fd, pos, len(piece))
        crc = crc32(piece, 0, len(piece), crc)
        pos += len(piece)
    assert pos == layout.footer_start
    crc = crc32(layout.body, 0, len(layout.body), crc)
    ops.pwrite(fd, layout.body + layout.tail(crc), pos)


def write_new(pm_path, d: Description, *, ops: FileOps = DEFAULT_OPS) -> int:
    """Create (or replace) `pm_path` atomically: temp file in the same directory, fsync, rename.

    Readers see the old file or the new one, never a partial one. Returns the committed size.
    """
    layout = FileLayout(d)
    pm_path = os.fspath(pm_path)
    directory = os.path.dirname(os.path.abspath(pm_path))
    fd_tmp, tmp = tempfile.mkstemp(prefix=".~" + os.path.basename(pm_path) + ".", dir=directory)
    os.close(fd_tmp)
    try:
        fd = ops.open_rw(tmp)
        try:
            _write_layout(layout, fd, ops)
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
    check_description(d)
    with PmFile(pm_path) as latest:
        append_base = latest.pm_size
    with PmFile(pm_path, parquet_size=anchor_parquet_size) as old:
        anchor = old.snapshot_pm_size
        _check_same_schema(old, d)
        old_rows = old.row_group_count
        if d.row_group_count < old_rows:
            raise PmError(f"update has {d.row_group_count} row groups, fewer than the snapshot's {old_rows}; "
                          "removing row groups needs a rewrite (qdbpm.compact / generate)")
        old_offsets = old.block_offsets.copy()
        old_bloom = None if old.bloom_table is None else old.bloom_table.copy()
        old_starts = first_chunk_starts(old.chunks)
        old_crc = old.stored_crc
        old_crc_pos = old.crc_offset
        header_bloom_cols = list(old.bloom_columns)
        header_external = old.bloom_external
    # The header (bloom column list, squash tracker) is fixed until a rewrite.
    d = _with_header_of(d, header_bloom_cols, header_external)

    unchanged = unchanged_row_groups(old_starts, d.chunks)
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
        tail = footer_tail(crc, len(body))
        ops.pwrite(fd, new_bytes + tail, append_base)
        new_size = crc_pos + len(tail)
        # Bytes past the new end were never published (a crashed writer's): drop them.
        ops.truncate(fd, new_size)
        ops.fsync(fd)
        ops.pwrite(fd, new_size.to_bytes(L.PM_SIZE_BYTES, "little"), L.PM_SIZE_OFFSET)
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


def compact(pm_path, out_path=None) -> int:
    """Rewrite the latest snapshot as a fresh file (dead blocks and old footers dropped).

    Older snapshots are gone afterwards: QuestDB compacts into a new partition directory, so
    pass `out_path` there; without it the file is replaced atomically in place.
    """
    with PmFile(pm_path) as pm:
        d = pm.to_description()
    return write_new(out_path or pm_path, d)
