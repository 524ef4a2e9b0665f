"""Typeless integer columns read both ways, jointly: an INT32 / INT64 column without a QuestDB
type is signed or unsigned, the same for the whole predicate, so rules.evaluate runs once per
joint reading of a predicate's such columns and keeps a row group any reading keeps.
"""

from __future__ import annotations

import numpy as np

from .bind import Node
from .stats import KIND_ANYSIGN, KIND_INT, ColumnStats

MAX_ANYSIGN_COLUMNS = 3  # readings tried jointly: 2**3 evaluations at most


def readings(b, n_rows: int, stats, need=None):
    """(stats lookup, possible) per joint reading of b's typeless integer columns: the lookup
    (col, need) -> ColumnStats gives those columns read one way, `possible` marks the row groups
    whose bounds are ordered under the reading; (stats, None) when there is one reading only.
    `need`: passed to `stats` (the row groups whose answers count)."""
    anysign = sorted(anysign_columns(b))
    if not anysign or len(anysign) > MAX_ANYSIGN_COLUMNS:
        # Beyond the cap each leaf reads both ways on its own: sound, only less sharp.
        yield stats, None
        return
    # Leaf by leaf ORing of the readings would let `x >= 0 AND x <= 0` pass on 2^63 (>= 0
    # unsigned, <= 0 signed). A reading under which a row group's min > max is not its writer's
    # order, so it adds nothing for that row group (decided per row group: a Table pass
    # concatenates files of either order).
    for mask in range(1 << len(anysign)):
        unsigned = {c for k, c in enumerate(anysign) if mask >> k & 1}
        possible = np.ones(n_rows, bool)
        for c in anysign:
            s = stats(c, need)
            lo, hi = (s.ulo, s.uhi) if c in unsigned else (s.lo, s.hi)
            possible &= ~(s.has_lo & s.has_hi) | (lo <= hi)
        if not possible.any():
            continue
        cache = {}

        def fixed(col, need, unsigned=unsigned, cache=cache):
            st = stats(col, need)
            if col not in anysign:
                return st
            hit = cache.get(col)
            if hit is None or hit[0] is not st:  # a lookup may answer a wider need with new stats
                hit = cache[col] = (st, one_reading(st, col in unsigned))
            return hit[1]

        yield fixed, possible


def anysign_columns(b) -> set:
    """Indexes of the KIND_ANYSIGN columns b's leaves compare (a residual's inner ones excluded:
    those read both ways on their own)."""
    if isinstance(b, Node):
        out = set()
        for c in b.children:
            out |= anysign_columns(c)
        return out
    return {b.ct.index} if b.ct is not None and b.ct.kind == KIND_ANYSIGN else set()


def one_reading(s, unsigned: bool) -> ColumnStats:
    """KIND_ANYSIGN stats read one way: plain integer bounds; a row group whose bounds are
    disordered under this reading keeps no bounds in it."""
    lo, hi = (s.ulo, s.uhi) if unsigned else (s.lo, s.hi)
    ordered = ~(s.has_lo & s.has_hi) | (lo <= hi)
    eq = s.exact_eq & ordered  # all values share lo's bits, whichever the reading
    return ColumnStats(KIND_INT, lo, hi, s.has_lo & ordered, s.has_hi & ordered, eq,
                       s.nulls_known, s.nulls, s.num_values)
