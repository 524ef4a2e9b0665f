"""qdbpm on Spark through PySpark: distributed generation and pruning with mapInArrow, a pandas_udf
helper, and a Python data source `qdbpm` with filter pushdown.

Spark semantics differ from pyarrow's in places (NaN equals NaN and sorts above every number;
NOT IN / IN with a null never match), so the data source only accepts filters whose Spark
meaning it reproduces exactly, and hands the rest back for Spark to evaluate.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .prune import expr as E
from .pm import layout as L
from .pm import qdb_types as Q

GENERATE_SCHEMA = "parquet_path string, pm_path string, pm_size long, row_groups int, error string"
PRUNE_SCHEMA = "partition string, row_group int, num_rows long"


# --- distributed generation and pruning --------------------------------------------------------


def generate(spark, parquet_paths, *, bloom="inline", files_per_task=16):
    """`_pm` generation for many files with mapInArrow; a bad file is a row with `error` set."""
    paths = [os.fspath(p) for p in parquet_paths]
    n = max(1, min(len(paths), (len(paths) + files_per_task - 1) // files_per_task))
    df = spark.createDataFrame([(p,) for p in paths], "parquet_path string").repartition(n)

    def gen(batches):
        from qdbpm.errors import PmError
        from qdbpm.sync.generate import default_pm_path, generate as gen_one
        from qdbpm.meta import open as open_pm

        for batch in batches:
            rows = []
            for p in batch.column(0).to_pylist():
                pm_path = default_pm_path(p)
                try:
                    size = gen_one(p, bloom=bloom)
                    with open_pm(pm_path) as pm:
                        rows.append((p, pm_path, size, pm.row_group_count, None))
                except (PmError, OSError) as e:
                    rows.append((p, pm_path, None, None, str(e).replace("\n", " ")))
            yield pa.RecordBatch.from_arrays(
                [pa.array([r[k] for r in rows], t) for k, t in
                 enumerate((pa.string(), pa.string(), pa.int64(), pa.int32(), pa.string()))],
                names=["parquet_path", "pm_path", "pm_size", "row_groups", "error"])

    return df.mapInArrow(gen, GENERATE_SCHEMA)


def prune(spark, table_root, predicate, *, partitions_per_task=64):
    """Surviving (partition, row_group, num_rows) of a table, partitions spread over executors.

    The predicate travels pickled in the task closure; each task opens its `_pm` files."""
    from .prune.expr import parse
    from .table.table import find_partitions

    if isinstance(predicate, str):
        predicate = parse(predicate)
    root = os.fspath(table_root)
    parts = find_partitions(root)
    n = max(1, (len(parts) + partitions_per_task - 1) // partitions_per_task)
    df = spark.createDataFrame([(p,) for p in parts], "partition string").repartition(n)

    def run(batches):
        from qdbpm.table.table import Table

        for batch in batches:
            names = batch.column(0).to_pylist()
            if not names:
                continue
            t = Table(root, partitions=names)
            try:
                kept = t.prune(predicate)
            finally:
                t.close()
            yield from kept.to_batches()

    return df.mapInArrow(run, PRUNE_SCHEMA)


def surviving_row_groups_udf(predicate):
    """A scalar pandas_udf: a column of `_pm` paths -> how many row groups may match `predicate`."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    from .prune.expr import parse

    pred = parse(predicate) if isinstance(predicate, str) else predicate

    def surviving(paths):
        from qdbpm.meta import open as open_pm

        out = []
        for p in paths:
            with open_pm(p) as pm:
                out.append(int(pm.prune(pred).sum()))
        return pd.Series(out, dtype="int32")

    # Real classes, not the strings `from __future__ import annotations` would leave.
    surviving.__annotations__ = {"paths": pd.Series, "return": pd.Series}
    return pandas_udf(surviving, "int")


# --- types ------------------------------------------------------------------------------------


# The Arrow type Spark expects for each Spark SQL type (decimals: pa.decimal128 of the column).
_SPARK_ARROW = {"boolean": pa.bool_(), "byte": pa.int8(), "short": pa.int16(), "int": pa.int32(), "long": pa.int64(),
                "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "float": pa.float32(),
                "double": pa.float64(), "string": pa.string(), "binary": pa.binary()}


def spark_field(pm, c):
    """(Spark DDL type, Arrow type Spark expects) of a `_pm` column, or None when unsupported."""
    d = pm.columns[c]
    pt, tc = int(d["physical_type"]), int(d["type"])
    if int(d["max_rep_level"]) > 0 or int(d["max_def_level"]) > 1:
        return None
    ddl = Q.spark_type(tc, pt)
    if ddl is None:
        return None
    dec = Q.decimal_params(tc)
    return ddl, pa.decimal128(*dec) if dec is not None else _SPARK_ARROW[ddl]


def _to_spark_arrow(table: pa.Table, fields) -> pa.Table:
    cols = []
    for name, (_, at) in fields:
        col = table.column(name)
        if pa.types.is_timestamp(col.type) and pa.types.is_timestamp(at) and col.type.tz is None:
            col = col.cast(pa.timestamp(col.type.unit, tz="UTC"))  # naive instants are UTC
        if isinstance(col.type, pa.BaseExtensionType):
            col = pa.chunked_array([c.storage for c in col.chunks], col.type.storage_type)
        cols.append(col.cast(at, safe=False) if col.type != at else col)
    return pa.Table.from_arrays(cols, names=[n for n, _ in fields])


# --- filters: Spark -> qdbpm, only where the meaning is identical ----------------------------


def _exact_type(pm, name) -> bool:
    """Columns whose Spark comparisons mean exactly what qdbpm's do on the same stored values."""
    c = pm.column_index(name)
    d = pm.columns[c]
    pt, tc = int(d["physical_type"]), int(d["type"])
    if pt in (L.PT_FLOAT, L.PT_DOUBLE):
        return False  # Spark: NaN = NaN and NaN > everything
    if Q.unit(tc, pt) == "ns" or pt == L.PT_INT96:
        return False  # nanoseconds: Spark sees microseconds; compares after truncation
    if spark_field(pm, c) is None or spark_field(pm, c)[0] == "binary":
        return False
    return True


def _literal(v):
    import datetime as dt

    if isinstance(v, dt.datetime) and v.tzinfo is None:
        return v.astimezone(dt.timezone.utc)  # PySpark hands naive datetimes in the worker's local time
    return v


def convert_filter(f, pm):
    """The qdbpm expression with exactly the Spark SQL meaning of `f` (Kleene logic included), or
    None when there is none: then Spark keeps the filter and evaluates it itself."""
    from pyspark.sql import datasource as D

    def name_of(attr):
        name = ".".join(attr)
        if name not in pm.column_names:
            return None
        return name if _exact_type(pm, name) else None

    # Spark hands a conjunction as a list and pushes no OR: leaves and NOT are all there is.
    if isinstance(f, D.Not):
        inner = convert_filter(f.child, pm)
        return None if inner is None else ~inner  # every converted form is null exactly when SQL's is
    simple = {D.EqualTo: "==", D.GreaterThan: ">", D.GreaterThanOrEqual: ">=", D.LessThan: "<",
              D.LessThanOrEqual: "<="}
    for cls, op in simple.items():
        if isinstance(f, cls):
            n = name_of(f.attribute)
            if n is None or f.value is None:
                return None
            return E.Cmp(n, op, _literal(f.value))
    if isinstance(f, D.EqualNullSafe):
        n = name_of(f.attribute)
        if n is None:
            return None
        if f.value is None:
            return E.IsNull(n)
        return E.IsNotNull(n) & E.Cmp(n, "==", _literal(f.value))  # never null, like <=>
    if isinstance(f, D.In):
        n = name_of(f.attribute)
        if n is None or not f.value or any(v is None for v in f.value):
            return None  # SQL: a listed NULL makes non-matches NULL; qdbpm has no such literal
        # SQL IN is null for a null input: an OR of comparisons is too (qdbpm's In is not).
        terms = tuple(E.Cmp(n, "==", _literal(v)) for v in f.value)
        return terms[0] if len(terms) == 1 else E.Or(terms)
    if isinstance(f, (D.IsNull, D.IsNotNull)):
        n = ".".join(f.attribute)
        if n not in pm.column_names:
            return None
        return E.IsNull(n) if isinstance(f, D.IsNull) else E.IsNotNull(n)
    return None


# --- the data source --------------------------------------------------------------------------


def _filesystem(options):
    """fsspec filesystem from data source options (local when no endpoint / protocol is given)."""
    import fsspec

    if options.get("endpoint_url") or str(options.get("path", "")).startswith("s3://"):
        import s3fs

        return s3fs.S3FileSystem(key=options.get("key"), secret=options.get("secret"),
                                 client_kwargs={"endpoint_url": options.get("endpoint_url"),
                                                "region_name": options.get("region", "us-east-1")},
                                 use_listings_cache=False, skip_instance_cache=True)
    return fsspec.filesystem("file")


def _is_remote(options):
    return bool(options.get("endpoint_url")) or str(options.get("path", "")).startswith("s3://")



class QdbpmPartition(InputPartition):
    def __init__(self, work):
        super().__init__(work)
        self.work = work  # [(partition, [row groups])]

class QdbpmReader(DataSourceReader):
    def __init__(self, options, schema):
        self.options = dict(options)
        self.root = self.options["path"]
        self.fields = None
        self.predicate = None
        self.max_gap = int(self.options.get("max_gap", 64 * 1024))
        self.num_partitions = int(self.options.get("num_partitions", 0))

    def _table(self):
        from qdbpm.table.table import open_table

        return open_table(self.root, _filesystem(self.options) if _is_remote(self.options) else None)

    def pushFilters(self, filters):
        with self._table() as t:
            pm = t.meta(t.partitions[0])
            accepted = []
            for f in filters:
                e = convert_filter(f, pm)
                if e is None:
                    yield f
                else:
                    accepted.append(e)
        if accepted:
            self.predicate = accepted[0] if len(accepted) == 1 else E.And(tuple(accepted))

    def partitions(self):
        with self._table() as t:
            if self.predicate is not None:
                masks = t.prune_masks(self.predicate)
            else:
                masks = {p: np.ones(t.meta(p).row_group_count, bool) for p in t.partitions}
            items = []
            for p in t.partitions:
                pm = t.meta(p)
                for r in np.nonzero(masks[p])[0]:
                    if int(pm.num_rows[r]):
                        items.append((int(pm.chunks["total_compressed"][r].sum()), p, int(r)))
        self.surviving = len(items)
        n = self.num_partitions or max(1, min(len(items), 2 * (os.cpu_count() or 1)))
        # Largest first into the lightest bin: input partitions balanced by bytes.
        bins = [[0, {}] for _ in range(n)]
        for size, p, r in sorted(items, reverse=True):
            b = min(bins, key=lambda x: x[0])
            b[0] += size
            b[1].setdefault(p, []).append(r)
        return [QdbpmPartition([(p, sorted(rs)) for p, rs in sorted(b[1].items())]) for b in bins if b[1]] \
            or [QdbpmPartition([])]

    def read(self, partition):
        from qdbpm.prune.arrow import filter_table
        from qdbpm.table.decode import read_partition

        import fsspec

        fs = _filesystem(self.options) if _is_remote(self.options) else fsspec.filesystem("file")
        audit = self.options.get("audit_dir")  # where each task logs the row groups it read
        with self._table() as t:
            for p, rgs in partition.work:
                if audit:
                    import uuid

                    with open(os.path.join(audit, uuid.uuid4().hex), "w") as f:
                        f.write("".join(f"{p}\t{r}\n" for r in rgs))
                pm = t.meta(p)
                fields = [(n, spark_field(pm, pm.column_index(n))) for n in self.schema_names]
                need = list(self.schema_names)
                cols = [pm.column_index(n) for n in need]
                tbl = read_partition(pm, fs, t.parquet_path(p), rgs, cols, self.max_gap)  # _pm types: Spark's own mapping
                if tbl is None:
                    continue
                tbl = _to_spark_arrow(tbl, fields)
                if self.predicate is not None:
                    tbl = filter_table(tbl, self.predicate)  # Spark does not re-check accepted filters
                yield from tbl.to_batches()

class QdbpmDataSource(DataSource):
    @classmethod
    def name(cls):
        return "qdbpm"

    def _pm(self):
        from qdbpm.table.table import open_table

        t = open_table(self.options["path"], _filesystem(self.options) if _is_remote(self.options) else None)
        return t

    def schema(self):
        with self._pm() as t:
            pm = t.meta(t.partitions[0])
            parts = []
            for c, n in enumerate(pm.column_names):
                f = spark_field(pm, c)
                if f is not None:
                    parts.append(f"`{n}` {f[0]}")
        return ", ".join(parts)

    def reader(self, schema):
        r = QdbpmReader(self.options, schema)
        r.schema_names = [f.name for f in schema.fields]
        return r


def register(spark):
    """Register the Python data source `qdbpm`: spark.read.format("qdbpm").load(table_root)."""
    spark.dataSource.register(QdbpmDataSource)
    return QdbpmDataSource
