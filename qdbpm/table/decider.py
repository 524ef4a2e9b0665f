"""The per-value filter pass's decider (`direct.distinct_rows`): the residual's one-column groups
evaluated over dictionary values, with each fixed-width value's answer kept for the next unit."""

from __future__ import annotations

import numpy as np

from ..parquet import pages
from ..prune.arrow import to_arrow
from ..prune.bind import literal_signature
from ..prune.compiled import arrow_key, compiled, field_key
from ..prune.rows import by_column, truths


class Decider:
    """What `distinct_rows` decides with: `decide(table)` gives, per column name of a table of
    (some of) the predicate's columns' values, where that column's own conjuncts are TRUE
    (prune.rows.by_column / truths). `memo` keeps, per fixed-width column, the answers for each
    dictionary value decided so far: a scan's units often share their dictionaries' values in
    another order (TPC-H's discounts and quantities, a QuestDB symbol's keys), which then need no
    second evaluation. Values are matched by their bits, so a NaN or -0.0 is only ever matched by
    the same bits (whose answer is the same: the filter reads a value, not its position)."""

    MEMO_VALUES = 4096  # per column: a larger union of dictionaries is not kept
    MEMO_COLUMNS = 64
    SMALL = 256  # dictionaries up to this many values are looked up through a dict (numpy costs more)

    def __init__(self, decide):
        # key -> (sorted value bits, answer per value, answer of null, {bits: answer}: the same
        # answers as a dict, for lookups of up to SMALL values)
        self.decide, self.memo = decide, {}
        # columns whose values outgrew MEMO_VALUES: neither looked up nor kept again (a price
        # column's thousands of distinct values made every unit sort them all for nothing)
        self.refused = set()

    def key(self, field, kind, got):
        """(memo key, the column's dictionary values concatenated) for fixed-width dictionaries
        `got` (per row group; None: all null), or (None, None) for byte arrays and for a column
        the memo refused (its values are not concatenated for nothing)."""
        if any(not isinstance(g, pages.Fixed) for g in got if g is not None):
            return None, None
        values = [g.values for g in got if g is not None]
        dt = values[0].dtype if values else None
        if values and any(v.dtype != dt for v in values):
            return None, None
        key = memo_key(field, kind, dt)  # an unscaled field's scale included
        if key in self.refused:
            return None, None
        return key, (None if not values else values[0] if len(values) == 1 else np.concatenate(values))

    _BITS = {}  # a value dtype -> the signed integer dtype of its width and byte order

    @classmethod
    def _bits(cls, values):
        dt = cls._BITS.get(values.dtype)
        if dt is None:
            dt = cls._BITS[values.dtype] = np.dtype(
                f"{'>' if values.dtype.byteorder == '>' else '<'}i{values.dtype.itemsize}")
        return values.view(dt)

    def lookup(self, key, values):
        """The column's LUT (uint8 per value, then the null's) when every value was decided before."""
        hit = self.memo.get(key)
        if hit is None:
            return None
        known, answers, null = hit[:3]
        if values is None:  # every chunk all null
            return np.array([null], np.uint8)
        if not len(known):
            return None
        bits = self._bits(values)
        if len(bits) <= self.SMALL:  # a dict per value: no numpy call per value (hit[3], remember)
            try:
                return np.array([hit[3][v] for v in bits.tolist()] + [int(null)], np.uint8)
            except KeyError:
                return None
        pos = np.minimum(np.searchsorted(known, bits), len(known) - 1)
        if not (known[pos] == bits).all():
            return None
        return np.append(answers[pos], np.uint8(null))

    def memo_at(self, key):
        """(values, answers) this memo holds under `key` (`memo_key`): the values as `_bits` gives
        them, sorted, for a lookup without the GIL (`offload.kept`, the same answers as
        `lookup`'s); None when it has none."""
        hit = None if key in self.refused else self.memo.get(key)
        return None if hit is None or not len(hit[0]) else hit[:2]

    def size(self) -> int:
        """The values its memo holds, over every column."""
        return sum(len(hit[0]) for hit in list(self.memo.values()))

    def remember(self, key, values, lut):
        """Keep the answers `lut` (per value of `values`, then the null's)."""
        if key in self.refused:
            return
        bits, answers = (np.zeros(0, np.int64), lut[:0]) if values is None else (self._bits(values), lut[:-1])
        hit = self.memo.get(key)
        if hit is not None:
            bits, answers = np.concatenate([hit[0], bits]), np.concatenate([hit[1], answers])
        known, first = np.unique(bits, return_index=True)
        if len(known) > self.MEMO_VALUES:
            self.refused.add(key)
            self.memo.pop(key, None)
            return
        if len(self.memo) >= self.MEMO_COLUMNS and key not in self.memo:
            self.memo.clear()
        answers = answers[first]
        self.memo[key] = (known, answers, lut[-1], dict(zip(known.tolist(), answers.tolist())))


def memo_key(field, kind, dtype):
    """The memo's key of a column of `field` and `kind` whose dictionaries hold `dtype` values."""
    return field_key(field), kind, None if dtype is None else dtype.str


KEPT = 32  # Deciders kept for the process (`decider_for`); past it the cache starts over,
KEPT_VALUES = 1 << 16  # as past this many values in their memos (~8 MB: a Decider's own bound is 64 x 4096)
_kept: dict = {}


def decider_for(cache, residual, names, arrow_filter):
    """The Decider of `residual` over predicate columns `names` (by_column's groups, each
    evaluated with `arrow_filter(expr, schema)`); None when the residual is not an AND of
    one-column conjuncts. A residual whose literals key prune.compiled's cache gets the process's
    Decider: a value's answer depends on the residual, the column's field (its metadata included,
    `field_key`) and the value's bits only, not on the table, so the next scan of the same question
    (a one-shot read, its table opened afresh) looks up what an earlier one decided (TPC-H Q6: one
    Acero projection, ~0.3 ms, per one shot before); it compiles through `compiled`, no table kept.
    Any other is kept in `cache` (a scan's), keyed by its value where it hashes, else by object
    (the caller keeping it)."""
    sig = literal_signature(residual)
    if sig is not None:
        key = (residual, sig, tuple(names))
        if len(_kept) >= KEPT or sum(d.size() for d in list(_kept.values()) if d is not None) > KEPT_VALUES:
            _kept.clear()  # checked at every scan: a kept Decider's memo grows after it is made
        got = _kept.get(key, False)
        if got is False:
            got = _kept[key] = _decider(residual, names, _compiled)
        return got
    try:
        key = (residual, tuple(names))
        hash(key)
    except TypeError:
        key = (id(residual), tuple(names))
    if key not in cache:
        cache[key] = _decider(residual, names, arrow_filter)
    return cache[key]


def _compiled(e, schema):
    expr = compiled(e, schema)  # never None: e is part of a residual whose literals key the cache
    return to_arrow(e, schema) if expr is None else expr


def _decider(residual, names, arrow_filter):
    groups = by_column(residual, names)
    if groups is None:
        return None

    def decide(d):  # the groups of the columns `d` holds
        held = [n for n in groups if n in d.schema.names]
        return dict(zip(held, truths(d, [arrow_filter(groups[n], d.schema) for n in held])))

    return Decider(decide)


def cached_filter(table, own, residual, schema):
    """to_arrow(residual, schema), kept on the table (in `own`, a scan's, for an unhashable
    literal): a scan's exact filter and its Deciders'. A function, not the scan's method: a
    Decider keeps it, and a scan it pointed back to would be freed only by the cycle collector,
    with its parts and their `_pm`."""
    try:
        return table.arrow_filter(residual, schema)
    except TypeError:
        key = (id(residual), arrow_key(schema))
        expr = own.get(key)
        if expr is None:
            expr = own[key] = to_arrow(residual, schema)
        return expr
