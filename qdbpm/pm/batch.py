"""Open many `_pm` files at once: their committed bytes read into one buffer and checked by one
kernel call (pm/_batch.pyx) with the checks and the CRC of a one-file open, laid out for a
table's pruning as concatenated arrays (row-group block addresses, row counts, schema ids).

What a planner touches per partition is then a few array entries, not a Python object: an open
PmFile of a member is made only when asked (`data(i)` gives its bytes to PmFile(data=...), whose
own open re-runs the same checks in microseconds). Files the batch does not take (larger than
MAX_FILE, past the BUDGET, or failing any check) are `solo`: the caller opens them one by one,
which maps the large ones and raises the exact error for the bad ones.
"""

from __future__ import annotations

import os

import numpy as np

from .. import buffers
from . import _batch
from . import layout as L
from .crc import crc32_of
from .reader import READ_AT_MOST

OK, LARGE, SOLO, MISSING = _batch.OK, _batch.LARGE, _batch.SOLO, _batch.MISSING  # status per file
MAX_FILE = READ_AT_MOST  # bytes: larger `_pm` files are mapped, not copied (the one-file open's rule)
BUDGET = 1 << 30  # bytes read per batch in all (100,000 partitions of 6 KB: 600 MB); the rest opened alone


class PmBatch:
    """The latest (or `parquet_sizes`-pinned) snapshots of `paths`, read and checked together."""

    def __init__(self, paths, read=None, *, parquet_sizes=None, verify=True, max_file=MAX_FILE, budget=BUDGET,
                 checked=None):
        """paths: a sequence of each file's path (only indexed: for messages and one-file opens);
        read: (arena, at, size, status) when the bytes were already read (a tree walk), else
        read_files reads them. checked: what check_files returns for `read`, when the reader
        checked each file already (the walk's Checker.finish, latest snapshots, verified); status
        must then say which failed."""
        self.paths = paths
        if read is None:
            read = _batch.read_files([os.fsencode(p) for p in paths], int(max_file), int(budget))
        self.arena, self.at, self.size, self.status = read
        if checked is None:
            checked = _batch.check_files(self.arena, self.at, self.size, self.status,
                                         None if parquet_sizes is None else list(parquet_sizes), bool(verify),
                                         crc32_of)
        elif parquet_sizes is not None or not verify:
            raise ValueError("PmBatch: files checked already are the latest snapshots, verified")
        self.rg_start, self.block_at, self.num_rows, self.schema_id, self.reps = checked
        self.buffer = np.frombuffer(self.arena, np.uint8)
        self.ok = self.status == OK

    def __len__(self):
        return len(self.status)

    @property
    def solo(self) -> np.ndarray:
        """Indices of the files to open one by one."""
        return np.flatnonzero(~self.ok)

    def data(self, i) -> memoryview:
        """File i's committed bytes (read-only), for PmFile(path, data=...)."""
        if not self.ok[i]:
            raise ValueError(f"{self.paths[i]} is not in the batch")
        a = int(self.at[i])
        return memoryview(self.buffer[a : a + int(self.size[i])])

    def row_groups(self, files) -> np.ndarray:
        """Positions in the concatenation (block_at, num_rows) of files' row groups, file by file."""
        files = np.asarray(files, np.int64)
        starts, counts = self.rg_start[files], self.rg_start[files + 1] - self.rg_start[files]
        total = int(counts.sum())
        offsets = np.repeat(starts - (np.cumsum(counts) - counts), counts)
        return offsets + np.arange(total, dtype=np.int64)

    def record_at(self, files, col) -> np.ndarray:
        """Where column `col`'s chunk record of each of files' row groups lies in `buffer` (int64,
        file by file); every file must have more than `col` columns."""
        return self.block_at[self.row_groups(files)] + (L.BLOCK_NUM_ROWS_SIZE + L.CHUNK_SIZE * int(col))

    def records(self, files, col) -> np.ndarray:
        """Column `col`'s chunk records over files' row groups (L.CHUNK_DTYPE, concatenated); every
        file must have more than `col` columns."""
        at = self.record_at(files, col)
        out = buffers.empty(len(at) * L.CHUNK_SIZE, np.uint8).reshape(len(at), L.CHUNK_SIZE)
        _batch.gather(self.arena, at, out)
        return out.view(L.CHUNK_DTYPE).reshape(len(at))
