"""`to_dataset`: hand qdbpm's pruning decision to any engine that reads a `pyarrow.dataset`
(DuckDB, Polars, DataFusion, pyarrow itself).

The dataset holds one Parquet fragment per partition with survivors, restricted to exactly the
surviving row groups (`ParquetFileFormat.make_fragment(..., row_groups=...)`), with its hive
partition expression. Engines then read those row groups with their own readers and apply their
own filters; qdbpm only decided which row groups they may skip.

Pinned snapshots. Each fragment reads its file as it was at the `_pm` snapshot the table pinned:
pyarrow's local and Python filesystems ignore `make_fragment(file_size=...)` when opening a
file, so after an in-place `qdbpm.append` they would find the newer footer at the new end of the
file. Fragments therefore open files through `PinnedFileSystem`, which ends every file at its
pinned Parquet size: pyarrow reads that snapshot's footer and row groups, never the newer ones,
and never asks the store for a size (no HEAD, no listing). A local table whose files all still
end at their pinned sizes uses pyarrow's own LocalFileSystem instead (same bytes, native files).

Requests. Building costs one: pyarrow's read of the last min(64 KiB, size) bytes of the first
partition's file, whose footer gives the schema, as `pyarrow.dataset.dataset(files)` infers it
from the first file. pyarrow keeps that footer in the fragment, so a scan does not read it again
when that partition has survivors. A scan then reads each fragment's footer the same way (one
request) and the chunks of its surviving row groups (pyarrow coalesces chunks less than 8 KiB
apart, so a small chunk between two it reads may come along), those inside the footer read
served from it. `schema=` skips the build read.
"""

from __future__ import annotations

import atexit
import os
import time
import weakref

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from ..errors import PmError, StorageError


class _RowGroup(int):
    """A row-group id that hashes as its position in the ascending list. pyarrow's make_fragment
    passes `row_groups` through set(), whose iteration order is hash order, and scans row groups
    in that order; hashes 0..n-1 make it ascending, so rows come back in file order."""

    def __new__(cls, value, position):
        self = super().__new__(cls, value)
        self.position = position
        return self

    def __hash__(self):
        return self.position

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other


# Pinned files pyarrow still holds. Its I/O threads release a Python file under the GIL; one that
# first gets the GIL during interpreter finalization aborts the process ("terminate called
# without an active exception", apache/arrow#34314; pyarrow's own FSSpecHandler does it too).
_LIVE = weakref.WeakSet()
_DRAIN_SECONDS = 2.0


@atexit.register
def _drain():
    """Before finalization, give pyarrow's threads the GIL until they have let go of every pinned
    file (a few ms after a scan; bounded for a reader left open)."""
    end = time.monotonic() + _DRAIN_SECONDS
    while _LIVE and time.monotonic() < end:
        time.sleep(0.001)


class _PinnedFile:
    """A read-only file ending at `size`: reads are served by `read(start, end) -> bytes`."""

    mode = "rb"

    def __init__(self, path, size, read, close=None):
        self.path, self.size, self._read, self._close = path, size, read, close
        self.pos = 0
        self.closed = False
        self._tail, self._tail_start = b"", size  # the last bytes read up to `size` (the footer read)
        _LIVE.add(self)

    def readable(self):
        return True

    def seekable(self):
        return True

    def writable(self):
        return False

    def tell(self):
        return self.pos

    def seek(self, offset, whence=0):
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def read(self, n=-1):
        start = min(self.pos, self.size)
        end = self.size if n is None or n < 0 else min(start + n, self.size)
        if end <= start:
            return b""
        # pyarrow's footer read takes the last 64 KiB, chunks included; later reads of those
        # chunks are served from it (a small file's scan costs one request, not two reads of it)
        cut = max(start, min(end, self._tail_start))
        data = self._fetch(start, cut) if cut > start else b""
        if cut < end:
            data += self._tail[cut - self._tail_start : end - self._tail_start]
        if end == self.size and start < self._tail_start:
            self._tail, self._tail_start = data, start
        self.pos = end
        return data

    def _fetch(self, start, end):
        data = self._read(start, end)
        if len(data) != end - start:
            raise StorageError(f"{self.path}: read of [{start}, {end}) returned {len(data)} bytes; the file is "
                               f"shorter than its _pm snapshot says ({self.size} bytes)")
        return data

    def close(self):
        if not self.closed:
            self.closed = True
            if self._close is not None:
                self._close()

    def __del__(self):  # pyarrow drops its files without closing them
        self.close()


class PinnedFileSystem(pafs.FileSystemHandler):
    """A pyarrow filesystem handler (wrap it in `pyarrow.fs.PyFileSystem`) that opens each known
    file as its first `sizes[path]` bytes, read from `base`: None (local files), an fsspec
    filesystem (each read one `cat_file` range request, so no read-ahead block is fetched), or a
    pyarrow FileSystem. Read-only; paths other than those in `sizes` do not exist."""

    def __init__(self, base, sizes):
        self.base = base
        self.sizes = dict(sizes)

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __hash__(self):
        return id(self)

    def get_type_name(self):
        return "qdbpm-pinned"

    def normalize_path(self, path):
        return path

    def get_file_info(self, paths):
        return [pafs.FileInfo(p, pafs.FileType.File, size=self.sizes[p]) if p in self.sizes
                else pafs.FileInfo(p, pafs.FileType.NotFound) for p in paths]

    def get_file_info_selector(self, selector):
        raise NotImplementedError("a pinned filesystem has no listing: its files are given")

    def open_input_file(self, path):
        size = self.sizes.get(path)
        if size is None:
            raise FileNotFoundError(path)
        base = self.base
        if base is None:
            fd = os.open(path, os.O_RDONLY)
            f = _PinnedFile(path, size, lambda s, e: os.pread(fd, e - s, s), lambda: os.close(fd))
        elif isinstance(base, pafs.FileSystem):
            native = base.open_input_file(path)
            f = _PinnedFile(path, size, lambda s, e: native.read_at(e - s, s), native.close)
        else:
            f = _PinnedFile(path, size, lambda s, e: base.cat_file(path, start=s, end=e))
        return pa.PythonFile(f, mode="r")

    def open_input_stream(self, path):
        return self.open_input_file(path)

    def _read_only(self, *args, **kwargs):
        raise PermissionError("a pinned filesystem is read-only")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _read_only
    move = copy_file = open_output_stream = open_append_stream = _read_only


def _row_groups(partition, pm, rgs) -> list:
    """Ascending unique row-group ids of `rgs` (ids, or a boolean mask over the row groups)."""
    a = np.asarray(rgs)
    if a.dtype == np.bool_:
        if a.shape != (pm.row_group_count,):
            raise PmError(f"partition {partition!r}: a survivor mask of {a.shape} for {pm.row_group_count} row groups")
        a = np.nonzero(a)[0]
    a = np.unique(a.astype(np.int64, copy=False))
    if a.size and (a[0] < 0 or a[-1] >= pm.row_group_count):
        bad = int(a[0] if a[0] < 0 else a[-1])
        raise IndexError(f"partition {partition!r}: row group {bad} out of range [0, {pm.row_group_count})")
    return [_RowGroup(int(r), i) for i, r in enumerate(a)]


def to_dataset(table, survivors, *, schema=None, reference=None) -> pads.FileSystemDataset:
    """A `pyarrow.dataset.FileSystemDataset` of exactly the surviving row groups of `table`.

    survivors: {partition: ascending row-group ids (or a boolean mask)}; partitions absent or
    without survivors are left out. Fragments come in partition order, row groups ascending.
    schema: the dataset's schema (default: the file schema of the `reference` partition, default
    the first, as pyarrow infers it, plus the hive partition fields of `table.hive`, typed as
    `qdbpm.table.partitioning.discover` types them; a key named like a column of that file is
    left out). Only the `_pm` of the survivors and of `reference` are opened.
    """
    unknown = set(survivors) - set(table.partitions)
    if unknown:
        raise PmError(f"survivors name partitions the table does not have: {sorted(unknown)[:5]}")
    local = table.filesystem is None

    def path_of(p):
        path = table.parquet_path(p)
        return os.path.abspath(path) if local else path

    chosen = []  # (partition, path, ParquetMeta, row groups)
    for p in table.partitions:
        if p in survivors:
            pm = table.meta(p)
            rgs = _row_groups(p, pm, survivors[p])
            if rgs:
                chosen.append((p, path_of(p), pm, rgs))
    first = table.partitions[0] if reference is None else reference
    sizes = {path: pm.parquet_size for _, path, pm, _ in chosen}
    sizes.setdefault(path_of(first), table.meta(first).parquet_size)
    if local and all(_size_or_none(path) == size for path, size in sizes.items()):
        # Nothing appended since the snapshots: pyarrow's own files, no Python file objects for
        # its I/O threads to release (one released during interpreter exit aborts the process).
        fs = pafs.LocalFileSystem()
    else:
        fs = pafs.PyFileSystem(PinnedFileSystem(table.io, sizes))
    hive = getattr(table, "hive", None)
    if hive is not None:
        # a key named like a column of the files (`ts=2024-01-01` over `ts`) is no partition field
        hive = hive.without(table.meta(first).column_names)
    fmt = pads.ParquetFileFormat()
    fragments = [fmt.make_fragment(path, fs, hive.expression(p) if hive else None, row_groups=rgs,
                                   file_size=pm.parquet_size) for p, path, pm, rgs in chosen]
    if schema is None:
        schema = _inferred_schema(fmt, fs, fragments, chosen, path_of(first), sizes, hive)
    return pads.FileSystemDataset(fragments, schema, fmt, fs)


def _size_or_none(path):
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _inferred_schema(fmt, fs, fragments, chosen, first_path, sizes, hive) -> pa.Schema:
    """pyarrow.dataset's inference: the first file's schema, then the partition fields."""
    if chosen and chosen[0][1] == first_path:
        frag = fragments[0]  # pyarrow keeps the footer it reads here for the scan
    else:
        frag = fmt.make_fragment(first_path, fs, file_size=sizes[first_path])
    try:
        physical = frag.physical_schema
    except (pa.ArrowException, OSError) as e:
        raise StorageError(f"{first_path}: pyarrow cannot read the footer its _pm snapshot points at: {e}") from None
    if hive is None or not len(hive.schema):
        return physical
    try:
        return pa.unify_schemas([physical, hive.schema])
    except (pa.ArrowTypeError, pa.ArrowInvalid) as e:
        raise PmError(f"the hive partition keys {hive.schema.names} clash with the columns of {first_path}: "
                      f"{e}") from None
