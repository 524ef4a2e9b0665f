"""`Table.key_plan`: what a predicate leaves of a table once its hive partition keys are known.

The keys decide first (prune.keys.split over `Table.hive.values`, no I/O): partitions where the
predicate is certainly not TRUE are dropped before any of their `_pm` is opened or fetched, and
every other partition gets the predicate's residual, its key atoms replaced by their values
there. Which keys are columns needs one file's columns (a key named like a column of the files
is not one: the file's values win), so the `_pm` of the first surviving partition is opened to
tell (the first partition's when none survives); when it shows that a key the predicate used is
a file column, the keys decide again without it. A literal that does not fit a key's type
(`ts >= TIMESTAMP '...'` over `ts=2024-01-01` directories, a string key) is therefore refused
only once that `_pm` shows the name is no file column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..prune.keys import atoms, key_atoms, relax, resolved_columns, split
from ..prune.names import Names


@dataclass
class KeyPlan:
    """What a predicate leaves of a table once its partition keys are known (`Table.key_plan`)."""

    positions: np.ndarray  # partitions that may hold a matching row (indices into Table.partitions)
    classes: np.ndarray  # per survivor: index into residuals
    residuals: list  # per class: what statistics and the exact filter still decide (None: every row)
    keys: list  # the key columns: partition keys not named like a column of `reference`
    reference: str | None  # the partition whose columns are the file columns (the first survivor)
    mixed: list  # per class: ids of atoms over keys and file columns at once (prune.keys.relax)
    needs: list  # per class: key columns the exact filter of its residual reads
    skipped_native: tuple = ()  # QuestDB native partitions the predicate may need, left out (native="skip")

    def class_of(self, positions) -> np.ndarray:
        return self.classes[np.searchsorted(self.positions, positions)]

    def bounds(self, c):
        """(upper, lower): the residual of class c for `maybe` and for `always` (equal unless it
        holds an atom over keys and file columns at once, which statistics cannot decide)."""
        r = self.residuals[c]
        if not self.mixed[c]:
            return r, r
        return relax(r, self.mixed[c], True), relax(r, self.mixed[c], False)


def plan(table, predicate) -> KeyPlan:
    """The KeyPlan of `predicate` (an expression or None) over `table`."""
    n = len(table.partitions)
    if table.hive is None:
        return _plan(np.arange(n, dtype=np.int64), np.zeros(n, np.int32), [predicate], [], (),
                     table.partitions[0] if n else None)
    keys = table.hive.values
    s = split(predicate, keys, defer=True) if predicate is not None else None
    survivors = np.arange(n, dtype=np.int64) if s is None else s.positions
    reference = table.partitions[survivors[0] if len(survivors) else 0]
    file_names = list(table.meta(reference).column_names)
    taken = set(file_names)
    active = [k for k in keys.schema.names if k not in taken]
    if s is None:
        return _plan(survivors, np.zeros(n, np.int32), [None], active, file_names, reference)
    if s.leaves or s.refused:
        still = {id(a) for a in key_atoms(predicate, active, file_names)}
        for a, err in s.refused:
            if id(a) in still:  # a key after all: its literal does not fit it
                raise err
        if still != {id(a) for a in s.leaves}:
            # a key the predicate uses is a column of the files: decide again without it
            s = split(predicate, keys.select(active), file_names)
    return _plan(s.positions, s.classes, s.residuals, active, file_names, reference)


def _plan(positions, classes, residuals, active, file_names, reference) -> KeyPlan:
    """KeyPlan, with each residual's atoms over keys and file columns at once found."""
    mixed, needs = [], []
    names, keys = Names(list(file_names) + list(active)), set(active)
    for r in residuals:
        ids, need = set(), set()
        for a in atoms(r) if r is not None and keys else ():
            cols = resolved_columns(a, names)
            if cols and cols & keys:
                ids.add(id(a))
                need |= cols & keys
        mixed.append(frozenset(ids))
        needs.append(tuple(k for k in active if k in need))
    return KeyPlan(positions, classes, residuals, list(active), reference, mixed, needs)
