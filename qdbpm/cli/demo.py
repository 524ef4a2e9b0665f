"""`qdbpm demo`: the main job on its embedded default, end to end on local files.

Builds 30 daily partitions of a trades table with pyarrow, generates every `_pm`, prunes a
query with them, reads the surviving chunks through byte-range requests (the footer once, for
the exact Arrow types), checks the rows against pyarrow, and prints what was skipped.
"""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np

from ..pm import layout as L

DAY_US = 86_400_000_000
SYMBOLS = ["AAPL", "AMZN", "GOOG", "META", "MSFT", "NVDA", "TSLA", "NFLX"]
QUERY = "ts BETWEEN '2024-01-15T10:00:00Z' AND '2024-01-15T13:59:59Z' AND sym = 'NVDA' AND price > 100"


class _CountingFS:
    """Local filesystem that counts the byte ranges read (what an object store would bill)."""

    def __init__(self):
        import fsspec

        self.fs = fsspec.filesystem("file")
        self.requests = 0  # byte ranges of data.parquet
        self.bytes = 0
        self.pm_reads = 0
        self.pm_bytes = 0

    def cat_file(self, path, start=None, end=None, **kw):
        data = self.fs.cat_file(path, start=start, end=end, **kw)
        if str(path).endswith(L.PM_FILE_NAME):
            self.pm_reads += 1
            self.pm_bytes += len(data)
        else:
            self.requests += 1
            self.bytes += len(data)
        return data

    def __getattr__(self, name):
        return getattr(self.fs, name)


def build_trades(root, days=30, rows_per_day=48_000, row_group=4_000, seed=0):
    """Daily partitions `ts=YYYY-MM-DD/data.parquet` of synthetic trades, ts ascending."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    paths = []
    for d in range(days):
        day = np.datetime64("2024-01-01", "D") + np.timedelta64(d, "D")
        part = os.path.join(root, f"ts={day}")
        os.makedirs(part, exist_ok=True)
        offs = np.sort(rng.integers(0, DAY_US, rows_per_day))
        ts = day.astype("datetime64[us]") + offs.astype("timedelta64[us]")
        # symbols come in bursts, so a row group holds few of them (as real feeds often do)
        sym = np.repeat(rng.choice(SYMBOLS, rows_per_day // 500), 500)
        price = np.round(rng.lognormal(4.5, 0.4, rows_per_day), 2)
        t = pa.table({
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "sym": pa.array(sym),
            "price": pa.array(price),
            "qty": pa.array(rng.integers(1, 1000, rows_per_day), pa.int64()),
            "side": pa.array(np.where(rng.random(rows_per_day) < 0.5, "buy", "sell")),
        })
        path = os.path.join(part, L.PARQUET_FILE_NAME)
        pq.write_table(t, path, row_group_size=row_group, compression="zstd",
                       sorting_columns=[pq.SortingColumn(0)], bloom_filter_options={"sym": {"ndv": 8}})
        paths.append(path)
    return paths


def run_demo(args) -> int:
    import pyarrow.dataset as pads

    from ..prune.sql import parse
    from ..prune.arrow import to_arrow
    from ..sync.generate import generate
    from ..table.read import read_table
    from ..table.table import open_table

    root = args.dir or tempfile.mkdtemp(prefix="qdbpm-demo-")
    os.makedirs(root, exist_ok=True)
    t0 = time.perf_counter()
    paths = build_trades(root)
    total_bytes = sum(os.path.getsize(p) for p in paths)
    print(f"built a trades table: {len(paths)} daily partitions, {total_bytes / 1e6:.1f} MB of Parquet in {root}"
          f" ({time.perf_counter() - t0:.1f} s)")

    t0 = time.perf_counter()
    pm_bytes = sum(generate(p) for p in paths)
    print(f"generated {len(paths)} _pm files ({pm_bytes / 1e3:.1f} kB in all, bloom filters inline) in "
          f"{(time.perf_counter() - t0) * 1e3:.0f} ms")

    pred = parse(QUERY)
    print(f"\nquery: {QUERY}")
    with open_table(root) as table:
        total_rgs = sum(table.meta(p).row_group_count for p in table.partitions)
        t0 = time.perf_counter()
        kept = table.prune(pred)
        prune_ms = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        table.prune(pred)
        again_ms = (time.perf_counter() - t0) * 1e3
    parts = sorted(set(kept["partition"].to_pylist()))
    print(f"pruned with _pm: {kept.num_rows} of {total_rgs} row groups survive, in {len(parts)} of "
          f"{len(paths)} partitions ({prune_ms:.1f} ms first call, {again_ms:.2f} ms with stats cached)")

    fs = _CountingFS()
    t0 = time.perf_counter()
    result = read_table(root, columns=["ts", "sym", "price", "qty"], where=pred, filesystem=fs)
    read_ms = (time.perf_counter() - t0) * 1e3
    print(f"read through byte ranges: {result.num_rows} matching rows, {fs.bytes / 1e3:.1f} kB of Parquet fetched "
          f"in {fs.requests} range request(s) plus {fs.pm_reads} _pm reads ({fs.pm_bytes / 1e3:.1f} kB), "
          f"{read_ms:.0f} ms; the Parquet footer (for the exact Arrow types) is read once, all partitions "
          "sharing one column schema")
    print(f"skipped {total_rgs - kept.num_rows} of {total_rgs} row groups and "
          f"{100 * (1 - fs.bytes / total_bytes):.2f}% of the table's {total_bytes / 1e6:.1f} MB")

    want = pads.dataset(root, format="parquet").to_table(
        columns=["ts", "sym", "price", "qty"], filter=to_arrow(pred, pads.dataset(paths[0]).schema))
    same = want.sort_by("ts").equals(result.sort_by("ts"))
    print(f"same rows as pyarrow.dataset reading the whole table: {'yes' if same else 'NO'}")
    return 0 if same else 1


def run_spark_demo(args) -> int:
    """The story on a local Spark session: distributed generate and prune, then the data source."""
    import os
    import sys
    import time

    from pyspark.sql import SparkSession

    from .. import spark as qs

    root = args.dir or tempfile.mkdtemp(prefix="qdbpm-spark-demo-")
    paths = build_trades(root, days=10)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("qdbpm-demo")
             .config("spark.sql.python.filterPushdown.enabled", "true")
             .config("spark.sql.session.timeZone", "UTC").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        t0 = time.perf_counter()
        rows = qs.generate(spark, paths).collect()
        failed = [r for r in rows if r.error]
        print(f"generated {len(rows) - len(failed)} _pm files on Spark executors in {time.perf_counter() - t0:.1f} s"
              f" ({len(failed)} failures)")
        where = "sym = 'NVDA' AND ts >= '2024-01-05 09:00:00' AND ts < '2024-01-05 17:00:00'"
        kept = qs.prune(spark, root, where).count()
        print(f"distributed prune of {where!r}: {kept} row groups may match")
        qs.register(spark)
        ours = spark.read.format("qdbpm").load(root).where(where)
        theirs = spark.read.option("recursiveFileLookup", "true").parquet(root).select(*ours.columns).where(where)
        a = sorted(map(repr, ours.collect()))
        b = sorted(map(repr, theirs.collect()))
        print(f"qdbpm data source returned {len(a)} rows; spark.read.parquet {len(b)}: "
              f"{'identical' if a == b else 'DIFFERENT'}")
        return 0 if a == b else 1
    finally:
        spark.stop()
