"""A table's schema group: partitions whose `_pm` schemas agree, evaluated as one concatenation of
their row groups (Table.schema_groups), with the typed stats and bloom indexes that
prune.rules reads, built on first use.

The lookups take `need` (a bool mask over the group's row groups, None: all): the answers that
still count. Bounds in the chunk records cost one vectorised pass for every member at once and
are always whole; what costs per member (out-of-line byte-string / big-decimal bounds, bloom
bitsets) is built only for members holding a needed row group, kept per member, and the rows
of the others are "nothing known": no bounds, nulls unknown, no filter, which prunes nothing.
"""

from __future__ import annotations

import numpy as np

from ..pm.stat_decode import ool_start
from ..prune.stats import (KIND_BIGDEC, KIND_BYTES, ByteValues, ColumnStats, chunk_stats, chunk_stats_at,
                           column_records, variable_stats)

BATCH_MEMBERS = 32  # more members than this wanted at once: out-of-line bounds read for all in one pass


class Members:
    """A group's [(partition, ParquetMeta)], each opened on first access (`open_member(k)`): a
    planner reads a batch's arrays, and opens only the members it reads from."""

    def __init__(self, names, open_member):
        self.names = names
        self._open = open_member
        self._pms = {}

    def __len__(self):
        return len(self.names)

    def __getitem__(self, k):
        pm = self._pms.get(k)
        if pm is None:
            pm = self._pms[k] = self._open(k)
        return self.names[k], pm

    def __iter__(self):
        return (self[k] for k in range(len(self.names)))


class Group:
    """Partitions with one schema: concatenated stats and bloom indexes, built lazily.

    members: [(partition, ParquetMeta)] or Members; with `batch` (a pm.batch.PmBatch) and `files`
    (the members' indices in it), row counts and the chunk records are read from the batch's
    arrays, without opening any member."""

    def __init__(self, schema, members, batch=None, files=None):
        self.schema = schema
        self.members = members
        self.batch, self.files = batch, None if files is None else np.asarray(files, np.int64)
        self._rgs = None if batch is None else batch.row_groups(self.files)  # members' row groups in it
        counts = batch.rg_start[self.files + 1] - batch.rg_start[self.files] if batch is not None \
            else [pm.row_group_count for _, pm in members]
        self.starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.n = int(self.starts[-1])
        self._stats = {}  # col -> ColumnStats (whole), or _Partial (out-of-line bounds)
        self._blooms = {}  # col -> _Blooms
        self._num_rows = None if batch is None else batch.num_rows[self._rgs]
        self._rows64 = None
        self.scan_cache = {}  # Scan's per-group lookups: (columns, predicate) -> column indexes
        self.positions = None  # members' indices in Table.partitions (set by Table.schema_groups)

    @property
    def names(self) -> list:
        """The members' partitions, in order."""
        return self.members.names if isinstance(self.members, Members) else [p for p, _ in self.members]

    def survivor_rows(self, idx, k, rg) -> np.ndarray:
        """NUM_ROWS (uint64) of the row groups `idx` of the concatenation (sorted), which are row
        groups `rg` of members `k`: read member by member when few members hold survivors,
        else from every member's NUM_ROWS concatenated once (and kept)."""
        if self._num_rows is None:
            members, first = np.unique(k, return_index=True)
            if len(members) <= 32:
                out = np.empty(len(idx), np.uint64)
                bounds = list(first) + [len(idx)]
                for a, j in enumerate(members):
                    s, e = bounds[a], bounds[a + 1]
                    out[s:e] = np.asarray(self.members[int(j)][1].num_rows, np.uint64)[rg[s:e]]
                return out
            self._num_rows = np.concatenate([np.asarray(pm.num_rows, np.uint64) for _, pm in self.members])
        return self._num_rows[idx]

    @property
    def rows64(self) -> np.ndarray:
        """Every member's NUM_ROWS (int64), concatenated once and kept."""
        if self._rows64 is None:
            self._rows64 = self._num_rows.astype(np.int64) if self._num_rows is not None else \
                np.concatenate([np.asarray(pm.num_rows, np.int64) for _, pm in self.members])
        return self._rows64

    def wanted(self, need) -> np.ndarray:
        """bool per member: it holds a row group `need` marks (None: every member)."""
        if need is None:
            return np.ones(len(self.members), bool)
        out = np.zeros(len(self.members), bool)
        # searchsorted 'right' skips members without row groups: they are never wanted
        out[np.searchsorted(self.starts, np.flatnonzero(need), side="right") - 1] = True
        return out

    def stats(self, col, need=None) -> ColumnStats:
        """Column `col`'s stats over the group's row groups, exact where `need` (None: all)."""
        st = self._stats.get(col)
        ct = self.schema.types[col]
        if ct.kind not in (KIND_BYTES, KIND_BIGDEC):
            if st is None:
                # Bounds that live in the chunk records, decoded for every member at once: a
                # batch's read in place by the bounds kernel where it reads the type; else the
                # records gathered (one kernel call, not a view per file, none kept: the group
                # must not pin the mappings) and decoded in one vectorised pass.
                st = None if self.batch is None else \
                    chunk_stats_at(self.batch.buffer, self.batch.record_at(self.files, col), ct)
                if st is None:
                    recs = self.batch.records(self.files, col) if self.batch is not None else \
                        column_records([pm.chunks for _, pm in self.members], col)
                    st = chunk_stats(recs, ct)
                self._stats[col] = st
            return st
        if isinstance(st, ColumnStats):
            return st
        wanted = self.wanted(need)
        if st is None and self.batch is not None and int(wanted.sum()) > BATCH_MEMBERS:
            # Many members wanted: every member's out-of-line bounds at once, read where they
            # lie in the batch buffer, whole (no member opened, none kept).
            ool_at = ool_start(self.batch.block_at[self._rgs], len(self.schema.types))
            st = self._stats[col] = variable_stats(self.batch.records(self.files, col), ool_at,
                                                   self.batch.buffer, ct)
            return st
        if st is None:
            st = self._stats[col] = _Partial(ct.kind, len(self.members))
        missing = np.flatnonzero(wanted & ~st.done)
        if missing.size:
            for k in missing.tolist():
                st.parts[k] = self.members[k][1].column_stats(col)  # the member's own cache too
            st.done[missing] = True
            st.whole = None
        if st.whole is None:
            st.whole = st.build(self.starts)
        return st.whole

    def blooms(self, col, need=None):
        """(data, offsets, lengths) of column `col`'s bitsets over the group's row groups, lengths
        -1 where absent or not built (members without a row group `need` marks); None when no
        member built has any."""
        b = self._blooms.get(col)
        if b is None:
            b = self._blooms[col] = _Blooms(self.n, len(self.members))
        missing = np.flatnonzero(self.wanted(need) & ~b.done)
        if missing.size:
            b.add(col, missing, self.members, self.starts)
        return b.index


class _Partial:
    """Out-of-line stats of one column: the members decoded so far and their concatenation."""

    def __init__(self, kind, m):
        self.kind = kind
        self.done = np.zeros(m, bool)
        self.parts = {}  # member -> ColumnStats
        self.whole = None  # ColumnStats over the group, rebuilt when members are added

    def build(self, starts) -> ColumnStats:
        if self.done.all():
            return ColumnStats.concat([self.parts[k] for k in range(len(self.done))])
        # Rows of members not decoded: nothing known (no bounds, nulls unknown).
        n = int(starts[-1])
        has_lo, has_hi, eq, nulls_known = (np.zeros(n, bool) for _ in range(4))
        nulls, num_values = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
        if self.kind != KIND_BYTES:
            lo, hi = np.full(n, None, object), np.full(n, None, object)  # KIND_BIGDEC: Python ints
        for k, st in self.parts.items():
            s, e = int(starts[k]), int(starts[k + 1])
            has_lo[s:e], has_hi[s:e], eq[s:e] = st.has_lo, st.has_hi, st.exact_eq
            nulls_known[s:e], nulls[s:e], num_values[s:e] = st.nulls_known, st.nulls, st.num_values
            if self.kind != KIND_BYTES:
                lo[s:e], hi[s:e] = st.lo, st.hi
        if self.kind == KIND_BYTES:
            lo, hi = self._byte_values("lo", starts), self._byte_values("hi", starts)
        return ColumnStats(self.kind, lo, hi, has_lo, has_hi, eq, nulls_known, nulls, num_values)

    def _byte_values(self, side, starts) -> ByteValues:
        """The decoded members' `side` bounds at their rows, absent elsewhere."""
        n = int(starts[-1])
        start, length = np.zeros(n, np.int64), np.full(n, -1, np.int64)
        datas, pos = [], 0
        for k, st in self.parts.items():
            v = getattr(st, side)
            s, e = int(starts[k]), int(starts[k + 1])
            start[s:e], length[s:e] = v.start + pos, v.length
            datas.append(v.data)
            pos += len(v.data)
        return ByteValues(np.concatenate(datas) if datas else np.zeros(0, np.uint8), start, length)


class _Blooms:
    """One column's bloom bitsets over a group, members added as they are needed: each member's
    bitsets are copied once into a growing buffer (not whole mappings: the group must not pin
    them)."""

    def __init__(self, n, m):
        self.done = np.zeros(m, bool)
        self.data = np.zeros(0, np.uint8)  # the bitsets joined so far (a copy, owned)
        self.pending = []  # views of bitsets added since, joined on the next `index`
        self.size = 0
        self.offsets = np.zeros(n, np.int64)
        self.lengths = np.full(n, -1, np.int64)
        self.any = False  # some member built has a filter
        self._index = None

    def add(self, col, members, group_members, starts):
        if self._index is not None:  # handed out: written anew, not in place
            self.offsets, self.lengths = self.offsets.copy(), self.lengths.copy()
        for k in members.tolist():
            p = group_members[k][1].bloom_index(col)
            if p is None:
                continue
            data, o, ln = p
            present = ln >= 0
            sizes = ln[present]
            chunks = [np.asarray(data[int(a) : int(a) + int(b)]) for a, b in zip(o[present], sizes)]
            new_o = np.zeros(len(o), np.int64)
            new_o[present] = self.size + np.concatenate([[0], np.cumsum(sizes)[:-1]]) if sizes.size else []
            s, e = int(starts[k]), int(starts[k + 1])
            self.offsets[s:e], self.lengths[s:e] = new_o, ln
            self.size += int(sizes.sum())
            self.pending.extend(chunks)
            self.any = True
        self.done[members] = True
        self._index = None

    @property
    def index(self):
        if not self.any:
            return None
        if self._index is None:
            if self.pending:
                self.data = np.concatenate([self.data, *self.pending])
                self.pending = []
            self._index = (self.data, self.offsets, self.lengths)
        return self._index
