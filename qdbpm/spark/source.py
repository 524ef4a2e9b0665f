"""The Python data source `qdbpm`: spark.read.format("qdbpm").load(table_root), with filter
pushdown (spark.sql.python.filterPushdown.enabled) and reads of only the surviving chunks."""

from __future__ import annotations

import os

import numpy as np
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..prune import expr as E
from .filters import convert_filter
from .types import spark_field, to_spark_arrow


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
                tbl = to_spark_arrow(tbl, fields)
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
