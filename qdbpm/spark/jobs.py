"""Distributed `_pm` work with PySpark: generation and pruning with mapInArrow, and a
pandas_udf counting surviving row groups.

Local paths and object-store URLs (s3://...) alike: the driver lists once, and each task gets
its share of that listing (Parquet sizes, partition paths) plus the `storage_options` to build
its own filesystem from, so executors never list. The per-task work is in module-level
functions: a task's closure then pickles a reference to them, not their code.
"""

from __future__ import annotations

import functools
import os

import fsspec
import pyarrow as pa

from ..errors import PmError
from ..meta import open as open_pm
from ..pm import layout as L
from ..pm.fileops import FileOps
from ..pm.reader import PmFile
from ..prune.filters import as_predicate
from ..sync.generate import default_pm_path, generate as generate_one
from ..sync.remote import default_pm_object, find_parquet, resolve
from ..table.table import Table, open_table

GENERATE_SCHEMA = "parquet_path string, pm_path string, pm_size long, row_groups int, error string"
PRUNE_SCHEMA = "partition string, row_group int, num_rows long"
_GENERATE_TYPES = (pa.string(), pa.string(), pa.int64(), pa.int32(), pa.string())
_GENERATE_NAMES = ("parquet_path", "pm_path", "pm_size", "row_groups", "error")


def generate(spark, paths_or_root, *, storage_options=None, bloom="inline", files_per_task=16):
    """`_pm` generation for many Parquet files with mapInArrow; a bad file is a row with `error`
    set, the others are generated.

    paths_or_root: a list of Parquet paths / URLs, or one root (a local directory or a URL prefix
    such as s3://bucket/table) whose every `data.parquet` below it is generated; a remote root is
    listed once by the driver and its object sizes travel with the paths."""
    if isinstance(paths_or_root, (str, os.PathLike)):  # a root: listed once, by the driver
        files = find_parquet(paths_or_root, storage_options)
    else:  # the files themselves: no listing
        files = [(os.fspath(p), None) for p in paths_or_root]
    n = max(1, min(len(files), (len(files) + files_per_task - 1) // files_per_task))
    df = spark.createDataFrame(files, "parquet_path string, parquet_size long").repartition(n)
    return df.mapInArrow(functools.partial(_generate_task, bloom=bloom, storage_options=storage_options),
                         GENERATE_SCHEMA)


class _Committed(FileOps):
    """The writer's I/O seam noting the row-group count of the `_pm` it commits, read from the
    finished local file (a remote `_pm` is built locally, then PUT): the stored object is never
    fetched back."""

    row_groups = None

    def replace(self, src, dst):
        super().replace(src, dst)
        with PmFile(dst) as pm:
            self.row_groups = pm.row_group_count


def _generate_task(batches, *, bloom, storage_options):
    """One task: generate its share of (parquet_path, parquet_size), one output row per file."""
    filesystems = {}  # protocol -> the task's one filesystem for it, from the storage options
    for batch in batches:
        rows = []
        for path, size in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
            pm_path = None
            try:
                proto = path.split("://", 1)[0] if "://" in path else None
                target = None
                if proto is not None or storage_options is not None:
                    if proto not in filesystems:
                        filesystems[proto] = fsspec.url_to_fs(path, **(storage_options or {}))[0]
                    target = resolve(path, filesystems[proto])
                fs, stripped = (None, path) if target is None else target
                ops = _Committed()
                if fs is None:
                    pm_path = default_pm_path(stripped)
                    pm_size = generate_one(stripped, bloom=bloom, ops=ops)
                else:
                    pm_path = fs.unstrip_protocol(default_pm_object(stripped))
                    pm_size = generate_one(stripped, bloom=bloom, ops=ops, filesystem=fs, parquet_size=size)
                rows.append((path, pm_path, pm_size, ops.row_groups, None))
            except (PmError, OSError) as e:  # StorageError is both
                rows.append((path, pm_path, None, None, str(e).replace("\n", " ")))
        yield pa.RecordBatch.from_arrays([pa.array([r[k] for r in rows], t) for k, t in enumerate(_GENERATE_TYPES)],
                                         names=list(_GENERATE_NAMES))


def prune(spark, root, predicate, *, storage_options=None, partitioning="hive", partitions_per_task=64):
    """Surviving (partition, row_group, num_rows) of a table, partitions spread over executors:
    equal to `open_table(root, storage_options=..., partitioning=...).prune(predicate)`.

    The driver lists the partitions once and types their hive keys over the whole table; each
    task opens only its share's `_pm` (fetched in one batch for a remote table), with the same
    key types. The predicate travels pickled in the task closure."""
    predicate = as_predicate(predicate)
    root = os.fspath(root)
    with open_table(root, storage_options=storage_options, partitioning=partitioning) as t:
        parts = t.partitions
        remote = t.filesystem is not None
        if not remote:
            root = t.root  # a file:// URL, resolved
        # A share typed on its own could infer other key types ("1" alone is an int, with "x"
        # a string): the whole table's schema goes with every share.
        keys = t.hive.schema if t.hive is not None else None
    n = max(1, (len(parts) + partitions_per_task - 1) // partitions_per_task)
    df = spark.createDataFrame([(p,) for p in parts], "partition string").repartition(n)
    return df.mapInArrow(functools.partial(_prune_task, root=root, predicate=predicate, keys=keys, remote=remote,
                                           storage_options=storage_options), PRUNE_SCHEMA)


def _prune_task(batches, *, root, predicate, keys, remote, storage_options):
    """One task: prune its share of the partitions, opening only their `_pm`."""
    for batch in batches:
        names = batch.column(0).to_pylist()
        if not names:
            continue
        if not remote:
            t = Table(root, partitions=names, partitioning=keys)
        else:
            fs, path = fsspec.url_to_fs(root, **(storage_options or {}))
            t = Table(path, fs, partitions=names, partitioning=keys)
        try:
            kept = t.prune(predicate)
        finally:
            t.close()
        yield from kept.to_batches()


def surviving_row_groups_udf(predicate):
    """A scalar pandas_udf: a column of `_pm` paths -> how many row groups may match `predicate`."""
    # Imported on use: pandas and pyspark.sql.functions are needed by this helper alone.
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    pred = as_predicate(predicate)

    def surviving(paths):
        out = []
        for p in paths:
            with open_pm(p) as pm:
                out.append(int(pm.prune(pred).sum()))
        return pd.Series(out, dtype="int32")

    # Real classes, not the strings `from __future__ import annotations` would leave.
    surviving.__annotations__ = {"paths": pd.Series, "return": pd.Series}
    return pandas_udf(surviving, "int")
