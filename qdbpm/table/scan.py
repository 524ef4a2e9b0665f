"""`Table.scan`: the pruning decision as a plan, an exact count and a bounded stream of rows.

A scan classifies every row group once (`Table.classify_masks`): skipped, partial (may hold
matching rows) or full (statistics prove every row matches). Full row groups need no row filter,
so they never fetch a predicate-only column (its chunks are not even filler inside a coalesced
range) and `count()` takes their rows from `_pm` alone. Row groups without rows are never
fetched. Everything else goes through one path: consecutive row groups of a partition with the
same class form units of at most a quarter of the memory budget (`units.plan_units`), each
planned by `ranges.plan_many` (the one coalescing rule), fetched ahead by `pipeline.stream`, then decoded and
filtered exactly (`decode`). Hive partition keys decide first (`Table.key_plan`): partitions
they rule out are never opened, each other one is filtered by what its keys leave of the
predicate, and key columns are its key values repeated."""

from __future__ import annotations

from functools import partial

import numpy as np
import pyarrow as pa

from ..errors import ParquetFormatError, PmError
from ..prune import expr as E
from ..prune.rows import unscaled_ok, without_proven
from ..prune.staged import matching
from ..prune.filters import as_predicate
from . import decision, direct, offload, pool
from .decider import cached_filter, decider_for
from .kinds import kinds
from .native import skipped_metadata
from .decode import decode_chunks, decode_partition, filter_rows, filterable, late_columns, strict_views
from .pipeline import DEFAULT_WORKERS, ahead_chunks, stream
from .ranges import DEFAULT_MAX_GAP
from .shares import Part, lookup, proven
from .units import Job, plan_units

DEFAULT_MEMORY_BUDGET = 256 * 1024 * 1024  # bytes fetched or decoded and not yet yielded, per stream
MAX_UNIT_BYTES = 32 * 1024 * 1024  # a unit's fetched + decoded bytes (also at most budget / 4)

# Units whose columns `direct` takes are decoded by it (late materialisation when filtered);
# False: every unit through pyarrow's reader (the reference the direct path is tested against).
DIRECT = True
LAZY_READS = True  # local units split ahead are read off this thread (offload), not as admitted here
# partial row groups whose columns the worker starts before a read plans its units (0: none). Q6
# against stop 51's package: 2 gave 1.037, 3 1.035, 4 1.030 (a prototype: 3 1.06, 5 1.046, 8 1.033):
# more queue ahead of the first unit's own splits
EARLY_ROW_GROUPS = 3


class Scan:
    """What a query needs of a table, and its rows. Use `Table.scan`.

    `observer`, when set to a callable `(event, nbytes)`, sees the fetch pipeline: "plan" (the
    bytes a stream will charge), "admit" and "release" (a unit's bytes, fetched plus estimated
    decoded, entering and leaving the budget), "decoded" (after "admit": the decoded part) and
    "fetched" (one range's bytes as they arrive, called from a fetch thread)."""

    def __init__(self, table, where=None, columns=None, *, batch_rows=None, footer=True,
                 max_gap=DEFAULT_MAX_GAP, memory_budget=DEFAULT_MEMORY_BUDGET, schema=None):
        if batch_rows is not None and (not isinstance(batch_rows, int) or batch_rows < 1):
            raise PmError(f"batch_rows must be a positive integer or None, not {batch_rows!r}")
        if not isinstance(memory_budget, int) or memory_budget < 1:
            raise PmError(f"memory_budget must be a positive number of bytes, not {memory_budget!r}")
        if not table.partitions:
            raise PmError(f"no partitions under {table.root!r}")
        self.table = table
        self.predicate = as_predicate(where)
        self.batch_rows, self.footer, self.max_gap = batch_rows, footer, max_gap
        self.memory_budget = memory_budget
        self.cast_to = schema
        self.observer = None
        # The partition keys first: partitions they rule out are never opened (Table.key_plan).
        self.plan = table.key_plan(self.predicate)
        # QuestDB native partitions the query may need and leaves out (native="skip"): also in
        # to_table()'s schema metadata (native.skipped_metadata)
        self.skipped_native = self.plan.skipped_native
        self.keys = self.plan.keys  # key columns, appended after the file columns by default
        self._key_set = set(self.keys)
        first = table.meta(self.plan.reference)
        self.columns = list(first.column_names) + self.keys if columns is None else list(columns)
        # Per-partition setup only for partitions with survivors: column lookups and the
        # predicate's resolution once per schema group (its members share column names) and
        # residual (what the keys leave of the predicate).
        classes = table.group_classes(self.predicate, self.plan)
        if not footer:  # strict mode checks every partition the keys leave, in partition order
            self._check_strict()
        found, self._full_rows = [], 0
        # A residual reduced alike in many partitions (months proving their time conjuncts) is one
        # object: caches key on its identity, not on a hash that walks the tree (~200 calls in Q6).
        shared = {}
        for g, maybe, always in classes:
            cls = self.plan.class_of(g.positions)
            # id(residual) -> lookup's answer in g: every class's first (an error is raised as without survivors)
            looks = {id(r): lookup(g, r, self.columns, self.keys)
                     for r in map(self.plan.residuals.__getitem__, np.unique(cls).tolist())}
            idx = np.nonzero(maybe & (g.rows64 > 0))[0]  # a row group without rows is never read
            if not idx.size:
                continue
            full = always[idx]
            self._full_rows += int(g.rows64[idx[full]].sum())
            k = np.searchsorted(g.starts, idx, side="right") - 1
            members, first_at = np.unique(k, return_index=True)
            proofs = proven(g, cls, self.plan, idx, full, first_at)
            bounds = list(first_at) + [idx.size]
            for a, j in enumerate(members.tolist()):
                s, e = bounds[a], bounds[a + 1]
                c = int(cls[j])
                held = proofs.get(c)
                residual = without_proven(self.plan.residuals[c], held and [(kc, h[a]) for kc, h in held])
                if residual is not self.plan.residuals[c] and isinstance(residual, E.And):  # the class's conjuncts
                    residual = shared.setdefault((c, tuple(map(id, residual.children))), residual)
                look = looks.get(id(residual))  # every residual here is alive (plan, shared, found)
                if look is None:
                    look = looks[id(residual)] = lookup(g, residual, self.columns, self.keys)
                found.append((int(g.positions[j]), g, j, idx[s:e] - g.starts[j], full[s:e], c, look, residual))
        found.sort(key=lambda f: f[0])
        self._found, self._made, self._by = found, None, None  # the partitions' shares: `_parts`
        self._read_units = None
        self._schema = None
        self._filters = {}  # (residual id, decoded schema) -> the residual as an Arrow expression
        self._groups = {}  # decider.decider_for's cache
        self._deciders = {}  # (id of a residual, its columns) -> _decider's answer
        self._unscaled = {}  # (ids of a residual and the unit's fields) -> (fields, unscaled_ok's answer)
        self._memo_keys = {}  # direct.filter_memos' cache
        self._taken = {}  # id(unit) -> _direct_kinds' answer, from _presplit until the unit's decode
        self._early_left = {}  # offload.early's entries no split has taken yet (`_batches`)

    @property
    def _parts(self) -> list:
        """Each partition's share (shares.Part), in partition order: made on first use, each opening its
        member's `_pm` view; a read first starts its first units' columns on the worker (`_early`)."""
        if self._made is None:
            self._made = [self._part(g.members[j][0], g.members[j][1], rgs, full, look, pos, c, residual)
                          for pos, g, j, rgs, full, c, look, residual in self._found]
            self._by = {p.name: p for p in self._made}
        return self._made

    @property
    def _by_name(self) -> dict:
        self._parts  # made on first use, with this index of them
        return self._by

    # -- the decision ---------------------------------------------------------------------------

    def row_groups(self) -> pa.Table:
        """One row per surviving row group with rows, in partition then row-group order: columns
        `partition`, `path` (the Parquet object as the filesystem names it), `row_group` (int32),
        `num_rows` (int64) and `full` (statistics prove every row matches)."""
        return decision.row_groups([p for p in self._parts if len(p.rgs)])

    def byte_ranges(self) -> pa.Table:
        """The plan `to_reader` / `to_table` fetch, one row per chunk: `path`, `offset` and `length`
        (int64) of the coalesced request that serves it, `partition`, `row_group` (int32) and
        `column` (its name). Several chunks share a request; all-null chunks, answered without
        a fetch, are not listed."""
        return decision.byte_ranges(self._units_for_read())

    # -- rows -----------------------------------------------------------------------------------

    @property
    def schema(self) -> pa.Schema:
        """The schema of every batch (pyarrow.dataset's types with footer=True; see read_table).
        Reads the footer of each distinct `_pm` column schema among partitions with survivors."""
        if self._schema is None:
            if self.cast_to is not None:
                self._schema = self.cast_to
                if any(n in self._key_set and n not in self.cast_to.names for n in self.columns):
                    # a schema= of file columns: the key columns keep their own types
                    self._schema = pa.schema([self.cast_to.field(n) if n in self.cast_to.names else
                                              self.table.hive.schema.field(n) for n in self.columns],
                                             self.cast_to.metadata)
            else:
                seen, schemas, alike = set(), [], set()
                for p in [p for p in self._parts if len(p.rgs)] or [self._first_part()]:
                    # partitions sharing column schemas, columns and views give the same fields
                    same = (id(self.table.column_schemas(p.name, footer=self.footer)), tuple(p.want),
                            tuple(p.views.items()))
                    if same in alike:
                        continue
                    alike.add(same)
                    fields = self._fields(p)
                    key = tuple(fields)
                    if key not in seen:
                        seen.add(key)
                        schemas.append(pa.schema(fields))
                self._schema = schemas[0] if len(schemas) == 1 else pa.unify_schemas(schemas,
                                                                                      promote_options="permissive")
        return self._schema

    def to_reader(self) -> pa.RecordBatchReader:
        """The matching rows as a stream, in partition then row-group order: at most `batch_rows`
        rows per batch, fetched ahead within `memory_budget`."""
        return pa.RecordBatchReader.from_batches(self.schema, self._batches())

    def __arrow_c_stream__(self, requested_schema=None):
        return self.to_reader().__arrow_c_stream__(requested_schema)

    def to_table(self) -> pa.Table:
        """Every matching row in one pyarrow.Table (what read_table returns); native partitions
        a QuestDB table's query left out are named in its metadata (qdbpm.skipped_native)."""
        batches = list(self._batches())  # the schema after the first units are started (_batches)
        return skipped_metadata(pa.Table.from_batches(batches, self.schema), self.skipped_native)

    def count(self) -> int:
        """The exact number of matching rows: full row groups from `_pm` alone; partial ones by
        fetching and filtering only the predicate's columns."""
        total = self._full_rows  # summed over each schema group's full survivors at once
        jobs = [self._job(p, ~p.full, p.pred_cols, False) for p in self._parts if not p.full.all()]
        units = [u for us in plan_units(jobs, self._cap(), self.max_gap) for u in us]
        for unit, blobs in self._stream(units, inline=self._inline(units)):
            total += self._count(unit, blobs)
        return total

    def to_dataset(self):
        """The surviving row groups as a pyarrow.dataset.Dataset (`qdbpm.table.dataset`); rows are
        not filtered there: pass the filter to the dataset's own scan."""
        from .dataset import to_dataset  # pyarrow.dataset is heavy: loaded only when asked for

        return to_dataset(self.table, {p.name: p.rgs.copy() for p in self._parts if len(p.rgs)},
                          reference=self.plan.reference)

    # -- internals ------------------------------------------------------------------------------

    def _check_strict(self):
        at = {}
        for g in self.table.schema_groups(self.plan.positions):
            for j, (i, cls) in enumerate(zip(g.positions.tolist(), self.plan.class_of(g.positions).tolist())):
                at[i] = (g, j, cls)
        for i in self.plan.positions.tolist():
            g, j, cls = at[i]
            want, pred_cols = lookup(g, self.plan.residuals[cls], self.columns, self.keys)
            strict_views(g.members[j][1], want + [c for c in pred_cols if c not in want], self.cast_to)

    def _part(self, name, pm, rgs, full, look, position=None, cls=None, residual=None):
        """`residual`: what the partition's exact filter evaluates (None: every row matches)."""
        want, pred_cols = look
        need = want + [c for c in pred_cols if c not in want]
        views = {} if self.footer else strict_views(pm, need, self.cast_to)
        needs = () if cls is None else self.plan.needs[cls]
        return Part(name, pm, self.table.parquet_path(name), want, pred_cols, views, rgs, full, position,
                    residual, needs)

    def _first_part(self):
        """The reference partition's share (no survivors): what `schema` falls back to."""
        ref = self.plan.reference
        g = self.table.schema_groups(np.array([self.table.partitions.index(ref)]))[0]
        name, pm = g.members[0]
        return self._part(name, pm, np.zeros(0, np.int64), np.zeros(0, bool),
                          lookup(g, None, self.columns, self.keys))

    def _fields(self, p):
        """The Arrow fields of `columns` in partition p: its file's, then the keys'."""
        fields = self.table.column_schemas(p.name, footer=self.footer).fields(p.pm, p.want)
        names = p.pm.column_names
        by_name = {names[c]: f.with_type(p.views[c]) if c in p.views else f for c, f in zip(p.want, fields)}
        return [by_name[n] if n in by_name else self.table.hive.schema.field(n) for n in self.columns]

    def _with_keys(self, t, p, names) -> pa.Table:
        """`t` (rows of partition p) with the key columns `names` it lacks, p's values repeated."""
        values = self.table.hive.values if names else None
        for k in names:
            if k not in t.column_names:
                column = values.column(k).take(np.full(t.num_rows, p.position, np.int64))
                t = t.append_column(values.schema.field(k), column)
        return t

    def _units_for_read(self) -> list:
        if self._read_units is None:
            jobs = [j for p in self._parts for j in (self._job(p, p.full, p.want, True),
                                                      self._job(p, ~p.full, p.want + p.extra, False))]
            planned = plan_units(jobs, self._cap(), self.max_gap)
            self._read_units = [u for i in range(0, len(planned), 2)
                                for u in sorted(planned[i] + planned[i + 1], key=lambda u: u.row_groups[0])]
        return self._read_units

    def _job(self, p, select, cols, full) -> Job:
        """units.Job of p's survivors where `select` holds (a full one never fetches p.extra)."""
        idx = np.flatnonzero(select)
        return Job(p.name, p.pm, p.path, p.rgs[idx], idx, cols, full, p.extra if full else [])

    def _cap(self) -> int:
        """A unit's most bytes (fetched + decoded): a quarter of the budget, MAX_UNIT_BYTES at most."""
        return max(1, min(self.memory_budget // 4, MAX_UNIT_BYTES))

    def _inline(self, units) -> bool:
        """Fetch in the calling thread (no fetch thread started): a single range, or any local
        table (from the page cache a pread costs less than handing it to a fetch thread: thread
        starts and GIL hand-offs cost ~1/3 of a selective TPC-H read). Remote ranges are
        requested concurrently."""
        return self.table.filesystem is None or sum(len(u.plan.ranges) for u in units) <= 1

    def _lazy_reads(self) -> bool:
        """A read's units split ahead are read off this thread (local ranges, lanes to split them)."""
        return LAZY_READS and self.table.filesystem is None and direct.LANES > 1

    def _stream(self, units, inline=False, ahead=None, starting=None):
        note = self.observer or (lambda event, n: None)
        note("plan", sum(u.size for u in units))
        lazy = ahead is not None and self._lazy_reads()
        return stream(self.table.data_filesystem, units, self.memory_budget, workers=DEFAULT_WORKERS,
                      observer=self.observer, inline=inline, ahead=ahead, lazy=lazy, starting=starting)

    def _count(self, unit, blobs) -> int:
        """The matching rows of a unit: `_decode(...).num_rows`, with the Arrow filter built once
        per decoded schema."""
        p = self._by_name[unit.partition]
        schemas = self.table.column_schemas(p.name, footer=self.footer)
        if unit.full or p.residual is None:
            return int(np.asarray(unit.pm.num_rows, np.int64)[unit.row_groups].sum())
        taken = self._direct_kinds(unit, p, schemas)
        if taken is not None:
            fields, ks = taken
            try:
                unscaled, decide = unscaled_ok(p.residual, pa.schema(fields)), self._decider(p)
                got = None if decide is None else direct.count_filtered(
                    unit.pm, unit.row_groups, unit.columns, blobs, fields, ks, unit.plan.all_null, unscaled, decide)
                if got is not None:
                    return got
                t = direct.predicate_table(unit.pm, unit.row_groups, unit.columns, blobs, fields, ks,
                                           unit.plan.all_null, unscaled)
                return len(self._matching(p, t))
            except (direct.Unsupported, ParquetFormatError):
                pass  # pyarrow's reader decides, its errors included
        if unit.plan.all_null or p.views or not unit.columns:
            t = decode_partition(unit.pm, unit.row_groups, unit.columns, blobs, unit.plan.all_null, schemas, p.views)
        else:  # every chunk fetched, none all-null: decode them directly
            t = decode_chunks(unit.pm, unit.row_groups, unit.columns, blobs, schemas)
        t = filterable(self._with_keys(t, p, p.needs))
        return len(matching(t, p.residual, self._filter, f"partition {p.name!r}"))

    def _filter(self, residual, schema):
        return cached_filter(self.table, self._filters, residual, schema)

    def _decode(self, unit, blobs, ready=None, idle=None) -> pa.Table:
        """The unit's rows that match, with the key columns of `columns` (the exact filter reads
        those of its residual as constant columns too). `ready`: `_presplit`'s for this unit."""
        p = self._by_name[unit.partition]
        schemas = self.table.column_schemas(p.name, footer=self.footer)
        filtered = not unit.full and p.residual is not None
        taken = self._direct_kinds(unit, p, schemas)
        if taken is not None:
            t = self._decode_direct(unit, blobs, p, *taken, filtered, ready, idle)
            if t is not None:
                return self._with_keys(t, p, [k for k in self.keys if k in self.columns])
        late = []
        if not p.views:  # columns only returned, not filtered on: decoded as dictionaries, cast after
            cols = [c for c in unit.columns if not filtered or c not in p.pred_cols]
            late = late_columns(unit.pm, unit.row_groups, cols, schemas.fields(unit.pm, cols))
        t = decode_partition(unit.pm, unit.row_groups, unit.columns, blobs, unit.plan.all_null, schemas, p.views, late)
        if filtered:
            t = filter_rows(self._with_keys(t, p, p.needs), p.residual, self._filter, f"partition {p.name!r}")
        if late:
            fields = dict(zip(late, schemas.fields(unit.pm, late)))
            for c, f in fields.items():
                i = t.schema.get_field_index(f.name)
                t = t.set_column(i, f, t.column(i).cast(f.type))
        return self._with_keys(t, p, [k for k in self.keys if k in self.columns])

    def _direct_kinds(self, unit, p, schemas, keep=False):
        """(fields, kinds) when `direct` decodes this unit, else None (pyarrow's reader does).
        Worked out once per unit: `keep` holds it for the unit's decode (`_presplit` asks first)."""
        if not DIRECT or p.views or not unit.columns:
            return None
        if id(unit) in self._taken:
            return self._taken[id(unit)] if keep else self._taken.pop(id(unit))
        fields = schemas.fields(unit.pm, unit.columns)
        ks = kinds(unit.pm, unit.row_groups, unit.columns, schemas, fields, unit.direct)
        got = None if ks is None else (fields, ks)
        if keep:
            self._taken[id(unit)] = got
        return got

    def _matching(self, p, t):
        """Row numbers of a filter pass's table `t` (p's columns) where p's residual is TRUE."""
        t = self._with_keys(t, p, p.needs)
        return matching(t, p.residual, self._filter, f"partition {p.name!r}")

    def _decider(self, p):
        """For `direct.distinct_rows`: table -> {column: where its conjuncts of p's residual are
        TRUE}, or None when the residual reads keys or is not an AND of one-column conjuncts."""
        names = [p.pm.column_names[c] for c in p.pred_cols]
        key = (id(p.residual), bool(p.needs), tuple(names))  # the residual is alive with p
        got = self._deciders.get(key, False)
        if got is False:
            got = self._deciders[key] = None if p.needs else \
                decider_for(self._groups, p.residual, names, partial(cached_filter, self.table, self._filters))
        return got

    def _presplit(self, unit, blobs):
        """direct.presplit of a unit (`blobs`: its chunks, or its ranges' Futures while fetched
        ahead: `pipeline.ahead_chunks`) when `_decode` takes it through decode_filtered; else None."""
        p = self._by_name[unit.partition]
        if unit.full or p.residual is None:
            return None
        found = offload.sources(blobs, unit.plan.ranges)  # the worker's reads, or None
        blobs, lengths = (blobs, None) if isinstance(blobs, dict) else ahead_chunks(blobs, unit.plan.ranges)
        if blobs is None:
            return None
        if self._direct_kinds(unit, p, self.table.column_schemas(p.name, footer=self.footer), keep=True) is None:
            return None
        later = [c for c in unit.columns if c not in p.pred_set]
        # the predicate's columns too, where the filter pass is distinct_rows' (it takes them split)
        decide, (fields, ks) = self._decider(p), self._taken[id(unit)]
        first = [c for c in unit.columns if c in p.pred_set] if decide is not None else []
        # on the worker, the filter pass itself too, where the Decider's memos answer
        memos = found and direct.filter_memos(unit.pm, unit.columns, first, fields, ks, self._unscaled_of(p, fields),
                                              decide, self._memo_keys)
        return direct.presplit(unit.pm, unit.row_groups, first, later, blobs, unit.plan.all_null, lengths, found,
                               memos or None, unit.size, self._early_left)

    def _decode_direct(self, unit, blobs, p, fields, ks, filtered, ready=None, idle=None):
        """`_decode` without pyarrow's reader (`direct`), or None where a chunk turns out not to be
        that path's: then pyarrow's reader decides, its errors included."""
        try:
            if not filtered:
                arrays = direct.decode(unit.pm, unit.row_groups, unit.columns, blobs, fields, ks, unit.plan.all_null)
                return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
            unscaled = self._unscaled_of(p, fields)
            return direct.decode_filtered(unit.pm, unit.row_groups, unit.columns, blobs, fields, ks,
                                          unit.plan.all_null, p.pred_set, lambda t: self._matching(p, t),
                                          unscaled, self._decider(p), returned=p.want_set, ready=ready, idle=idle)
        except (direct.Unsupported, ParquetFormatError):
            return None

    def _unscaled_of(self, p, fields):
        """prune.rows.unscaled_ok of p's residual over `fields` (a file schema's list), worked out
        once; keyed by identity (hashing pyarrow fields costs ~10 us a unit), the list kept with it."""
        key = (id(p.residual), id(fields))  # the residual is alive with p
        if key not in self._unscaled:
            self._unscaled[key] = (fields, unscaled_ok(p.residual, pa.schema(fields)))
        return self._unscaled[key][1]

    def _early(self) -> dict:
        """The worker's share of the first EARLY_ROW_GROUPS partial row groups (`direct.early_splits`),
        queued before the shares and units are made, where units are split ahead on it (lazy local
        reads) and the scan has several partitions; offload.early's entries."""
        if not (offload.ENABLED and self._lazy_reads() and len(self._found) > 1):
            return {}
        def items(left=EARLY_ROW_GROUPS):  # each member's view opened once the one before is started
            for pos, g, j, rgs, full, c, (want, pred_cols), residual in self._found:
                if left <= 0:
                    return
                if residual is not None and not full.all():
                    name, pm = g.members[j]
                    partial_rgs = rgs[~full][:left].tolist()
                    left -= len(partial_rgs)
                    yield pm, self.table.parquet_path(name), partial_rgs, [x for x in want if x not in pred_cols]

        return direct.early_splits(items(), self._cap())

    def _batches(self):
        arrow_pool, freed = pa.default_memory_pool(), 0
        ahead, started = [], {}  # started: id(unit) -> its presplit (None: not split ahead)
        def starting(u, fetching):  # as below, before u's reads are waited for (lazy reads)
            if ahead and started.get(id(u)) is None:
                started[id(u)] = self._presplit(u, fetching)

        try:
            self._early_left = self._early()  # taken by the first units' splits (`_presplit`)
            units = self._units_for_read()
            for unit, blobs in self._stream(units, inline=self._inline(units), ahead=ahead, starting=starting):
                # Arrow's allocator keeps freed pages for reuse; handing them back once per half
                # budget streamed keeps RSS near the budget on long scans, at one call per ~budget/2.
                freed += unit.size
                if freed > self.memory_budget // 2:
                    arrow_pool.release_unused()
                    freed = 0
                # Several units: the pool splits the next ones (admitted, fetched) while this thread
                # decodes this one and steals what it has not started; a lone unit: decode_filtered.
                if ahead and started.get(id(unit)) is None:  # the first (reads not lazy), or one fetched late
                    started[id(unit)] = self._presplit(unit, blobs)
                for u, fetching in ahead:
                    if started.get(id(u)) is None:
                        started[id(u)] = self._presplit(u, fetching)
                target = self.schema  # worked out once the first units are started: the pool splits meanwhile
                t = self._decode(unit, blobs, started.pop(id(unit), None), lambda: pool.steal_one(started))
                del blobs
                t = t.select(self.columns)
                if not t.schema.equals(target, check_metadata=True):
                    t = t.cast(target)
                for b in t.to_batches(max_chunksize=self.batch_rows):
                    if b.num_rows:
                        yield b
        finally:  # closed early (a reader dropped, a failure): the pool drops what it has not started
            pool.drop_all(started)
            offload.discard(self._early_left)

    def __repr__(self):
        return f"<Scan {self.table.root!r} where={self.predicate!r} columns={self.columns}>"

