"""Stat slots of chunk records, from verbatim Parquet stat bytes: STAT_FLAGS, STAT_SIZES and the
inline (min, max) slots, computed a block of row groups at a time with a few vector operations.

A 10,000-row-group description is 80,000 chunk records: no Python work per record. This is the
dense writer's pass (no out-of-line bytes anywhere); blocks with out-of-line bytes are written by
`_encode.fill_blocks`, which applies the same placement rule and the same flag tables
(KIND_KEEP / KIND_SET) in its one pass. tests/pm/test_encode_kernel.py holds both to one per-row
reference.
"""

from __future__ import annotations

import numpy as np

from . import layout as L
from .description import Description
from ..errors import PmError

# The fields of a chunk record derived here; everything else is copied from `Description.chunks`.
STAT_FIELDS = ("stat_flags", "stat_sizes", "min_stat", "max_stat")


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


KIND_KEEP, KIND_SET = (t.reshape(-1) for t in _kind_tables())  # indexed by 3 * min kind + max kind
_LOW_BYTES = np.array([(1 << (8 * m)) - 1 for m in range(9)], L.U64)  # the low m bytes of a u64

# Row groups per step of the stat computation, as elements (row groups x columns x 2): the
# temporaries of a step stay in cache and come from the allocator's free lists, where
# whole-file temporaries (megabytes each) would page-fault fresh memory on every call.
_STAT_STEP = 1 << 14


class StatSlots:
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
        flags = (src_flags & KIND_KEEP.take(code)) | KIND_SET.take(code)
        # Inline: the payload's bytes in the low bytes of the slot, the rest zero; the mask of
        # m = 0 clears what was loaded for the others (offset 0 for them: always loadable).
        m = n * inl
        slots = self.load(start * inl, checked=True)
        slots &= _LOW_BYTES.take(m)
        m8 = m.astype(np.uint8)
        sizes = m8[..., 0] | (m8[..., 1] << np.uint8(4))
        ool = kind == 1
        return flags, sizes, slots, (n * ool if ool.any() else None)
