"""Tables: a directory whose partition sub-directories each hold `data.parquet` and `_pm`.

`Table.prune` evaluates a predicate over every row group of every partition at once: partitions
whose schemas agree share one bound predicate and one concatenated set of typed stat arrays, so
a thousand partitions cost one vectorised pass, not a thousand. `Table.scan` turns that decision
into a count, a byte-range plan and a stream of rows (scan.py).
"""

from __future__ import annotations

import os

import fsspec
import numpy as np
from fsspec.implementations.local import LocalFileSystem

from ..pm import layout as L
from ..errors import PmError
from ..meta import ParquetMeta, open as open_pm
from ..prune.bind import bind
from ..prune.arrow import to_arrow
from ..prune.expr import parse
from ..prune.rules import classify, evaluate
from ..prune.stats import KIND_BIGDEC, KIND_BYTES, ColumnStats, Schema, chunk_stats, column_records
from .decode import footer_schemas
from .ranges import DEFAULT_MAX_GAP
from .read_schema import ColumnSchemas, schema_key
from .s3 import S3Direct
from .scan import DEFAULT_MEMORY_BUDGET, Scan


def find_partitions(root, filesystem=None, *, io=None) -> list:
    """Relative paths (sorted, '/'-separated) of directories below root holding a `_pm`; `io`
    lists in the filesystem's place (Table passes its S3Direct)."""
    if filesystem is not None:
        base = filesystem._strip_protocol(root).rstrip("/")
        out = []
        for f in (io or filesystem).find(base):
            f = f.rstrip("/")
            if f.rsplit("/", 1)[-1] == L.PM_FILE_NAME and f.startswith(base):
                rel = f[len(base):].strip("/")
                out.append(rel.rsplit("/", 1)[0] if "/" in rel else "")
        if not out:
            raise PmError(f"no partitions (directories with a _pm) under {root!r}")
        return sorted(out)
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise PmError(f"table root {root!r} is not a directory")
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        if L.PM_FILE_NAME in files:
            rel = os.path.relpath(d, root)
            out.append("" if rel == "." else rel.replace(os.sep, "/"))
    return sorted(out)


class _Group:
    """Partitions with one schema: concatenated stats and bloom indexes, built lazily."""

    def __init__(self, schema, members):
        self.schema = schema
        self.members = members  # [(partition, ParquetMeta)]
        counts = [pm.row_group_count for _, pm in members]
        self.starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.n = int(self.starts[-1])
        self._stats = {}
        self._blooms = {}
        self._num_rows = None
        self._rows64 = None
        self.scan_cache = {}  # Scan's per-group lookups: (columns, predicate) -> column indexes
        self.positions = None  # members' indices in Table.partitions (set by Table.schema_groups)

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
            self._rows64 = np.concatenate([np.asarray(pm.num_rows, np.int64) for _, pm in self.members])
        return self._rows64

    def stats(self, col) -> ColumnStats:
        st = self._stats.get(col)
        if st is None:
            ct = self.schema.types[col]
            if ct.kind in (KIND_BYTES, KIND_BIGDEC):
                st = ColumnStats.concat([pm.column_stats(col) for _, pm in self.members])
            else:
                # Bounds that live in the chunk records: gather every partition's records of the
                # column (one kernel call, not a numpy view per file) and decode them in one
                # vectorised pass (the same per-row rules as column_stats).
                # (The list of views is not kept: the group must not pin the mappings.)
                st = chunk_stats(column_records([pm.chunks for _, pm in self.members], col), ct)
            self._stats[col] = st
        return st

    def blooms(self, col):
        if col in self._blooms:
            return self._blooms[col]
        parts = [pm.bloom_index(col) for _, pm in self.members]
        out = None
        if any(p is not None for p in parts):
            datas, offs, lens, pos = [], [], [], 0
            for (_, pm), p in zip(self.members, parts):
                if p is None:
                    offs.append(np.zeros(pm.row_group_count, np.int64))
                    lens.append(np.full(pm.row_group_count, -1, np.int64))
                    continue
                data, o, ln = p
                # Keep only the bitsets, not whole mappings, in the concatenated buffer.
                present = ln >= 0
                chunks = [np.asarray(data[int(a) : int(a) + int(b)]) for a, b in zip(o[present], ln[present])]
                new_o = np.zeros(len(o), np.int64)
                sizes = ln[present]
                new_o[present] = pos + np.concatenate([[0], np.cumsum(sizes)[:-1]]) if sizes.size else []
                pos += int(sizes.sum())
                datas.extend(chunks)
                offs.append(new_o)
                lens.append(ln)
            data = np.concatenate(datas) if datas else np.zeros(0, np.uint8)
            out = (data, np.concatenate(offs), np.concatenate(lens))
        self._blooms[col] = out
        return out


class Table:
    """A partitioned table of `data.parquet` + `_pm` directories. Use `open_table`."""

    def __init__(self, root, filesystem=None, *, partitions=None, partitioning="hive"):
        """partitions: the partition paths to use, relative to root (default: every directory
        below root holding a `_pm`, listed once); a Spark task passes its share this way.
        partitioning: "hive" (`key=value` directories name partition columns) or None."""
        if partitioning not in ("hive", None):
            raise PmError(f"partitioning must be 'hive' or None, not {partitioning!r}")
        self.filesystem = filesystem
        # What remote bytes are read through: S3Direct where it reproduces an s3fs filesystem's
        # reads exactly (a fraction of s3fs's CPU per request), else the filesystem itself.
        self.io = None if filesystem is None else (S3Direct.from_fsspec(filesystem) or filesystem)
        self.partitioning = partitioning
        self.root = filesystem._strip_protocol(root).rstrip("/") if filesystem is not None else os.fspath(root)
        self.partitions = find_partitions(self.root, filesystem, io=self.io) if partitions is None else sorted(partitions)
        self._metas = {}
        self._groups = None
        self._schemas = {}  # (schema_key, footer) -> ColumnSchemas, shared by every scan
        self._paths = {}  # partition -> parquet_path, shared by every scan
        self._filters = {}  # (predicate, decoded Arrow schema) -> Arrow filter expression (count)

    @property
    def data_filesystem(self):
        """What Parquet bytes are read through, with fsspec's `cat_file`: `io` for a remote table,
        fsspec's local filesystem for a local one."""
        return self.io if self.io is not None else fsspec.filesystem("file")

    def _dir(self, partition) -> str:
        if self.filesystem is not None:
            return f"{self.root}/{partition}" if partition else self.root
        return os.path.join(self.root, *partition.split("/")) if partition else self.root

    def pm_path(self, partition) -> str:
        d = self._dir(partition)
        return f"{d}/{L.PM_FILE_NAME}" if self.filesystem is not None else os.path.join(d, L.PM_FILE_NAME)

    def parquet_path(self, partition) -> str:
        path = self._paths.get(partition)  # computed once per partition: scans ask for it often
        if path is None:
            d = self._dir(partition)
            path = f"{d}/{L.PARQUET_FILE_NAME}" if self.filesystem is not None else \
                os.path.join(d, L.PARQUET_FILE_NAME)
            self._paths[partition] = path
        return path

    def arrow_filter(self, predicate, schema):
        """to_arrow(predicate, schema), kept for the table's life (bounded); predicate hashable."""
        key = (predicate, schema)
        expr = self._filters.get(key)
        if expr is None:
            if len(self._filters) >= 256:
                self._filters.clear()
            expr = self._filters[key] = to_arrow(predicate, schema)
        return expr

    def meta(self, partition):
        pm = self._metas.get(partition)
        if pm is None:
            pm = self._metas[partition] = open_pm(self.pm_path(partition), filesystem=self.io)
        return pm

    def column_schemas(self, partition, footer=True) -> ColumnSchemas:
        """The Arrow types a read of this partition gives: from its Parquet footer (one range read
        per distinct `_pm` column schema, kept while the table is open) or, footer=False, from
        `_pm` alone."""
        pm = self.meta(partition)
        key = (schema_key(pm), footer)
        s = self._schemas.get(key)
        if s is None:
            s = self._schemas[key] = footer_schemas(pm, self.data_filesystem, self.parquet_path(partition)) \
                if footer else ColumnSchemas.from_pm(pm)
        return s

    def scan(self, where=None, columns=None, *, batch_rows=None, footer=True, max_gap=DEFAULT_MAX_GAP,
             memory_budget=DEFAULT_MEMORY_BUDGET, schema=None) -> Scan:
        """The rows matching `where` (expression or SQL text; None: every row), `columns` of them
        (default: all of the first partition): see Scan. `schema`: an Arrow schema every batch is
        cast to (footer=False: also the types of columns `_pm` cannot give, see read_table)."""
        return Scan(self, where, columns, batch_rows=batch_rows, footer=footer, max_gap=max_gap,
                    memory_budget=memory_budget, schema=schema)

    def _prefetch(self):
        """Remote tables: fetch every `_pm` not open yet in one concurrent batch (fsspec `cat`)."""
        missing = [p for p in self.partitions if p not in self._metas]
        if self.filesystem is None or len(missing) < 2:
            return
        paths = {self.pm_path(p): p for p in missing}
        blobs = self.io.cat(list(paths), on_error="raise")
        for path, data in blobs.items():
            p = paths.get(path) or paths.get(self.filesystem._strip_protocol(path))
            if p is not None:
                self._metas[p] = ParquetMeta(path, data=data)

    def schema_groups(self):
        if self._groups is None:
            self._prefetch()
            by_schema, positions = {}, {}
            for i, p in enumerate(self.partitions):
                pm = self.meta(p)
                # Schema.of is pm.schema without the per-file cache: equal descriptors give the
                # same Schema object, so grouping 1,000 partitions is 1,000 dict hits.
                sch = Schema.of(pm)
                by_schema.setdefault(sch, []).append((p, pm))
                positions.setdefault(sch, []).append(i)
            self._groups = [_Group(s, m) for s, m in by_schema.items()]
            for g in self._groups:
                g.positions = np.array(positions[g.schema], np.int64)  # members' indices in self.partitions
        return self._groups

    def _group_masks(self, predicate):
        """[(group, mask over the group's concatenated row groups)]."""
        if isinstance(predicate, str):
            predicate = parse(predicate)
        return [(g, evaluate(bind(predicate, g.schema), g.n, g.stats, g.blooms)) for g in self.schema_groups()]

    def prune_masks(self, predicate) -> dict:
        """partition -> bool mask over its row groups."""
        out = {}
        for g, mask in self._group_masks(predicate):
            for k, (p, _) in enumerate(g.members):
                out[p] = mask[g.starts[k] : g.starts[k + 1]]
        return out

    def classify_masks(self, predicate) -> dict:
        """partition -> (maybe, always) over its row groups: ParquetMeta.classify's masks, from one
        vectorised pass per schema group (a row group without rows is never ALWAYS)."""
        if isinstance(predicate, str):
            predicate = parse(predicate)
        out = {}
        for g, maybe, always in self.group_classes(predicate):
            for k, (p, _) in enumerate(g.members):
                s, e = g.starts[k], g.starts[k + 1]
                out[p] = (maybe[s:e], always[s:e])
        return out

    def group_classes(self, predicate):
        """[(schema group, maybe, always)] over each group's concatenated row groups, one
        vectorised classify per group; `always` is cleared where a row group has no rows
        (predicate None: maybe and always are "has rows")."""
        out = []
        for g in self.schema_groups():
            rows = g.rows64 > 0
            if predicate is None:
                out.append((g, rows, rows))
                continue
            maybe, always = classify(bind(predicate, g.schema), g.n, g.stats, g.blooms)
            out.append((g, maybe, np.asarray(always, bool) & rows))
        return out

    def prune(self, predicate):
        """pyarrow.Table (partition, row_group, num_rows): one row per surviving row group, in
        partition order then row-group order."""
        import pyarrow as pa

        pos, rgs, rows = [], [], []
        for g, mask in self._group_masks(predicate):
            idx = np.nonzero(mask)[0]
            if not idx.size:
                continue
            # Survivors only: which member each is in, its row group there, its row count.
            k = np.searchsorted(g.starts, idx, side="right") - 1
            pos.append(g.positions[k])
            rg = idx - g.starts[k]
            rgs.append(rg.astype(np.int32))
            rows.append(g.survivor_rows(idx, k, rg).astype(np.int64))
        if not pos:
            return pa.table({"partition": pa.array([], pa.string()), "row_group": pa.array([], pa.int32()),
                             "num_rows": pa.array([], pa.int64())})
        pos, rgs, rows = np.concatenate(pos), np.concatenate(rgs), np.concatenate(rows)
        if len(pos) > 1 and np.any(np.diff(pos) < 0):  # several schema groups: back to partition order
            order = np.lexsort((rgs, pos))
            pos, rgs, rows = pos[order], rgs[order], rows[order]
        return pa.table({
            "partition": pa.array(np.array(self.partitions, dtype=object)[pos], pa.string()),
            "row_group": pa.array(rgs, pa.int32()),
            "num_rows": pa.array(rows, pa.int64()),
        })

    def close(self):
        for pm in self._metas.values():
            pm.close()
        self._metas.clear()
        self._groups = None
        self._schemas.clear()
        self._paths.clear()
        self._filters.clear()
        if isinstance(self.io, S3Direct):
            self.io.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<Table {self.root!r} partitions={len(self.partitions)}>"


def open_table(root, filesystem=None, *, storage_options=None, partitioning="hive") -> Table:
    """Open a table: a local directory, a path / URI on an fsspec `filesystem`, or without one an
    fsspec URL (`s3://bucket/table`) resolved with `storage_options` (a local path stays local:
    `_pm` files mapped, not fetched)."""
    if filesystem is None and (storage_options is not None or _is_url(root)):
        filesystem, root = fsspec.url_to_fs(os.fspath(root), **(storage_options or {}))
        if isinstance(filesystem, LocalFileSystem):
            filesystem = None
    elif filesystem is not None and storage_options is not None:
        raise PmError("pass storage_options= or a filesystem, not both: the filesystem is already configured")
    return Table(root, filesystem, partitioning=partitioning)


def _is_url(root) -> bool:
    return isinstance(root, str) and ("://" in root or "::" in root)
