"""`qdbpm.open` and `ParquetMeta`: the one place where the `_pm` format meets pruning.

`ParquetMeta` is the format reader (pm/reader.py `PmFile`: map, chain walk, CRC, checks, numpy
views) plus what pruning needs of one file, decoded once and cached per open file: the typed
column schema, typed min / max / null-count arrays, bloom bitset indexes (external bitsets read
from the Parquet file beside the `_pm`), and the predicate and designated-timestamp searches of
qdbpm.prune, which itself never opens a file.
"""

from __future__ import annotations

import io
import os

import numpy as np

from .errors import PredicateError
from .pm import layout as L
from .pm.reader import PmFile
from .prune.bind import bind
from .prune.filters import as_predicate
from .prune.rules import classify as classify_bound, evaluate
from .prune.stats import KIND_ANYSIGN, KIND_INT, KIND_UINT, Schema, column_stats
from .prune.timestamp import timestamp_find, timestamp_range

__all__ = ["ParquetMeta", "open"]


class ParquetMeta(PmFile):
    """One pinned snapshot of a `_pm` file, with pruning. Use `qdbpm.open`."""

    def __init__(self, path, *, parquet_size=None, verify=True, data=None):
        self._cache = {}
        super().__init__(path, parquet_size=parquet_size, verify=verify, data=data)

    @property
    def schema(self) -> Schema:
        sch = self._cache.get("schema")
        if sch is None:
            sch = self._cache["schema"] = Schema.of(self)
        return sch

    def column_stats(self, column):
        """Typed min/max/null-count arrays of one column over all row groups (cached)."""
        ct = self.schema.column(column) if isinstance(column, str) else self.schema.types[int(column)]
        key = ("stats", ct.index)
        st = self._cache.get(key)
        if st is None:
            st = self._cache[key] = column_stats(self, ct.index, ct)
        return st

    def bloom_index(self, column, parquet_file=None):
        """(data, offsets, lengths) of one column's bitsets over all row groups, lengths -1 where
        absent; None when the column has no filters. External filters are read from the Parquet
        file (default: data.parquet beside this _pm) once and cached; unreadable means none."""
        col = self.column_index(column) if isinstance(column, str) else int(column)
        key = ("bloom", col)
        if key not in self._cache:
            if self.bloom_external:
                e = self.bloom_entries(col)
                self._cache[key] = None if e is None else self._external_blooms(e, parquet_file)
            else:
                self._cache[key] = self.bloom_bitsets(col)
        return self._cache[key]

    def _external_blooms(self, entries, parquet_file):
        path = parquet_file or os.path.join(os.path.dirname(os.path.abspath(self.path)), L.PARQUET_FILE_NAME)
        present = np.nonzero(entries["length"] > 0)[0]
        if not present.size:
            return None
        offs, lens = entries["offset"][present], entries["length"][present]
        try:
            with io.open(path, "rb") as f:
                # Ends cannot wrap (offset + length <= PARQUET_FOOTER_OFFSET, checked on open), but
                # may lie past the file: then it does not hold what the snapshot says, and no
                # bloom pruning beats a read (or a buffer) of whatever size the entries claim.
                if int((offs + lens).max()) > os.fstat(f.fileno()).st_size:
                    return None
                offs, ends = offs.astype(np.int64), (offs + lens).astype(np.int64)
                # Read the union of the ranges, each byte once: memory stays within the file's
                # size however many entries share bytes.
                spans = []  # [start, end), merged, ascending
                for i in np.argsort(offs, kind="stable"):
                    s, e = int(offs[i]), int(ends[i])
                    if spans and s <= spans[-1][1]:
                        spans[-1][1] = max(spans[-1][1], e)
                    else:
                        spans.append([s, e])
                parts, shift, total = [], [], 0
                for s, e in spans:
                    f.seek(s)
                    blob = f.read(e - s)
                    if len(blob) != e - s:
                        return None  # shrunk since the fstat
                    parts.append(blob)
                    shift.append(total - s)  # file offset -> offset in the joined buffer
                    total += e - s
        except OSError:
            return None
        span = np.searchsorted(np.array([s for s, _ in spans], np.int64), offs, side="right") - 1
        offsets = np.zeros(len(entries), np.int64)
        lengths = np.full(len(entries), -1, np.int64)
        offsets[present] = offs + np.array(shift, np.int64)[span]
        lengths[present] = ends - offs
        return np.frombuffer(b"".join(parts), np.uint8), offsets, lengths

    def prune(self, predicate, *, parquet_file=None) -> np.ndarray:
        """Bool mask (row_group_count,): True where a row group may hold matching rows."""
        predicate = as_predicate(predicate)
        bound = bind(predicate, self.schema)
        return evaluate(bound, self.row_group_count, lambda c, need: self.column_stats(c),
                        lambda c, need: self.bloom_index(c, parquet_file))

    def classify(self, predicate, *, parquet_file=None) -> tuple:
        """(maybe, always), bool masks (row_group_count,): `maybe` is `prune`'s mask; `always` (a
        subset) is True where the stats prove every row makes the predicate TRUE, so the row
        group matches whole. A row group without rows is never ALWAYS."""
        predicate = as_predicate(predicate)
        bound = bind(predicate, self.schema)
        maybe, always = classify_bound(bound, self.row_group_count, lambda c, need: self.column_stats(c),
                                       lambda c, need: self.bloom_index(c, parquet_file))
        always &= np.asarray(self.num_rows) > 0
        return maybe, always

    def timestamp_find(self, ts) -> int:
        """Designated-timestamp lookup, docs/format.md#timestamp-lookup (2*rg+1 before rg, 2*(rg+1) inside,
        2*count+1 after the last); needs row groups sorted by the designated timestamp."""
        mins, maxs = self._dts_bounds()
        return timestamp_find(mins, maxs, int(ts), self.num_rows)

    def timestamp_range(self, lo, hi) -> tuple:
        """[first, last) row groups overlapping [lo, hi) of the designated timestamp."""
        mins, maxs = self._dts_bounds()
        live = np.asarray(self.num_rows) > 0
        return timestamp_range(np.where(live, mins, np.iinfo(np.int64).max), maxs, int(lo), int(hi))

    def _dts_bounds(self):
        dts = self.designated_timestamp
        if dts < 0:
            raise PredicateError(f"{self.path} has no designated timestamp")
        if not self.is_sorted_by_designated_timestamp():
            raise PredicateError(f"{self.path} is not sorted by its designated timestamp")
        st = self.column_stats(dts)
        if st.kind not in (KIND_INT, KIND_UINT, KIND_ANYSIGN):
            # e.g. a descriptor retyped to VARCHAR: its bounds are not numbers to search
            raise PredicateError(f"{self.path}: designated timestamp column {dts} has {st.kind} stats, not "
                                 "integer ones")
        if not st.has[np.asarray(self.num_rows) > 0].all():
            raise PredicateError(f"{self.path}: some row groups lack designated-timestamp stats")
        return st.lo, st.hi

    def close(self):
        self._cache.clear()
        super().close()


def open(pm_path, *, parquet_size=None, verify=True, filesystem=None) -> ParquetMeta:  # noqa: A001
    """Map the committed part of a `_pm` file and pin a snapshot (None: the latest).

    With an fsspec `filesystem` the file is fetched in one request and read from memory."""
    if filesystem is not None:
        from .storage.objects import cat  # the object-store stack (S3 client, http) only for remote files

        return ParquetMeta(pm_path, parquet_size=parquet_size, verify=verify, data=cat(filesystem, pm_path))
    return ParquetMeta(pm_path, parquet_size=parquet_size, verify=verify)
