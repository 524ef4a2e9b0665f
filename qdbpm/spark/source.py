"""The Python data source `qdbpm`: spark.read.format("qdbpm").options(**storage_options)
.load(table_root), with filter pushdown (spark.sql.python.filterPushdown.enabled) and reads of
only the surviving chunks.

The driver lists, opens and prunes once per query: pushFilters and partitions() run on one
reader in one planning worker, which keeps the open Table (never pickled to executors). Each
task receives its plan: per partition the `_pm` bytes, its row groups and their byte ranges
(ranges.plan, the scan's coalescing rule), so a task fetches and decodes only those ranges and
never lists the table or fetches a `_pm`.
"""

from __future__ import annotations

import json
import os
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..errors import PmError
from ..meta import ParquetMeta
from ..prune import expr as E
from ..prune.arrow import filter_table
from ..table.decode import decode_partition
from ..table.ranges import DEFAULT_MAX_GAP, fetch_range, plan
from ..storage.objects import reader_for
from ..questdb.table_dir import META_FILE, TXN_FILE, is_questdb_table, read_table_dir
from ..table.listing import list_partitions, remote_keys
from ..table.reuse import OpenTables
from ..table.table import Table
from .filters import exact_type, to_expression
from .options import TABLE_METADATA_KEY, is_catalog_create, storage_options, table_location, table_metadata, \
    user_options, with_table_options
from .writer import QdbpmWriter
from .types import ddl_of, key_schema, spark_field, spark_type, to_spark_arrow

FETCH_WORKERS = 8  # concurrent range requests per task


# Tables kept open across queries in this worker (PySpark reuses its Python workers), each
# reused only while its listing is unchanged (table/reuse.py).
OPEN_TABLES = OpenTables()
_LISTERS = {}  # storage options -> what lists with them (S3Direct for s3fs): one per configuration


def open_table(options) -> Table:
    """The data source's table: listed once per call, hive keys typed as Spark infers them; kept
    open in this worker and reused while unchanged (never close it)."""
    fs, root = table_location(options)
    so = json.dumps(storage_options(options), sort_keys=True, default=str)
    key = (root, so)
    if fs is not None and so not in _LISTERS:
        _LISTERS[so] = reader_for(fs)

    native, io = user_options(options).get("native", "error"), _LISTERS.get(so)
    found = None  # a remote table's one listing per query: it also tells a QuestDB table
    if fs is None:
        questdb = is_questdb_table(root)
    else:
        found = remote_keys(root, fs, io=io, identities=True)
        base = fs._strip_protocol(root).rstrip("/")
        questdb = all(f"{base}/{n}" in found for n in (TXN_FILE, META_FILE))
    if questdb:
        # A QuestDB table directory: its state is its _txn (and _meta); partitions come from there.
        return OPEN_TABLES.get(key + (native,), root, fs, lambda _: Table(root, fs, layout="questdb", native=native),
                               listing=lambda: read_table_dir(root, io or fs))

    def opener(names):
        names = sorted(names)
        if not names:
            raise PmError(f"no partitions (directories with a _pm) under {user_options(options).get('path')!r}")
        return Table(root, fs, partitions=names, partitioning=key_schema(names), layout="directories")

    listing = None if found is None else (lambda: list_partitions(root, fs, io=io, found=found))
    return OPEN_TABLES.get(key, root, fs, opener, io=io, listing=listing)


def _key_fields(t, pm):
    """[(name, Arrow type)] of the table's hive keys not shadowed by a file column of `pm`."""
    if t.hive is None:
        return []
    return [(f.name, f.type) for f in t.hive.schema if f.name not in pm.column_names]


class QdbpmPartition(InputPartition):
    def __init__(self, work):
        super().__init__(work)
        # [(partition, pm_path, pm bytes, parquet_size, parquet_path, {key: pa.Scalar},
        #   [(row groups, columns, full, ranges.Plan)])]
        self.work = work


class QdbpmReader(DataSourceReader):
    """The reader without filter pushdown (option pushdown 'false'): every row group is read and
    Spark filters. QdbpmPushdownReader, the default, adds pushFilters."""

    def __init__(self, options, schema):
        self.options = user_options(options)
        self.root = self.options.get("path")
        self.schema_names = [f.name for f in schema.fields]
        self.predicate = None
        self.max_gap = int(self.options.get("max_gap", DEFAULT_MAX_GAP))
        self.num_partitions = int(self.options.get("num_partitions", 0))
        self._table = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_table"] = None  # the driver's open table stays on the driver
        return state

    def table(self) -> Table:
        if self._table is None:
            self._table = open_table(self.options)
        return self._table

    def partitions(self):
        t = self.table()
        try:
            rows = t.scan(self.predicate).row_groups()
            pred_names = set() if self.predicate is None else self.predicate.columns()
            items, shares = [], {}
            for p, rg, full in zip(*(rows.column(c).to_pylist() for c in ("partition", "row_group", "full"))):
                pm = t.meta(p)
                if p not in shares:
                    want = [pm.column_index(n) for n in self.schema_names if n in pm.column_names]
                    extra = [c for c, n in enumerate(pm.column_names) if n in pred_names and c not in want]
                    shares[p] = (pm, want, extra)
                _, want, extra = shares[p]
                cols = want if full or self.predicate is None else want + extra
                items.append((int(pm.chunks["total_compressed"][rg, cols].sum()) if cols else 0, p, rg, full))
            n = self.num_partitions or max(1, min(len(items), 2 * (os.cpu_count() or 1)))
            # Largest first into the lightest bin: input partitions balanced by bytes.
            bins = [[0, {}] for _ in range(n)]
            for size, p, rg, full in sorted(items, reverse=True):
                b = min(bins, key=lambda x: x[0])
                b[0] += size
                b[1].setdefault(p, []).append((rg, full))
            self.surviving = len(items)
            return [QdbpmPartition([self._work(t, p, shares[p], sorted(rgs)) for p, rgs in sorted(b[1].items())])
                    for b in bins if b[1]] or [QdbpmPartition([])]
        finally:
            self._table = None  # planning is over: tasks read from their plans alone (the table stays open)

    def _work(self, t, p, share, rgs):
        """One partition's share of a task: its `_pm` bytes, key values and byte-range plans."""
        pm, want, extra = share
        steps = []
        for full in (True, False):
            sel = [rg for rg, f in rgs if f == full]
            if not sel:
                continue
            exact = full or self.predicate is None
            cols = want if exact else want + extra
            steps.append((sel, cols, exact, plan(pm, sel, cols, max_gap=self.max_gap,
                                                 avoid=extra if exact else ())))
        keys = {}
        if t.hive is not None:
            pos = t.partitions.index(p)
            keys = {name: t.hive.values.column(name)[pos] for name, _ in _key_fields(t, pm)}
        return (p, pm.path, bytes(pm.buffer), pm.parquet_size, t.parquet_path(p), keys, steps)

    def read(self, partition):
        if not partition.work:
            return
        audit = self.options.get("audit_dir")  # where each task logs the row groups it read
        fs, root = table_location(self.options)
        # A task's share: no listing; its reads go through the table's io (S3Direct for s3fs).
        with Table(root, fs, partitions=[w[0] for w in partition.work], partitioning=None, layout="directories") as t, \
                ThreadPoolExecutor(FETCH_WORKERS, thread_name_prefix="qdbpm-task") as pool:
            io = t.data_filesystem
            for p, pm_path, pm_bytes, parquet_size, parquet_path, keys, steps in partition.work:
                if audit:
                    with open(os.path.join(audit, uuid.uuid4().hex), "w") as f:
                        f.write("".join(f"{p}\t{r}\n" for s in steps for r in s[0]))
                with ParquetMeta(pm_path, parquet_size=parquet_size, data=pm_bytes) as pm:
                    for rgs, cols, exact, pl in steps:
                        blobs = {}
                        # the snapshot's size travels with each read: a replaced object is refused
                        for chunks in pool.map(lambda r: fetch_range(io, parquet_path, r, parquet_size), pl.ranges):
                            blobs.update(chunks)
                        tbl = decode_partition(pm, rgs, cols, blobs, pl.all_null)
                        yield from self._batches(pm, tbl, keys, cols, exact)

    def _batches(self, pm, tbl, keys, cols, exact):
        names = [pm.column_names[c] for c in cols]
        tbl = to_spark_arrow(tbl, [(n, spark_field(pm, pm.column_index(n))) for n in names])
        for name, value in keys.items():
            tbl = tbl.append_column(pa.field(name, value.type), pa.repeat(value, tbl.num_rows))
        if not exact:
            tbl = filter_table(tbl, self.predicate)  # Spark does not re-check accepted filters
        yield from tbl.select(self.schema_names).to_batches()


class QdbpmPushdownReader(QdbpmReader):
    """The reader with filter pushdown (the default; needs spark.sql.python.filterPushdown.enabled,
    else PySpark refuses any reader that implements pushFilters)."""

    def pushFilters(self, filters):
        t = self.table()
        pm = t.meta(t.partitions[0])
        columns = {n: spark_field(pm, c)[0] if exact_type(pm, n) else None for c, n in enumerate(pm.column_names)}
        for name, at in _key_fields(t, pm):
            ddl = ddl_of(at)
            columns[name] = None if ddl == "double" else ddl  # double: NaN sorts above every number
        accepted = []
        for f in filters:
            e = to_expression(f, columns)
            if e is None:
                yield f
            else:
                accepted.append(e)
        # Replaced, never merged: a reader Spark hands a second time must not keep an older query's filters.
        self.predicate = None if not accepted else accepted[0] if len(accepted) == 1 else E.And(tuple(accepted))


class QdbpmDataSource(DataSource):
    @classmethod
    def name(cls):
        return "qdbpm"

    def schema(self):
        t = open_table(self.options)
        pm = t.meta(t.partitions[0])
        fields = [(n, f[0]) for c, n in enumerate(pm.column_names) if (f := spark_field(pm, c)) is not None]
        fields += [(n, ddl_of(at)) for n, at in _key_fields(t, pm)]
        # CREATE TABLE: the options ride in the first field's metadata (options.with_table_options).
        meta = {TABLE_METADATA_KEY: table_metadata(self.options)} if is_catalog_create(self.options) else {}
        return T.StructType([T.StructField(n, spark_type(ddl), True, meta if i == 0 else {})
                             for i, (n, ddl) in enumerate(fields)])

    def reader(self, schema):
        options = with_table_options(self.options, schema)
        pushdown = str(options.get("pushdown", "true")).lower()
        if pushdown not in ("true", "false"):
            raise PmError(f"the qdbpm option pushdown is 'true' or 'false', not {pushdown!r}")
        return (QdbpmPushdownReader if pushdown == "true" else QdbpmReader)(options, schema)

    def writer(self, schema, overwrite):
        return QdbpmWriter(with_table_options(self.options, schema), schema, overwrite)


def register(spark):
    """Register the Python data source `qdbpm`: spark.read.format("qdbpm").load(table_root)."""
    spark.dataSource.register(QdbpmDataSource)
    return QdbpmDataSource
