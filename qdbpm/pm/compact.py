"""Whole-file operations built from the reader and writer."""

from __future__ import annotations

from .reader import open as open_pm
from .writer import write_new


def compact(pm_path, out_path=None) -> int:
    """Rewrite the latest snapshot as a fresh file (dead blocks and old footers dropped).

    Older snapshots are gone afterwards: QuestDB compacts into a new partition directory, so
    pass `out_path` there; without it the file is replaced atomically in place.
    """
    with open_pm(pm_path) as pm:
        d = pm.to_description()
    return write_new(out_path or pm_path, d)
