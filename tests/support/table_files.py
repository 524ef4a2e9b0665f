"""Partitioned test tables: pyarrow-written day partitions, upload to an object store, two
filesystem wrappers that record what a reader fetched (every byte-range request; every path
fetched or opened), and DuckDB's answer over the same files."""

import decimal
import os

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

DAY_US = 86_400_000_000


class CountingFS:
    """Wraps an fsspec filesystem and records every byte-range request."""

    def __init__(self, fs):
        self.fs = fs
        self.requests = []  # (path, start, end)

    def cat_file(self, path, start=None, end=None, **kw):
        data = self.fs.cat_file(path, start=start, end=end, **kw)
        self.requests.append((path, start, end, len(data)))
        return data

    def __getattr__(self, name):
        return getattr(self.fs, name)


class RecordingFS:
    """An fsspec filesystem that records every path it fetches or opens."""

    def __init__(self, fs):
        self.fs = fs
        self.paths = []

    def cat(self, path, *args, **kwargs):
        self.paths.extend([path] if isinstance(path, str) else path)
        return self.fs.cat(path, *args, **kwargs)

    def cat_file(self, path, *args, **kwargs):
        self.paths.append(path)
        return self.fs.cat_file(path, *args, **kwargs)

    def open(self, path, *args, **kwargs):
        self.paths.append(path)
        return self.fs.open(path, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def pm_partitions(self, root) -> set:
        base = self.fs._strip_protocol(root).rstrip("/")
        return {os.path.relpath(os.path.dirname(self.fs._strip_protocol(p)), base).replace(os.sep, "/")
                for p in self.paths if p.endswith("/_pm")}


def pyarrow_partition(path, day, rows=800, rg=100):
    rng = np.random.default_rng(day)
    ts = np.datetime64("2024-03-01", "us") + np.timedelta64(day * DAY_US, "us") + \
        (np.arange(rows) * (DAY_US // rows)).astype("timedelta64[us]")
    px = rng.normal(100, 10, rows)
    px[rng.random(rows) < 0.05] = np.nan
    t = pa.table({
        "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
        "sym": pa.array([f"S{(i // rg + day) % 4}" for i in range(rows)]),
        "px": pa.array(px, mask=rng.random(rows) < 0.05),
        "qty": pa.array(rng.integers(-1000, 1000, rows), pa.int64()),
        "dec": pa.array([decimal.Decimal(int(v)).scaleb(-4) for v in rng.integers(-10**9, 10**9, rows)],
                        pa.decimal128(18, 4)),
        "flag": pa.array(rng.random(rows) < 0.5),
        # all-null in the first half of every partition: those chunks must never be fetched
        "note": pa.array([None] * (rows // 2) + [f"n{i}" for i in range(rows - rows // 2)], pa.string()),
    })
    pq.write_table(t, path, row_group_size=rg, sorting_columns=[pq.SortingColumn(0)])
    return t


def upload(fs, local_root, remote_root):
    for d, _, files in os.walk(local_root):
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), local_root).replace(os.sep, "/")
            fs.put_file(os.path.join(d, f), f"{remote_root}/{rel}")


def duckdb_rows(files, sql):
    """DuckDB's answer to `sql`, whose FILES stands for read_parquet(files)."""
    con = duckdb.connect()
    try:
        return con.execute(sql.replace("FILES", f"read_parquet({files!r})")).fetchall()
    finally:
        con.close()
