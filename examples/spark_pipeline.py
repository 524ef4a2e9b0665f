"""A runnable qdbpm pipeline on Spark (local[2] by default).

    python examples/spark_pipeline.py [TABLE_DIR]

1. builds (or reuses) a partitioned trades table, 2. generates every `_pm` on the executors,
3. prunes a query across all partitions on the executors, 4. reads it through the `qdbpm`
data source with filter pushdown, and compares with spark.read.parquet.
"""

import os
import sys
import tempfile

from pyspark.sql import SparkSession

import qdbpm.spark as qs
from qdbpm.demo import build_trades


def main(root=None):
    root = root or tempfile.mkdtemp(prefix="qdbpm-spark-")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("qdbpm-example")
             .config("spark.sql.python.filterPushdown.enabled", "true")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        paths = [os.path.join(d, "data.parquet") for d, _, f in os.walk(root) if "data.parquet" in f]
        if not paths:
            paths = build_trades(root, days=10)
        gen = qs.generate(spark, paths)
        bad = gen.where("error IS NOT NULL").count()
        print(f"generated {gen.count() - bad} _pm files on the executors ({bad} failures)")

        where = "sym = 'NVDA' AND ts >= '2024-01-05 09:00:00' AND ts < '2024-01-05 17:00:00'"
        kept = qs.prune(spark, root, where)
        print(f"distributed prune: {kept.count()} row groups may match {where!r}")

        qs.register(spark)
        ours = spark.read.format("qdbpm").load(root).where(where)
        theirs = spark.read.option("recursiveFileLookup", "true").parquet(root).select(*ours.columns).where(where)
        a, b = ours.count(), theirs.count()
        print(f"qdbpm data source: {a} rows; spark.read.parquet: {b} rows; {'same' if a == b else 'DIFFERENT'}")
        return 0 if a == b else 1
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
