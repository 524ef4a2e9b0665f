"""Distributed `_pm` work with PySpark: generation and pruning with mapInArrow, and a
pandas_udf counting surviving row groups."""

from __future__ import annotations

import os

import pyarrow as pa

GENERATE_SCHEMA = "parquet_path string, pm_path string, pm_size long, row_groups int, error string"
PRUNE_SCHEMA = "partition string, row_group int, num_rows long"


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
    from ..prune.filters import as_predicate
    from ..table.table import find_partitions

    predicate = as_predicate(predicate)
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

    from ..prune.filters import as_predicate

    pred = as_predicate(predicate)

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
