"""Tables: a directory whose partition sub-directories each hold `data.parquet` and `_pm`.

`Table.prune` evaluates a predicate over every row group of every partition at once: partitions
whose schemas agree share one bound predicate and one concatenated set of typed stat arrays, so
a thousand partitions cost one vectorised pass, not a thousand.
"""

from __future__ import annotations

import os

import numpy as np

from .errors import PmError
from .reader import open as open_pm
from .stats import ColumnStats

PM_NAME = "_pm"
DATA_NAME = "data.parquet"


def find_partitions(root, filesystem=None) -> list:
    """Relative paths (sorted, '/'-separated) of directories below root holding a `_pm`."""
    if filesystem is not None:
        base = filesystem._strip_protocol(root).rstrip("/")
        out = []
        for f in filesystem.find(base):
            f = f.rstrip("/")
            if f.rsplit("/", 1)[-1] == PM_NAME and f.startswith(base):
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
        if PM_NAME in files:
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

    def stats(self, col) -> ColumnStats:
        st = self._stats.get(col)
        if st is None:
            st = self._stats[col] = ColumnStats.concat([pm.column_stats(col) for _, pm in self.members])
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

    def __init__(self, root, filesystem=None):
        self.filesystem = filesystem
        self.root = filesystem._strip_protocol(root).rstrip("/") if filesystem is not None else os.fspath(root)
        self.partitions = find_partitions(self.root, filesystem)
        self._metas = {}
        self._groups = None

    def _dir(self, partition) -> str:
        if self.filesystem is not None:
            return f"{self.root}/{partition}" if partition else self.root
        return os.path.join(self.root, *partition.split("/")) if partition else self.root

    def pm_path(self, partition) -> str:
        d = self._dir(partition)
        return f"{d}/{PM_NAME}" if self.filesystem is not None else os.path.join(d, PM_NAME)

    def parquet_path(self, partition) -> str:
        d = self._dir(partition)
        return f"{d}/{DATA_NAME}" if self.filesystem is not None else os.path.join(d, DATA_NAME)

    def meta(self, partition):
        pm = self._metas.get(partition)
        if pm is None:
            pm = self._metas[partition] = open_pm(self.pm_path(partition), filesystem=self.filesystem)
        return pm

    def _schema_groups(self):
        if self._groups is None:
            by_schema = {}
            for p in self.partitions:
                pm = self.meta(p)
                by_schema.setdefault(pm.schema, []).append((p, pm))
            self._groups = [_Group(s, m) for s, m in by_schema.items()]
        return self._groups

    def prune_masks(self, predicate) -> dict:
        """partition -> bool mask over its row groups."""
        from .expr import parse
        from .prune import bind, evaluate

        if isinstance(predicate, str):
            predicate = parse(predicate)
        out = {}
        for g in self._schema_groups():
            bound = bind(predicate, g.schema)
            mask = evaluate(bound, g.n, g.stats, g.blooms)
            for k, (p, _) in enumerate(g.members):
                out[p] = mask[g.starts[k] : g.starts[k + 1]]
        return out

    def prune(self, predicate):
        """pyarrow.Table (partition, row_group, num_rows): one row per surviving row group."""
        import pyarrow as pa

        masks = self.prune_masks(predicate)
        parts, rgs, rows = [], [], []
        for p in self.partitions:
            idx = np.nonzero(masks[p])[0]
            if idx.size:
                parts.append(np.full(idx.size, p, dtype=object))
                rgs.append(idx.astype(np.int32))
                rows.append(np.asarray(self.meta(p).num_rows)[idx].astype(np.int64))
        if not parts:
            return pa.table({"partition": pa.array([], pa.string()), "row_group": pa.array([], pa.int32()),
                             "num_rows": pa.array([], pa.int64())})
        return pa.table({
            "partition": pa.array(np.concatenate(parts), pa.string()),
            "row_group": pa.array(np.concatenate(rgs), pa.int32()),
            "num_rows": pa.array(np.concatenate(rows), pa.int64()),
        })

    def close(self):
        for pm in self._metas.values():
            pm.close()
        self._metas.clear()
        self._groups = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<Table {self.root!r} partitions={len(self.partitions)}>"


def open_table(root, filesystem=None) -> Table:
    """Open a table directory (local, or a path / URI on an fsspec `filesystem`)."""
    return Table(root, filesystem)
