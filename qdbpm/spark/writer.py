"""Writing a `_pm` table from Spark: df.write.format("qdbpm").option("partition_by", "day")
.mode("append" | "overwrite").save(root), root a local directory or an fsspec URL (s3://...).

Spark refuses `partitionBy` for Python data sources (the source's table declares no partitioning),
so the hive keys are named by the `partition_by` option; each key=value/ directory gets
`data.parquet` and its `_pm`.

Two phases, so a reader never sees a partition without its `_pm` nor a `_pm` without its data
(listings find partitions by their `_pm`):

  tasks    write each partition's rows to a staged Parquet file and build its `_pm` (generate),
           under <root>/_qdbpm_staging/<job>/<task>/<partition>/ as `data.parquet` and `pm` (not
           `_pm`: listings never count a staged partition; the `_` prefix hides it from Spark's
           own Parquet reader too).
  commit   (driver) publishes partition by partition, data before `_pm`. A new partition staged by
           one task is renamed (local) or server-side copied (object store) into place. Rows for
           a partition that already has a `_pm` (append), or staged by several tasks, go through
           qdbpm.sync.append.append: new row groups after the old bytes and a new `_pm` snapshot,
           so readers pinned to the older snapshot read only bytes that never change. Locally
           that happens in place; on an object store the data object and the `_pm` are fetched
           to a temporary directory, appended there, and stored again (data first, one PUT each).
  abort    removes the job's staged objects.

Overwrite replaces the table: each written partition loses its `_pm` before its data is replaced,
then partitions the write does not cover are removed (`_pm` first). It is not atomic across
partitions: a concurrent reader may see some partitions old and others new or missing, never
a partition whose `_pm` and data disagree.

Options (Spark passes every value as text): `partition_by` "a,b"; `bloom_columns` "x,y" (qdbpm
builds split-block filters for them into each `_pm`); `row_group_size` rows per row group
(default 131072); the rest are fsspec storage options, read as the data source reads them
(source.storage_options), so `.options(**storage_options)` works for writes as for reads.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
import urllib.parse
import uuid

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..errors import PmError
from ..pm import layout as L
from ..storage.objects import storage_errors
from ..sync.append import append
from ..sync.generate import generate
from ..table.listing import NULL_FALLBACK
from ..table.listing import find_partitions
from .options import local_root, storage_options

__all__ = ["QdbpmWriter", "QdbpmCommitMessage", "STAGING_DIR", "DEFAULT_ROW_GROUP_SIZE", "WRITER_OPTIONS"]

STAGING_DIR = "_qdbpm_staging"
STAGED_PM = "pm"  # a staged `_pm`, named so that no listing takes its directory for a partition
DEFAULT_ROW_GROUP_SIZE = 128 * 1024
# Options of the writer itself; the others are fsspec storage options (source.storage_options).
WRITER_OPTIONS = ("path", "partition_by", "bloom_columns", "row_group_size")


def _names(text):
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def _segment(value) -> str:
    """A hive key value as the directory segment pyarrow (segment_encoding="uri") decodes back."""
    if value is None:
        return NULL_FALLBACK
    if isinstance(value, bool):
        return str(value).lower()
    return urllib.parse.quote(str(value), safe="")


class QdbpmCommitMessage(WriterCommitMessage):
    def __init__(self, staged):
        self.staged = staged  # [(partition, staged directory, rows)]


class QdbpmWriter(DataSourceArrowWriter):
    """The writer of the `qdbpm` data source (QdbpmDataSource.writer)."""

    def __init__(self, options, schema, overwrite):
        self.options = {k.lower(): v for k, v in dict(options).items()}
        if not self.options.get("path"):
            raise PmError("qdbpm write: no table root; call .save(root)")
        self.root = local_root(self.options["path"])  # the reader's rule: the same root
        self.overwrite = bool(overwrite)
        self.partition_by = _names(self.options.get("partition_by"))
        self.bloom_columns = _names(self.options.get("bloom_columns"))
        try:
            self.row_group_size = int(self.options.get("row_group_size") or DEFAULT_ROW_GROUP_SIZE)
        except ValueError:
            raise PmError(f"qdbpm write: row_group_size {self.options['row_group_size']!r} is not an integer") from None
        if self.row_group_size <= 0:
            raise PmError(f"qdbpm write: row_group_size must be positive, got {self.row_group_size}")
        names = [f.name for f in schema.fields]
        for what, cols in (("partition_by", self.partition_by), ("bloom_columns", self.bloom_columns)):
            missing = [c for c in cols if c not in names]
            if missing:
                raise PmError(f"qdbpm write: {what} names {missing}, not columns of the DataFrame {names}")
        keyed = [c for c in self.bloom_columns if c in self.partition_by]
        if keyed:
            raise PmError(f"qdbpm write: bloom_columns {keyed} are partition keys, not stored in data.parquet")
        if not [n for n in names if n not in self.partition_by]:
            raise PmError("qdbpm write: every column is a partition key; data.parquet needs one column at least")
        self.job = uuid.uuid4().hex

    # -- where things are ------------------------------------------------------------------

    def _fs(self):
        """(fsspec filesystem or None for a local root, root path on it)."""
        if "://" not in self.root and "::" not in self.root:  # as the data source reads it
            return None, os.path.abspath(self.root)
        so = storage_options({k: v for k, v in self.options.items() if k not in WRITER_OPTIONS})
        fs, root = fsspec.url_to_fs(self.root, **so)
        if isinstance(fs, LocalFileSystem):
            return None, os.path.abspath(root)
        return fs, root.rstrip("/")

    @staticmethod
    def _join(fs, *parts):
        parts = [p for p in parts if p]
        return posixpath.join(*parts) if fs is not None else os.path.join(*[p.replace("/", os.sep) for p in parts])

    def _job_dir(self, fs, root):
        return self._join(fs, root, STAGING_DIR, self.job)

    # -- tasks -------------------------------------------------------------------------------

    def write(self, iterator):
        fs, root = self._fs()
        task = uuid.uuid4().hex
        out = {}  # key tuple -> [local dir, ParquetWriter or None, buffered tables, buffered rows, rows]
        tmp = tempfile.mkdtemp(prefix="qdbpm-write-") if fs is not None else None
        try:
            for batch in iterator:
                table = pa.Table.from_batches([batch])
                for key, part in self._split(table):
                    self._add(out, key, part, fs, root, task, tmp)
            staged = []
            for key, st in out.items():
                self._flush(st, final=True)
                st[1].close()
                local = st[0]
                generate(os.path.join(local, L.PARQUET_FILE_NAME), os.path.join(local, STAGED_PM),
                         bloom_columns=self.bloom_columns or None)
                partition = self._partition(key)
                target = self._join(fs, self._job_dir(fs, root), task, partition)
                if fs is not None:
                    for name in (L.PARQUET_FILE_NAME, STAGED_PM):
                        _store(f"{target}/{name}: cannot store", fs.put_file, os.path.join(local, name),
                               f"{target}/{name}")
                staged.append((partition, target, st[4]))
            return QdbpmCommitMessage(staged)
        finally:
            for st in out.values():
                if st[1] is not None:
                    st[1].close()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    def _split(self, table):
        """(key tuple, rows without the key columns) for each distinct key in `table`."""
        data = _utc(table.drop_columns(self.partition_by))
        if not self.partition_by:
            yield (), data
            return
        distinct = table.select(self.partition_by).group_by(self.partition_by, use_threads=False).aggregate([])
        for key in distinct.to_pylist():
            mask = None
            for c in self.partition_by:
                m = pc.is_null(table[c]) if key[c] is None else pc.fill_null(pc.equal(table[c], key[c]), False)
                mask = m if mask is None else pc.and_(mask, m)
            yield tuple(key[c] for c in self.partition_by), data.filter(mask)

    def _partition(self, key) -> str:
        return "/".join(f"{urllib.parse.quote(c, safe='')}={_segment(v)}" for c, v in zip(self.partition_by, key))

    def _add(self, out, key, part, fs, root, task, tmp):
        if not part.num_rows:
            return  # an empty batch: no partition comes from it alone
        st = out.get(key)
        if st is None:
            partition = self._partition(key)
            local = (os.path.join(tmp, uuid.uuid4().hex) if fs is not None else
                     self._join(None, self._job_dir(None, root), task, partition))
            os.makedirs(local, exist_ok=True)
            st = out[key] = [local, None, [], 0, 0]
        st[2].append(part)
        st[3] += part.num_rows
        st[4] += part.num_rows
        if st[3] >= self.row_group_size:
            self._flush(st, final=False)

    def _flush(self, st, final):
        """Write the buffered rows as whole row groups of row_group_size (the rest too if final)."""
        if not st[2]:
            return
        table = pa.concat_tables(st[2])
        n = table.num_rows if final else table.num_rows - table.num_rows % self.row_group_size
        if st[1] is None:
            st[1] = pq.ParquetWriter(os.path.join(st[0], L.PARQUET_FILE_NAME), table.schema)
        if n:
            st[1].write_table(table.slice(0, n), row_group_size=self.row_group_size)
        rest = table.slice(n)
        st[2], st[3] = ([rest] if rest.num_rows else []), rest.num_rows

    # -- driver ------------------------------------------------------------------------------

    def commit(self, messages):
        fs, root = self._fs()
        staged = {}
        for m in messages:
            for partition, directory, _rows in m.staged:
                staged.setdefault(partition, []).append(directory)
        try:
            before = set(_partitions(fs, root))
            for partition in sorted(staged):
                self._publish(fs, root, partition, staged[partition], exists=partition in before)
            if self.overwrite:
                for partition in sorted(before - set(staged)):
                    _remove_partition(fs, root, partition)
        finally:
            self._cleanup(fs, root)

    def abort(self, messages):
        fs, root = self._fs()
        self._cleanup(fs, root)

    def _cleanup(self, fs, root):
        job = self._job_dir(fs, root)
        if fs is None:
            shutil.rmtree(job, ignore_errors=True)
            try:
                os.rmdir(os.path.dirname(job))  # the staging directory, when no other job uses it
            except OSError:
                pass
            return
        what = f"{job}: cannot remove the staged objects"
        if _store(what, fs.exists, job):
            _store(what, lambda: fs.rm(job, recursive=True))

    def _publish(self, fs, root, partition, dirs, exists):
        """Publish one partition's staged files: data first, then its `_pm`. Rows for an existing
        partition become one append (one new `_pm` snapshot); a new partition staged by several
        tasks is the first task's file with the others' rows appended, its `_pm` generated anew."""
        final = self._join(fs, root, partition)
        data, pm = self._join(fs, final, L.PARQUET_FILE_NAME), self._join(fs, final, L.PM_FILE_NAME)
        if exists and self.overwrite:
            _remove(fs, pm)  # the partition disappears until its new data and `_pm` are in place
            exists = False
        rest = dirs if exists else dirs[1:]
        if fs is None:
            if exists:
                append(data, self._rows(None, rest), pm)  # in place: the `_pm` update commits it
                return
            bdata, bpm = os.path.join(dirs[0], L.PARQUET_FILE_NAME), os.path.join(dirs[0], STAGED_PM)
            if rest:
                self._merge(bdata, bpm, self._rows(None, rest))
            os.makedirs(final, exist_ok=True)
            os.replace(bdata, data)
            os.replace(bpm, pm)
            return
        if not rest:  # server-side copies, no data through the driver
            for name, dst in ((L.PARQUET_FILE_NAME, data), (STAGED_PM, pm)):
                _store(f"{dst}: cannot copy from {dirs[0]}/{name}", fs.copy, f"{dirs[0]}/{name}", dst)
            return
        with tempfile.TemporaryDirectory(prefix="qdbpm-commit-") as tmp:
            ldata, lpm = os.path.join(tmp, L.PARQUET_FILE_NAME), os.path.join(tmp, L.PM_FILE_NAME)
            sources = (data, pm) if exists else (f"{dirs[0]}/{L.PARQUET_FILE_NAME}", f"{dirs[0]}/{STAGED_PM}")
            for src, local in zip(sources, (ldata, lpm)):
                _store(f"{src}: cannot fetch", fs.get_file, src, local)
            rows = self._rows(fs, rest, tmp)
            if exists:
                append(ldata, rows, lpm)  # the old bytes stay as they are: older snapshots still read
            else:
                self._merge(ldata, lpm, rows)
            for local, dst in ((ldata, data), (lpm, pm)):  # data first
                _store(f"{dst}: cannot store", fs.put_file, local, dst)

    def _merge(self, data, pm, rows):
        """A new partition from several tasks: rows appended to the first task's file, and one
        fresh `_pm` (the intermediate snapshot was never published)."""
        append(data, rows, pm)
        generate(data, pm, bloom_columns=self.bloom_columns or None)

    @staticmethod
    def _rows(fs, dirs, tmp=None):
        """The rows of the staged files in `dirs`, in order, as one table."""
        tables = []
        for d in dirs:
            if fs is None:
                tables.append(pq.read_table(os.path.join(d, L.PARQUET_FILE_NAME)))
            else:
                piece = os.path.join(tmp, f"piece{len(tables)}.parquet")
                src = f"{d}/{L.PARQUET_FILE_NAME}"
                _store(f"{src}: cannot fetch", fs.get_file, src, piece)
                tables.append(pq.read_table(piece))
        return pa.concat_tables(tables)


def _utc(table):
    """Zoned timestamps in UTC (the same instants): Spark hands them in the session's time zone,
    and a later append in another zone must find the same Arrow type in the file."""
    for i, f in enumerate(table.schema):
        if pa.types.is_timestamp(f.type) and f.type.tz is not None and f.type.tz != "UTC":
            table = table.set_column(i, f.name, table.column(i).cast(pa.timestamp(f.type.unit, "UTC")))
    return table


def _partitions(fs, root):
    if fs is None:
        return find_partitions(root) if os.path.isdir(root) else []
    try:
        return find_partitions(root, fs)
    except PmError:
        return []  # no `_pm` below root yet: a new table


def _remove_partition(fs, root, partition):
    """`_pm` first, so no listing finds a partition whose data is gone; then local directories
    left empty, up to the root."""
    if fs is not None:
        _remove(fs, f"{root}/{partition}/{L.PM_FILE_NAME}")
        _remove(fs, f"{root}/{partition}/{L.PARQUET_FILE_NAME}")
        return
    directory = os.path.join(root, *partition.split("/"))
    _remove(None, os.path.join(directory, L.PM_FILE_NAME))
    _remove(None, os.path.join(directory, L.PARQUET_FILE_NAME))
    while os.path.normpath(directory) != os.path.normpath(root):
        try:
            os.rmdir(directory)
        except OSError:
            break  # not empty: something else lives there
        directory = os.path.dirname(directory)


def _remove(fs, path):
    if fs is None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        return
    _store(f"{path}: cannot remove", fs.rm_file, path, missing_ok=True)


def _store(what, call, *args, missing_ok=False):
    """`call(*args)`, one fsspec call; an OSError it raises is a StorageError "{what}: {cause}"
    (`what`: the path(s) and what failed), except a missing object when `missing_ok` (then None)."""
    try:
        with storage_errors(what, passing=(FileNotFoundError,) if missing_ok else ()):
            return call(*args)
    except FileNotFoundError:  # reaches here only when missing_ok: otherwise it is a StorageError
        return None
