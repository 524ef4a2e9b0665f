"""Spark, same run: the `qdbpm` data source vs spark.read.parquet on a selective query, and
distributed `_pm` generation (qdbpm.spark.generate) vs the CLI's `qdbpm generate --jobs 2`.

    python benchmarks/compare_spark.py [--days 30] [--gen-days 240] [--root DIR]

    # the issue's table: 2,000 daily partitions x 12 row groups (built once into DIR, ~4 min)
    python benchmarks/compare_spark.py --days 2000 --gen-days 0 --root /tmp/qdbpm-t2000

Query (planning and execution, each from a fresh DataFrame): rows, row groups read (qdbpm: logged by its tasks; Spark: row groups in the files it
scans, as its own row-group skipping happens inside the Parquet reader and is not reported),
bytes (qdbpm: chunk bytes fetched; Spark: its scan's "size of files read" metric, or the size of
the files it scans when the metric is not reported) and wall time.

Generate: files per second over the same local files (every `_pm` removed before each run),
the driver's listing included; --gen-days 0 skips it.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import pyarrow.parquet as pq  # noqa: E402

import qdbpm  # noqa: E402
from benchmarks.harness import timed_calls  # noqa: E402
import qdbpm.spark as qs  # noqa: E402
from qdbpm.cli.demo import build_trades  # noqa: E402
from qdbpm.sync.generate import generate  # noqa: E402

WHERE = "sym = 'NVDA' AND ts >= '2024-01-15 10:00:00' AND ts < '2024-01-15 14:00:00'"


def scan_metric(df, name):
    plan = df._jdf.queryExecution().executedPlan()
    found = []

    def walk(node):
        metrics = node.metrics()
        it = metrics.keySet().iterator()
        while it.hasNext():
            k = it.next()
            if k == name:
                found.append(int(metrics.apply(k).value()))
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))

    walk(plan)
    return sum(found) if found else None


def remove_pms(root):
    for d, _, names in os.walk(root):
        if "_pm" in names:
            os.remove(os.path.join(d, "_pm"))


def compare_generate(spark, work, days, repeat):
    """{runner: median files per second} of generating every `_pm` of `days` partitions."""
    root = os.path.join(work, "gen")
    paths = build_trades(root, days=days, rows_per_day=12_000, row_group=1_000)
    cli = [os.path.join(os.path.dirname(sys.executable), "qdbpm"), "generate", "--jobs", "2", root]
    res = {}
    for name in ("qdbpm generate --jobs 2", "qdbpm.spark.generate"):
        times = []
        for _ in range(repeat):
            remove_pms(root)
            t0 = time.perf_counter()
            if name.startswith("qdbpm.spark"):
                rows = qs.generate(spark, root).collect()
                assert len(rows) == len(paths) and all(r.error is None for r in rows), rows[:3]
            else:
                subprocess.run(cli, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # no progress lines
            times.append(time.perf_counter() - t0)
            assert all(os.path.exists(os.path.join(os.path.dirname(p), "_pm")) for p in paths)
        res[name] = len(paths) / statistics.median(times)
    shutil.rmtree(root)
    return len(paths), res


def bare_source():
    """A Python data source that reads one row: the fixed cost every Python source pays (planning
    workers, one task), next to Spark's own bare job."""
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class BareReader(DataSourceReader):
        def read(self, partition):
            yield (1,)

    class BareSource(DataSource):
        @classmethod
        def name(cls):
            return "qdbpm_bench_bare"

        def schema(self):
            return "x int"

        def reader(self, schema):
            return BareReader()

    return BareSource


def table_root(work, args):
    """The benchmark table: --root when given (built there once and kept), else under `work`."""
    root = args.root or os.path.join(work, "t")
    marker = os.path.join(root, f".built-{args.days}")
    if not os.path.exists(marker):
        shutil.rmtree(root, ignore_errors=True)
        for p in build_trades(root, days=args.days):
            generate(p)
        open(marker, "w").close()
    return root


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--root", help="where the table is built once and kept between runs (default: a temporary directory)")
    ap.add_argument("--gen-days", type=int, default=240, help="partitions for the generate comparison (0: skip)")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    work = tempfile.mkdtemp(prefix="qdbpm-spark-bench-")
    root = table_root(work, args)
    paths = sorted(os.path.join(root, d, "data.parquet") for d in os.listdir(root) if not d.startswith("."))
    total_rgs = sum(pq.ParquetFile(p).metadata.num_row_groups for p in paths)
    spark = (SparkSession.builder.master("local[2]").config("spark.sql.python.filterPushdown.enabled", "true")
             .config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        qs.register(spark)
        spark.dataSource.register(bare_source())
        # fixed costs: a bare Spark job, and a Python data source reading one row
        spark.range(1).count()
        fixed = {"bare Spark job": timed_calls(lambda: spark.range(1).count(), args.repeat)[0],
                 "bare Python source": timed_calls(lambda: spark.read.format("qdbpm_bench_bare").load().count(),
                                             args.repeat + 1)[0][1:]}  # its first call starts the workers
        res = {}
        for name in ("qdbpm data source", "spark.read.parquet"):
            audits = []

            def query():
                # planning (listing, schema, pruning) and execution, from a fresh DataFrame each time
                if name.startswith("qdbpm"):
                    audits.append(os.path.join(work, f"audit-{len(audits)}"))
                    os.makedirs(audits[-1])
                    df = spark.read.format("qdbpm").option("audit_dir", audits[-1]).load(root).where(WHERE)
                else:
                    df = spark.read.option("recursiveFileLookup", "true").parquet(root).where(WHERE)
                return df, df.count()

            t, (df, rows) = timed_calls(query, args.repeat)
            if name.startswith("qdbpm"):
                read = [line.split("\t") for f in os.listdir(audits[-1]) for line in open(os.path.join(audits[-1], f))]
                rgs = len(read)
                nbytes = 0
                for p, r in read:
                    with qdbpm.open(os.path.join(root, p, "_pm")) as pm:
                        nbytes += int(pm.chunks["total_compressed"][int(r)].sum())
            else:
                rgs = total_rgs
                nbytes = scan_metric(df, "filesSize") or sum(os.path.getsize(p) for p in paths)
            res[name] = (rows, rgs, nbytes, t)  # t: every call's seconds
        gen = compare_generate(spark, work, args.gen_days, args.repeat) if args.gen_days else None
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"table: {len(paths)} partitions, {total_rgs} row groups; query: {WHERE}")
    print(f"wall: planning + execution from a fresh DataFrame; first: the first query of the session "
          f"(qdbpm: its table not yet open in the planning workers); median of {args.repeat}")
    print(f"{'reader':<22}{'rows':>7}{'row groups read':>17}{'bytes':>16}{'first':>10}{'median':>10}")
    for name, (rows, rgs, nbytes, t) in res.items():
        print(f"{name:<22}{rows:>7}{rgs:>17}{(nbytes or 0):>16,}{t[0] * 1e3:>8.0f}ms{statistics.median(t) * 1e3:>8.0f}ms")
    for name, t in fixed.items():
        print(f"{name:<22}{'':>7}{'':>17}{'':>16}{t[0] * 1e3:>8.0f}ms{statistics.median(t) * 1e3:>8.0f}ms")
    med = {k: statistics.median(v[3]) for k, v in res.items()} | {k: statistics.median(v) for k, v in fixed.items()}
    q, s = res["qdbpm data source"], res["spark.read.parquet"]
    print(f"ratios spark/qdbpm: row groups {s[1] / max(q[1], 1):.0f}x, bytes {(s[2] or 0) / max(q[2], 1):.0f}x, "
          f"wall {med['spark.read.parquet'] / med['qdbpm data source']:.1f}x median (goal 30x), "
          f"{s[3][0] / q[3][0]:.1f}x first")
    print(f"qdbpm / bare Spark job: {med['qdbpm data source'] / med['bare Spark job']:.1f}x (goal <= 2x); "
          f"qdbpm / bare Python source: {med['qdbpm data source'] / med['bare Python source']:.1f}x")
    if gen:
        n, rates = gen
        print(f"\ngenerate: {n} files (local, 12,000 rows and 12 row groups each), median of {args.repeat}")
        for name, rate in rates.items():
            print(f"{name:<26}{rate:>9.1f} files/s")
        print(f"ratio spark/cli: {rates['qdbpm.spark.generate'] / rates['qdbpm generate --jobs 2']:.2f}x")


if __name__ == "__main__":
    main()
