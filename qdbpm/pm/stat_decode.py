"""Stat slots read back: the MIN_STAT / MAX_STAT slots of chunk records -> the verbatim Parquet
stat bytes -> values. The reading side of docs/format.md#statistics (stat_slots.py is the
writing side, which places stats by length alone).

A present stat is inline (its bytes at the low end of the u64 slot, its length in the STAT_SIZES
nibble) or out-of-line (the slot holds `(offset << 16) | length` into the block's out-of-line
region). An inline stat with a zero nibble is read at the physical width.
"""

from __future__ import annotations

import struct

import numpy as np

from . import layout as L
from .description import ByteRefs

# (slot field, PRESENT bit, INLINED bit, STAT_SIZES nibble shift) of the min and of the max.
SLOTS = (("min_stat", L.STAT_MIN_PRESENT, L.STAT_MIN_INLINED, 0),
         ("max_stat", L.STAT_MAX_PRESENT, L.STAT_MAX_INLINED, L.STAT_SIZES_MAX_SHIFT))


def zero_nibble_width(physical_type: int) -> int:
    """Bytes of an inline stat whose STAT_SIZES nibble is 0: 1 BOOLEAN, 4 INT32 / FLOAT, 8 otherwise."""
    return min(L.PHYSICAL_WIDTH.get(physical_type, L.INLINE_STAT_MAX), L.INLINE_STAT_MAX)


def ool_start(block_offset, column_count: int):
    """Where a block's out-of-line region starts (int, or an int64 array of block offsets)."""
    return block_offset + L.block_size(column_count)


def chunk_stat_bytes(chunk, physical_type: int, ool_at: int, buf) -> tuple:
    """(min, max) verbatim stat bytes of one chunk record, None where absent. `ool_at`: the
    start of its block's out-of-line region in `buf`, the `_pm` bytes."""
    flags, sizes = int(chunk["stat_flags"]), int(chunk["stat_sizes"])
    out = []
    for slot, present, inlined, shift in SLOTS:
        if not flags & present:
            out.append(None)
        elif flags & inlined:
            n = (sizes >> shift) & 0xF or zero_nibble_width(physical_type)
            out.append(int(chunk[slot]).to_bytes(8, "little")[:n])
        else:
            ref = int(chunk[slot])
            at = ool_at + (ref >> L.OOL_LENGTH_BITS)
            out.append(bytes(buf[at : at + (ref & L.OOL_MAX_LENGTH)]))
    return tuple(out)


def _gather(src, src_off, lengths, dst, dst_off):
    """dst[dst_off[i] : +lengths[i]] = src[src_off[i] : +lengths[i]] for every i (lengths > 0,
    destination ranges back to back): one gather through a per-byte index."""
    idx = np.repeat(src_off - dst_off, lengths)
    idx += np.arange(int(dst_off[0]), int(dst_off[0]) + len(idx), dtype=np.int64)
    dst[int(dst_off[0]) : int(dst_off[0]) + len(idx)] = np.asarray(src).take(idx)


def column_stat_bytes(chunks, physical_type: int, ool_at, buf, gather=_gather) -> tuple[ByteRefs, ByteRefs]:
    """(min, max) verbatim stat bytes of R chunk records as 1-D ByteRefs sharing one buffer, the
    vectorised chunk_stat_bytes: inline bytes are the slots themselves, out-of-line ones are
    copied from `buf` (ool_at: (R,) starts of the blocks' out-of-line regions) by `gather`
    (same signature as _gather; pruning passes its compiled kernel). References were checked
    against the file on open; one outside `buf` raises ValueError."""
    R = len(chunks)
    flags, sizes = chunks["stat_flags"], chunks["stat_sizes"]
    raw = np.empty((2, R), L.U64)
    offsets = np.zeros((2, R), np.int64)
    lengths = np.full((2, R), -1, np.int64)
    src = np.zeros((2, R), np.int64)
    ool = np.zeros((2, R), bool)
    rows = np.arange(R, dtype=np.int64)
    for k, (slot, flag_present, flag_inlined, shift) in enumerate(SLOTS):
        raw[k] = chunks[slot]
        present = (flags & flag_present) != 0
        inl = present & ((flags & flag_inlined) != 0)
        nib = ((sizes >> shift) & 0xF).astype(np.int64)
        lengths[k] = np.where(inl, np.where(nib == 0, zero_nibble_width(physical_type), nib), -1)
        offsets[k] = (k * R + rows) * 8  # the slot's own bytes in `raw`
        o = present & ~inl
        if o.any():
            ref = raw[k]
            lengths[k] = np.where(o, (ref & np.uint64(L.OOL_MAX_LENGTH)).astype(np.int64), lengths[k])
            at = np.asarray(ool_at, np.int64) + (ref >> np.uint64(L.OOL_LENGTH_BITS)).astype(np.int64)
            src[k] = np.where(o, at, 0)
            ool[k] = o
    head = raw.view(np.uint8).reshape(-1)
    data = head
    if ool.any():
        src_o, len_o = src[ool], lengths[ool]
        if ((src_o < 0) | (src_o > len(buf) - len_o)).any():
            raise ValueError("out-of-line stat reference outside the buffer")
        ends = np.cumsum(len_o)
        dst_o = len(head) + ends - len_o
        data = np.empty(len(head) + int(ends[-1]), np.uint8)
        data[: len(head)] = head
        if ends[-1]:
            gather(buf, src_o, len_o, data, dst_o)
        offsets[ool] = dst_o
    return ByteRefs(data, offsets[0], lengths[0]), ByteRefs(data, offsets[1], lengths[1])


def inline_values(chunks, physical_type: int, dtype):
    """(lo, hi, has_lo, has_hi) of R chunk records of a fixed-width physical type (BOOLEAN,
    INT32, INT64, FLOAT, DOUBLE), decoded vectorised as `dtype` (of the physical width); a stat
    absent, out-of-line or of another length is not usable."""
    width = L.PHYSICAL_WIDTH[physical_type]
    flags, stat_sizes = chunks["stat_flags"], chunks["stat_sizes"]
    out = []
    for slot, present, inlined, shift in SLOTS:
        nib = (stat_sizes >> shift) & 0xF
        length = np.where(nib == 0, zero_nibble_width(physical_type), nib)
        ok = ((flags & (present | inlined)) == (present | inlined)) & (length == width)
        vals = chunks[slot].astype(L.U64)
        if width == 4:
            vals = (vals & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(dtype)
        elif width == 1:
            vals = (vals & np.uint64(0xFF)).astype(np.uint8).view(dtype)
        else:
            vals = vals.view(dtype)
        out.append((vals, ok))
    return out[0][0], out[1][0], out[0][1], out[1][1]


_PLAIN_INT = {L.PT_INT32: "<i", L.PT_INT64: "<q"}
_PLAIN_FLOAT = {L.PT_FLOAT: "<f", L.PT_DOUBLE: "<d"}
_JULIAN_EPOCH_DAY = 2440588  # 1970-01-01 as an INT96 Julian day


def plain_value(raw: bytes, physical_type: int):
    """One stat's PLAIN bytes as a value: bool (BOOLEAN), int (INT32, INT64 and INT96 as
    nanoseconds since the epoch), float (FLOAT, DOUBLE), else the bytes. A short integer stat
    reads as if zero-padded; other malformed lengths raise ValueError."""
    raw = bytes(raw)
    try:
        if physical_type == L.PT_BOOLEAN:
            return bool(raw[0])
        if physical_type in _PLAIN_INT:
            fmt = _PLAIN_INT[physical_type]
            n = struct.calcsize(fmt)
            return struct.unpack(fmt, raw[:n].ljust(n, b"\0"))[0]
        if physical_type in _PLAIN_FLOAT:
            fmt = _PLAIN_FLOAT[physical_type]
            return struct.unpack(fmt, raw[: struct.calcsize(fmt)])[0]
    except (struct.error, IndexError):
        raise ValueError(f"{len(raw)} bytes are not a {L.PHYSICAL_TYPE_NAMES[physical_type]} value") from None
    if physical_type == L.PT_INT96:
        if len(raw) != 12:
            raise ValueError(f"{len(raw)} bytes are not an INT96 value")
        nanos, day = struct.unpack("<qi", raw)
        return (day - _JULIAN_EPOCH_DAY) * 86_400_000_000_000 + nanos
    return raw


def decimal_value(raw: bytes) -> int:
    """The unscaled integer of a BYTE_ARRAY / FIXED_LEN_BYTE_ARRAY decimal (big-endian two's complement)."""
    return int.from_bytes(raw, "big", signed=True)
