"""`LIKE 'prefix%'` prunes at least as much as Spark's own Parquet reader with `StringStartsWith`
pushed down, on a Spark-written file, and never drops a matching row.

Spark's side is measured, not modelled: the rows its Parquet scan outputs (the scan node's
`numOutputRows`) with record-level and column-index filtering off are the rows of the row groups its
statistics filter kept. qdbpm's side is the rows of the row groups `Scan.row_groups()` keeps.
"""

import glob
import os
import random
import shutil

import pytest

import qdbpm
from qdbpm.sync.generate import generate


def scan_rows(spark, df):
    """Rows the Parquet scan node of `df` output (collects `df` first)."""
    df.collect()
    plan = df._jdf.queryExecution().executedPlan()
    leaves = plan.collectLeaves()
    counts = [leaves.apply(i).metrics().apply("numOutputRows").value() for i in range(leaves.size())
              if "parquet" in leaves.apply(i).nodeName().lower()]
    assert len(counts) == 1, [leaves.apply(i).nodeName() for i in range(leaves.size())]
    return counts[0]


@pytest.fixture(scope="module")
def spark_strings(spark, tmp_path_factory):
    from pyspark.sql import functions as F

    root = str(tmp_path_factory.mktemp("like"))
    rng = random.Random(3)
    words = ["alpha", "alps", "beta", "bet", "gamma", "gam", "ga", "zeta", "z", "über", "a" * 80 + "x"]
    rows = [(i, None if i % 29 == 0 else f"{rng.choice(words)}{rng.randrange(10_000):05d}") for i in range(6000)]
    out = os.path.join(root, "_spark")
    (spark.createDataFrame(rows, "id long, s string").orderBy(F.col("s").asc_nulls_first()).coalesce(1)
     .write.option("parquet.block.size", 2048).parquet(out))
    part = os.path.join(root, "p0")
    os.makedirs(part)
    (written,) = glob.glob(os.path.join(out, "part-*.parquet"))
    shutil.move(written, os.path.join(part, "data.parquet"))
    shutil.rmtree(out)
    generate(os.path.join(part, "data.parquet"))
    return root, os.path.join(part, "data.parquet"), rows


def test_like_prefix_prunes_at_least_as_much_as_spark(spark, spark_strings):
    from pyspark.sql import functions as F

    root, path, rows = spark_strings
    jconf = spark.sparkContext._jsc.hadoopConfiguration()
    saved = {k: spark.conf.get(k, None) for k in ("spark.sql.adaptive.enabled",
                                                  "spark.sql.parquet.recordLevelFilter.enabled")}
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    spark.conf.set("spark.sql.parquet.recordLevelFilter.enabled", "false")
    jconf.set("parquet.filter.columnindex.enabled", "false")  # row groups only, as qdbpm prunes
    try:
        with qdbpm.open_table(root) as table:
            assert table.meta("p0").row_group_count > 10
            wins = pruned = 0
            for prefix in ["alp", "alpha", "bet", "beta0", "g", "gam", "gamma9", "ga", "z", "zeta1", "über",
                           "a" * 60, "a" * 80 + "x", "b", "c", "", "ü"]:
                like = prefix.replace("%", r"\%").replace("_", r"\_")
                scan = table.scan(f"s LIKE '{like}%'", ["id"])
                ours = sum(scan.row_groups()["num_rows"].to_pylist())
                df = spark.read.parquet(path).where(F.col("s").startswith(prefix)).select("id")
                theirs = scan_rows(spark, df)
                want = sorted(i for i, s in rows if s is not None and s.startswith(prefix))
                assert sorted(scan.to_table()["id"].to_pylist()) == want, prefix  # exact, no false negative
                assert sorted(r.id for r in df.collect()) == want, prefix
                assert ours <= theirs, (prefix, ours, theirs)
                wins += ours < theirs
                pruned += theirs < len(rows)  # Spark's statistics did skip row groups
            assert pruned >= 10
    finally:
        jconf.unset("parquet.filter.columnindex.enabled")
        for k, v in saved.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
    print(f"qdbpm kept fewer rows than Spark for {wins} prefixes")
