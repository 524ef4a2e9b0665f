"""Tables: a directory whose partition sub-directories each hold `data.parquet` and `_pm`.

`Table.prune` evaluates a predicate over every row group of every partition at once: partitions
whose schemas agree share one bound predicate and one concatenated set of typed stat arrays, so
a thousand partitions cost one vectorised pass, not a thousand. `Table.scan` turns that decision
into a count, a byte-range plan and a stream of rows (scan.py).

Hive partition keys (`day=01/` directories, typed by partitioning.py) come first: `key_plan`
decides from the key values alone which partitions may hold a matching row (prune.keys), and
only those partitions' `_pm` are opened or fetched.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from ..pm import layout as L
from ..pm.batch import MISSING, PmBatch
from ..questdb.table_dir import META_FILE, TXN_FILE, is_questdb_table, read_table_dir
from ..errors import PmError, PredicateError, StorageError
from ..meta import ParquetMeta, open as open_pm
from ..prune.bind import bind
from ..prune.arrow import to_arrow
from ..prune.compiled import arrow_key, compiled
from ..prune.filters import as_predicate
from ..prune.rules import classify, evaluate
from ..prune.stats import Schema
from ..storage.objects import close_reader, reader_for
from .. import arrays
from .decode import footer_schemas
from .group import Group, Members
from .native import may_touch, skipped_metadata
from .listing import find_partitions, list_partitions, read_partitions, remote_keys
from .key_plan import KeyPlan, plan as plan_keys
from .ranges import DEFAULT_MAX_GAP
from .read_schema import ColumnSchemas, schema_key
from .scan import DEFAULT_MEMORY_BUDGET, Scan


BATCH = True  # local tables open every `_pm` as one PmBatch; False: one by one (the reference)
RETRIES = 3  # reads of a QuestDB table's _txn while the partitions it names vanish


class Table:
    """A partitioned table of `data.parquet` + `_pm` directories. Use `open_table`."""

    def __init__(self, root, filesystem=None, *, partitions=None, partitioning="hive", layout=None,
                 native="error"):
        """partitions: the partition paths to use, relative to root (default: every directory
        below root holding a `_pm`, listed once); a Spark task passes its share this way.
        partitioning: "hive" (`key=value` directories name partition columns, typed as pyarrow
        infers them), a pyarrow.Schema of their types, or None (opaque directories).
        layout: "questdb" (a QuestDB table directory: the partitions `_txn` commits, each `_pm`
        pinned to its committed Parquet size), "directories" (every directory holding a `_pm`),
        or None: "questdb" when root holds a `_txn` and a `_meta` (and `partitions` is not given).
        native: what a query that may need a QuestDB table's native (non-Parquet) partition does:
        "error" (a PmError naming them) or "skip" (reported as `skipped_native`)."""
        if not (isinstance(partitioning, pa.Schema) or partitioning is None or partitioning == "hive"):
            raise PmError(f"partitioning must be 'hive', a pyarrow.Schema or None, not {partitioning!r}")
        if layout not in (None, "questdb", "directories"):
            raise PmError(f"layout must be 'questdb', 'directories' or None, not {layout!r}")
        if native not in ("error", "skip"):
            raise PmError(f"native must be 'error' or 'skip', not {native!r}")
        self.filesystem = filesystem
        # What remote bytes are read through: S3Direct where it reproduces the filesystem, else it.
        self.io = None if filesystem is None else reader_for(filesystem)
        self.root = filesystem._strip_protocol(root).rstrip("/") if filesystem is not None else os.fspath(root)
        self.native = native
        self.questdb = None  # questdb.table_dir.QuestDbTable of a QuestDB table directory
        self._pins = {}  # partition -> the committed Parquet size its `_pm` snapshot is pinned to
        self._batch = None
        found = None  # a remote root's listing: it also tells a QuestDB table (no extra request)
        if layout is None and partitions is None and filesystem is not None:
            found = remote_keys(self.root, filesystem, io=self.io)
        if layout == "questdb" or (layout is None and partitions is None and (
                is_questdb_table(self.root) if filesystem is None else
                all(f"{self.root}/{n}" in found for n in (TXN_FILE, META_FILE)))):
            partitioning = None  # QuestDB names partitions by time, never key=value
            self.partitions = self._open_questdb(partitions)
        elif partitions is None and filesystem is None and BATCH:
            # Local tables: every `_pm` read while the tree is walked, checked in one kernel call
            # (pm/batch.py); opened one by one only where read (Members) or not taken by the batch.
            self.partitions, self._batch = read_partitions(self.root, self._pm_paths)
        elif partitions is None:
            self.partitions = sorted(list_partitions(self.root, filesystem, io=self.io, identities=False,
                                                     found=found) if filesystem is not None else
                                     find_partitions(self.root))
        else:
            self.partitions = sorted(partitions)
        self.partitioning = partitioning
        self._metas = {}
        self._positions = None  # partition -> its index in partitions, made when first asked
        self._groups = None
        self._subgroups = {}  # surviving positions (bytes) -> schema groups of those partitions
        self.hive = self._discover(partitioning)
        self._schemas = {}  # (schema_key, footer) -> ColumnSchemas, shared by every scan
        self._part_schemas = {}  # (partition, footer) -> the same, found without its schema_key
        self._paths = {}  # partition -> parquet_path, shared by every scan
        self._filters = {}  # (predicate, decoded Arrow schema) -> Arrow filter expression (count)
        self._skipped = ()  # the last prune's skipped native partitions

    def _discover(self, partitioning):
        """The partitions' hive keys (partitioning.HivePartitions), None without any."""
        explicit = isinstance(partitioning, pa.Schema)
        if partitioning is None or not (explicit or any("=" in p for p in self.partitions)):
            return None
        # pyarrow.dataset is heavy (~0.3 s to import): loaded only for key=value directories
        from .partitioning import discover

        hive = discover(self.partitions, schema=partitioning if explicit else None)
        return hive if hive.schema.names else None

    @property
    def partition_keys(self) -> pa.Table:
        """One row per partition (in `partitions` order), one typed column per hive key."""
        if self.hive is None:  # no column, one row per partition
            return pa.table({"_": pa.nulls(len(self.partitions))}).drop(["_"])
        return self.hive.values

    @property
    def data_filesystem(self):
        """What Parquet bytes are read through, with fsspec's `cat_file`: `io` for a remote table,
        fsspec's local filesystem for a local one."""
        import fsspec  # ~50 ms: loaded by the first read, not by open_table or prune

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
        """to_arrow(predicate, schema), kept for the process (`qdbpm.prune.compiled`), or where its
        literals cannot key that, for the table's life (bounded); predicate hashable."""
        expr = compiled(predicate, schema)
        if expr is not None:
            return expr
        key = (predicate, arrow_key(schema))
        expr = self._filters.get(key)
        if expr is None:
            if len(self._filters) >= 256:
                self._filters.clear()
            expr = self._filters[key] = to_arrow(predicate, schema)
        return expr

    def _open_questdb(self, only):
        """The Parquet partitions `_txn` commits (of `only`, when given), each `_pm` pinned to its
        committed Parquet size; locally all read as one batch. A `_pm` that vanished since `_txn`
        was read (QuestDB purged a replaced version) makes `_txn` be read again, then a
        StorageError."""
        for attempt in range(RETRIES):
            self.questdb = qt = read_table_dir(self.root, self.io)
            names = [p.name for p in qt.parquet if only is None or p.name in set(only)]
            if only is not None and len(names) != len(set(only)):
                raise PmError(f"{self.root}: not committed Parquet partitions of this QuestDB table: "
                              f"{sorted(set(only) - set(names))}")
            self._pins = {p.name: p.parquet_size for p in qt.parquet}
            if self.filesystem is not None or not BATCH:
                return names
            self._batch = PmBatch(self._pm_paths(names), parquet_sizes=[self._pins[n] for n in names])
            gone = [names[i] for i in np.flatnonzero(self._batch.status == MISSING).tolist()]
            if not gone:
                return names
        raise StorageError(f"{self.root}: partitions {gone} vanished {RETRIES} times after _txn named them "
                           "(QuestDB purges replaced versions): the table changes faster than it can be read")

    def _pm_paths(self, partitions):
        return _Paths(self, partitions)

    def meta(self, partition, position=None):
        """The open `_pm` of `partition` (at `position` in `partitions`, when known): from the
        batch's bytes when it holds them (checked there, CRC included), else opened alone."""
        pm = self._metas.get(partition)
        if pm is None:
            b = self._local_batch()
            if b is not None and position is None:
                if self._positions is None:
                    self._positions = {p: i for i, p in enumerate(self.partitions)}
                position = self._positions.get(partition)
            pin = self._pins.get(partition)
            if b is not None and position is not None and b.ok[position]:
                pm = ParquetMeta(b.paths[position], data=b.data(position), verify=False, parquet_size=pin)
            else:
                pm = open_pm(self.pm_path(partition), filesystem=self.io, parquet_size=pin)
            self._metas[partition] = pm
        return pm

    def _member(self, i):
        return self.meta(self.partitions[i], i)

    def _local_batch(self):
        """The PmBatch of every partition's `_pm` (local tables; read on first use when the
        partitions were given), None for remote ones."""
        if self._batch is None and self.filesystem is None and BATCH:
            self._batch = PmBatch(self._pm_paths(self.partitions),
                                  parquet_sizes=[self._pins.get(p) for p in self.partitions] if self._pins else None)
        return self._batch

    def column_schemas(self, partition, footer=True) -> ColumnSchemas:
        """The Arrow types a read of this partition gives: from its Parquet footer (one range read
        per distinct `_pm` column schema, kept while the table is open) or, footer=False, from
        `_pm` alone."""
        s = self._part_schemas.get((partition, footer))  # a scan asks once per unit, and again
        if s is not None:
            return s
        pm = self.meta(partition)
        key = (schema_key(pm), footer)
        s = self._schemas.get(key)
        if s is None:
            s = self._schemas[key] = footer_schemas(pm, self.data_filesystem, self.parquet_path(partition)) \
                if footer else ColumnSchemas.from_pm(pm)
        self._part_schemas[(partition, footer)] = s
        return s

    def scan(self, where=None, columns=None, *, batch_rows=None, footer=True, max_gap=DEFAULT_MAX_GAP,
             memory_budget=DEFAULT_MEMORY_BUDGET, schema=None) -> Scan:
        """The rows matching `where` (expression or SQL text; None: every row), `columns` of them
        (default: all of the first partition): see Scan. `schema`: an Arrow schema every batch is
        cast to (footer=False: also the types of columns `_pm` cannot give, see read_table)."""
        return Scan(self, where, columns, batch_rows=batch_rows, footer=footer, max_gap=max_gap,
                    memory_budget=memory_budget, schema=schema)

    def _prefetch(self, positions=None):
        """Remote tables: fetch every `_pm` not open yet (of the partitions at `positions`, default
        all) in one concurrent batch (fsspec `cat`)."""
        names = self.partitions if positions is None else [self.partitions[i] for i in positions]
        missing = [p for p in names if p not in self._metas]
        if self.filesystem is None or len(missing) < 2:
            return
        paths = {self.pm_path(p): p for p in missing}
        blobs = self.io.cat(list(paths), on_error="raise")
        for path, data in blobs.items():
            p = paths.get(path) or paths.get(self.filesystem._strip_protocol(path))
            if p is not None:
                self._metas[p] = ParquetMeta(path, data=data, parquet_size=self._pins.get(p))

    def schema_groups(self, positions=None):
        """The partitions at `positions` (indices into `partitions`, ascending; default all), their
        `_pm` opened (fetched in one batch), grouped by schema; kept while the table is open."""
        if positions is None or len(positions) == len(self.partitions):
            if self._groups is None:
                self._groups = self._group(range(len(self.partitions)))
            return self._groups
        key = np.asarray(positions, np.int64).tobytes()
        groups = self._subgroups.get(key)
        if groups is None:
            if len(self._subgroups) >= 16:
                self._subgroups.clear()
            groups = self._subgroups[key] = self._group(positions)
        return groups

    def _group(self, positions) -> list:
        positions = np.asarray(positions, np.int64)
        b = self._local_batch()
        if b is None:
            return self._group_opened(positions)
        # Batch members: grouped by the kernel's schema ids (byte-equal descriptors and names),
        # ids with equal Schema merged; one member per id opened, for its Schema.
        ok = b.ok[positions]
        inb, solo = positions[ok], positions[~ok]
        by_schema = {}
        if inb.size:
            sid = b.schema_id[inb]
            for s in np.unique(sid).tolist():
                sch = Schema.of(self._member(int(b.reps[s])))
                by_schema.setdefault(sch, []).append(inb[sid == s])
        groups = []
        for sch, parts in by_schema.items():
            at = np.sort(np.concatenate(parts)) if len(parts) > 1 else parts[0]
            names = [self.partitions[i] for i in at.tolist()]
            g = Group(sch, Members(names, lambda k, at=at: self._member(int(at[k]))), b, at)
            g.positions = at
            groups.append(g)
        groups.extend(self._group_opened(solo) if solo.size else [])  # each opened alone (or its error)
        groups.sort(key=lambda g: int(g.positions[0]) if len(g.positions) else -1)
        return groups

    def _group_opened(self, positions) -> list:
        """Groups of partitions whose `_pm` are opened one by one (remote, or outside the batch)."""
        self._prefetch(positions)
        by_schema, at = {}, {}
        for i in positions.tolist():
            p = self.partitions[i]
            pm = self.meta(p)
            # Schema.of is pm.schema without the per-file cache: equal descriptors give the
            # same Schema object, so grouping 1,000 partitions is 1,000 dict hits.
            sch = Schema.of(pm)
            by_schema.setdefault(sch, []).append((p, pm))
            at.setdefault(sch, []).append(int(i))
        groups = [Group(s, m) for s, m in by_schema.items()]
        for g in groups:
            g.positions = np.array(at[g.schema], np.int64)  # members' indices in self.partitions
        return groups

    def key_plan(self, predicate) -> KeyPlan:
        """Which partitions `predicate` may hold a matching row in, from their hive keys alone,
        before any of their `_pm` is opened, and what remains to decide in each (key_plan.plan);
        for a QuestDB table also which native partitions it may need (`native`)."""
        predicate = as_predicate(predicate)
        plan = plan_keys(self, predicate)
        if self.questdb is not None and self.questdb.native:
            plan.skipped_native = self._native_touched(predicate)
        return plan

    def _native_touched(self, predicate) -> tuple:
        """Names of the native partitions `predicate` may need rows of, decided from their
        designated-timestamp ranges (table/native.py); raises unless native="skip"."""
        parts = self.questdb.native
        schema = ts = None
        if self.partitions:  # the Parquet partitions' schema types the predicate's literals
            pm = self.meta(self.partitions[0])
            schema, name = Schema.of(pm), self.questdb.meta.timestamp_name
            ts = pm.column_names.index(name) if name in pm.column_names else None
        hit = may_touch(predicate, schema, ts, [p.lo for p in parts], [p.hi for p in parts],
                        [p.row_count for p in parts])
        names = tuple(p.name for p, h in zip(parts, hit.tolist()) if h)
        if names and self.native == "error":
            raise PmError(f"{self.root}: the query may need rows of native (non-Parquet) partitions "
                          f"{list(names)}, which qdbpm cannot read (no _pm); narrow the designated "
                          f"timestamp range or open the table with native='skip' to leave them out")
        return names

    def _group_masks(self, predicate):
        """[(group, maybe over the group's concatenated row groups)] of the partitions the keys leave."""
        predicate = as_predicate(predicate)
        if predicate is None:
            raise PredicateError("not a predicate: None")
        plan = self.key_plan(predicate)
        self._skipped = plan.skipped_native
        return [(g, self._masks(g, plan, False)[0]) for g in self.schema_groups(plan.positions)]

    def prune_masks(self, predicate) -> dict:
        """partition -> bool mask over its row groups (partitions its keys rule out are absent)."""
        out = {}
        for g, mask in self._group_masks(predicate):
            for k, p in enumerate(g.names):
                out[p] = mask[g.starts[k] : g.starts[k + 1]]
        return out

    def classify_masks(self, predicate) -> dict:
        """partition -> (maybe, always) over its row groups: ParquetMeta.classify's masks, from one
        vectorised pass per schema group (a row group without rows is never ALWAYS; partitions
        the keys rule out are absent)."""
        predicate = as_predicate(predicate)
        out = {}
        for g, maybe, always in self.group_classes(predicate):
            for k, p in enumerate(g.names):
                s, e = g.starts[k], g.starts[k + 1]
                out[p] = (maybe[s:e], always[s:e])
        return out

    def group_classes(self, predicate, plan=None):
        """[(schema group, maybe, always)] over each group's concatenated row groups, one
        vectorised classify per group (and per residual its members' keys leave); `always` is
        cleared where a row group has no rows (predicate None: maybe and always are "has rows").
        Only the partitions `plan` (default: `key_plan(predicate)`) keeps are grouped."""
        plan = self.key_plan(predicate) if plan is None else plan
        out = []
        for g in self.schema_groups(plan.positions):
            maybe, always = self._masks(g, plan, True)
            out.append((g, maybe, np.asarray(always, bool) & (g.rows64 > 0)))
        return out

    def _masks(self, g, plan, always):
        """(maybe, always or None) over g's row groups: each member under its class's residual."""
        cls = plan.class_of(g.positions)
        if not (cls != cls[0]).any():
            return self._class_masks(g, plan, int(cls[0]), always, None)
        per_rg = np.repeat(cls, np.diff(g.starts))
        maybe, sure = np.zeros(g.n, bool), np.zeros(g.n, bool) if always else None
        for c in np.unique(cls).tolist():
            sel = per_rg == c
            m, a = self._class_masks(g, plan, c, always, sel)  # costly lookups for its members only
            maybe[sel] = np.broadcast_to(m, g.n)[sel]
            if always:
                sure[sel] = np.broadcast_to(a, g.n)[sel]
        return maybe, sure

    def _class_masks(self, g, plan, c, always, need):
        """Masks under class c's residual, exact where `need` (None: every row group)."""
        if plan.residuals[c] is None:  # every row matches: every row group with rows
            rows = g.rows64 > 0
            return rows, rows
        upper, lower = plan.bounds(c)
        if not always:
            return evaluate(bind(upper, g.schema), g.n, g.stats, g.blooms, need), None
        maybe, sure = classify(bind(upper, g.schema), g.n, g.stats, g.blooms, need)
        if lower is not upper:  # ALWAYS under the lower bound, only where the upper one may match
            sure = classify(bind(lower, g.schema), g.n, g.stats, g.blooms, maybe)[1] & maybe
        return maybe, sure

    def prune(self, predicate):
        """pyarrow.Table (partition, row_group, num_rows): one row per surviving row group, in
        partition order then row-group order (native partitions left out: in its metadata, see
        skipped_metadata)."""
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
            pos, rgs, rows = [np.zeros(0, np.int64)], [np.zeros(0, np.int32)], [np.zeros(0, np.int64)]
        pos, rgs, rows = np.concatenate(pos), np.concatenate(rgs), np.concatenate(rows)
        if len(pos) > 1 and np.any(np.diff(pos) < 0):  # several schema groups: back to partition order
            order = np.lexsort((rgs, pos))
            pos, rgs, rows = pos[order], rgs[order], rows[order]
        return skipped_metadata(pa.table({
            "partition": arrays.runs(self.partitions, pos),
            "row_group": arrays.numbers(rgs, pa.int32()),
            "num_rows": arrays.numbers(rows, pa.int64()),
        }), self._skipped)

    def close(self):
        for pm in self._metas.values():
            pm.close()
        self._metas.clear()
        self._batch = None
        self._groups = None
        self._subgroups.clear()
        self._schemas.clear()
        self._part_schemas.clear()
        self._paths.clear()
        self._filters.clear()
        close_reader(self.io)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<Table {self.root!r} partitions={len(self.partitions)}>"


class _Paths:
    """The `_pm` paths of `partitions`, made when asked (a batch asks only for messages and
    one-file opens)."""

    def __init__(self, table, partitions):
        self.table, self.partitions = table, partitions

    def __len__(self):
        return len(self.partitions)

    def __getitem__(self, i):
        return self.table.pm_path(self.partitions[i])

    def __iter__(self):
        return (self[i] for i in range(len(self)))


def open_table(root, filesystem=None, *, storage_options=None, partitioning="hive", layout=None,
               native="error") -> Table:
    """Open a table: a local directory, a path / URI on an fsspec `filesystem`, or without one an
    fsspec URL (`s3://bucket/table`) resolved with `storage_options` (a local path stays local:
    `_pm` files mapped, not fetched)."""
    if filesystem is None and (storage_options is not None or _is_url(root)):
        import fsspec.implementations.local  # (and fsspec) with the first URL, not with every open

        filesystem, root = fsspec.url_to_fs(os.fspath(root), **(storage_options or {}))
        if isinstance(filesystem, fsspec.implementations.local.LocalFileSystem):
            filesystem = None
    elif filesystem is not None and storage_options is not None:
        raise PmError("pass storage_options= or a filesystem, not both: the filesystem is already configured")
    return Table(root, filesystem, partitioning=partitioning, layout=layout, native=native)


def _is_url(root) -> bool:
    return isinstance(root, str) and ("://" in root or "::" in root)
