"""A scan's share of each partition with survivors (`Part`): the columns it returns and filters
on, its surviving row groups (full or partial), and what the partition's keys and statistics leave
of the predicate to filter exactly (`lookup`, `proven`; `prune.rows.without_proven`)."""

from __future__ import annotations

import numpy as np

from ..prune import expr as E
from ..prune.bind import bind
from ..prune.rules import prove


class Part:
    """One partition's share of a scan: its columns, surviving row groups and what its keys leave
    of the predicate."""

    def __init__(self, name, pm, path, want, pred_cols, views, rgs, full, position=None, residual=None,
                 needs=()):
        self.name, self.pm, self.path = name, pm, path
        self.position = position  # index in Table.partitions: the row of its key values
        self.residual = residual  # the predicate's rest in this partition (None: every row matches)
        self.needs = needs  # key columns its exact filter reads
        self.want = want  # columns returned, in the caller's order (indexes)
        self.pred_cols = pred_cols  # the predicate's columns (indexes, ascending)
        self.extra = [c for c in pred_cols if c not in want]  # predicate-only columns
        self.want_set, self.pred_set = set(want), set(pred_cols)  # as a unit's decode asks
        self.views = views  # strict mode: column -> type its raw values are viewed as
        self.rgs = rgs  # surviving row groups with rows, ascending (int64 array)
        self.full = full  # bool per entry of rgs


def lookup(g, residual, columns, keys):
    """(want, pred_cols) for the members of schema group g under `residual`, `columns` returned:
    per group, cached on it. Raises as the group's first member (the earliest partition of the
    group) would. Key columns (`keys`) are no file columns: neither list holds them."""
    key = (tuple(columns), residual)
    try:
        hit = g.scan_cache.get(key)
    except TypeError:  # an unhashable literal
        key = hit = None
    if hit is None:
        pm, keyset = g.members[0][1], set(keys)
        want = [pm.column_index(n) for n in columns if n not in keyset]
        # SQL names resolve per schema (expr.Names): the spelling these files use
        pred_cols = [] if residual is None else sorted(
            pm.column_index(n) for n in residual.resolve(list(pm.column_names) + list(keys)).columns()
            if n not in keyset)
        hit = (want, pred_cols)
        if key is not None:
            if len(g.scan_cache) >= 256:
                g.scan_cache.clear()
            g.scan_cache[key] = hit
    return hit


def proven(g, cls, plan, idx, full, first_at) -> dict:
    """class -> [(conjunct, held)] for each class of g (`cls`: each member's, of key plan `plan`)
    whose residual is an AND: per top-level conjunct, `held[a]` says whether statistics prove it
    TRUE for every row of each survivor not matching whole of the a-th member holding survivors
    (`idx`: the survivors in g, all within the residual's `maybe`; `full` those matching whole,
    `first_at` each such member's first in idx). Classes with atoms over keys and file columns
    at once are left out (statistics cannot decide those)."""
    out = {}
    need = np.zeros(g.n, bool)
    need[idx[~full]] = True  # the survivors a filter reads
    if not need.any():
        return out
    classes = np.unique(cls).tolist()
    for c in classes:
        r = plan.residuals[c]
        if isinstance(r, E.And) and not plan.mixed[c]:
            # Blooms never prove ALWAYS: statistics alone decide. Each conjunct may match where
            # its AND may (`prove`): the class's own row groups only.
            own = need if len(classes) == 1 else need & np.repeat(cls == c, np.diff(g.starts))
            out[c] = [(k, np.logical_and.reduceat(prove(bind(k, g.schema), g.n, g.stats, own)[idx] | full,
                                                  first_at).tolist()) for k in r.children]
    return out
