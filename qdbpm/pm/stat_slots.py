"""Stat slots of chunk records: which stats are inline, out of line or dropped, and the
STAT_FLAGS that follow. `_encode.fill_blocks` applies these tables per record;
tests/pm/test_encode_kernel.py holds it to a per-row reference.
"""

from __future__ import annotations

import numpy as np

from . import layout as L


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


def ool_rows(length: np.ndarray) -> np.ndarray:
    """(k,) bool from (k, C, 2) stat lengths: row groups with an out-of-line stat (longer than
    an inline slot, short enough for the OOL encoding)."""
    return ((length > L.INLINE_STAT_MAX) & (length <= L.OOL_MAX_LENGTH)).any(axis=(1, 2))
