"""Designated-timestamp search over row groups sorted by timestamp (docs/format.md#timestamp-lookup):
binary searches on the per-row-group min / max arrays."""

from __future__ import annotations

import numpy as np


def timestamp_find(mins: np.ndarray, maxs: np.ndarray, ts: int, num_rows=None) -> int:
    """2*rg+1 when ts is before row group rg (in the gap before it), 2*(rg+1) when inside it,
    2*count+1 after the last one. Empty row groups (num_rows == 0) are skipped."""
    count = len(mins)
    live = np.ones(count, bool) if num_rows is None else np.asarray(num_rows) > 0
    idx = np.nonzero(live)[0]
    if idx.size == 0:
        return 2 * count + 1
    lo_arr, hi_arr = np.asarray(mins)[idx], np.asarray(maxs)[idx]
    # first live row group whose max >= ts
    k = int(np.searchsorted(hi_arr, ts, side="left"))
    if k == idx.size:
        return 2 * count + 1
    rg = int(idx[k])
    if ts < lo_arr[k]:
        return 2 * rg + 1
    return 2 * (rg + 1)


def timestamp_range(mins: np.ndarray, maxs: np.ndarray, lo: int, hi: int) -> tuple[int, int]:
    """[first, last) row groups that may overlap [lo, hi)."""
    first = int(np.searchsorted(np.asarray(maxs), lo, side="left"))
    last = int(np.searchsorted(np.asarray(mins), hi, side="left"))
    return first, max(first, last)
