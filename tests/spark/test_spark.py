"""Spark through PySpark on a real local session: distributed generate and prune, the pandas_udf
helper, and the `qdbpm` data source against spark.read.parquet."""

import datetime as dt
import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import col
from qdbpm.sync.generate import generate

import pyspark  # noqa: E402,F401  (a test dependency: missing must fail, not skip)
import qdbpm.spark as qs  # noqa: E402

from support.table_files import pyarrow_partition  # noqa: E402


def small_partition(path, day, rows=120, rg=20):
    rng = np.random.default_rng(day)
    t = pa.table({"ts": pa.array(np.datetime64("2024-01-01", "us") + np.timedelta64(day, "D")
                                 + (np.arange(rows) * 600_000_000).astype("timedelta64[us]"), pa.timestamp("us", tz="UTC")),
                  "v": pa.array(rng.integers(0, 100, rows), pa.int64()),
                  "s": pa.array([f"k{(i // rg + day) % 7}" for i in range(rows)])})
    pq.write_table(t, path, row_group_size=rg)


@pytest.fixture(scope="module")
def many_partitions(tmp_path_factory):
    root = tmp_path_factory.mktemp("many")
    paths = []
    for d in range(60):
        part = root / f"p{d:03d}"
        part.mkdir()
        small_partition(str(part / "data.parquet"), d)
        paths.append(str(part / "data.parquet"))
    (root / "bad").mkdir()
    (root / "bad" / "data.parquet").write_bytes(b"PAR1 this is not parquet PAR1")
    return root, paths


def test_distributed_generate_equals_local_byte_for_byte(spark, many_partitions, tmp_path):
    root, paths = many_partitions
    local = tmp_path / "local"
    shutil.copytree(root, local)
    for p in sorted(local.glob("p*/data.parquet")):
        generate(str(p))
    bad = str(root / "bad" / "data.parquet")
    rows = qs.generate(spark, paths + [bad]).collect()
    assert len(rows) == 61
    by_path = {r.parquet_path: r for r in rows}
    assert by_path[bad].error and "Parquet" in by_path[bad].error and by_path[bad].pm_size is None
    for p in paths:
        r = by_path[p]
        assert r.error is None and r.row_groups == 6
        rel = os.path.relpath(os.path.dirname(p), root)
        with open(os.path.join(os.path.dirname(p), "_pm"), "rb") as a, open(local / rel / "_pm", "rb") as b:
            assert a.read() == b.read()
        assert r.pm_size == os.path.getsize(r.pm_path)


def test_distributed_prune_equals_table_prune(spark, many_partitions):
    root, paths = many_partitions
    for p in paths:
        generate(p)
    shutil.rmtree(root / "bad", ignore_errors=True)
    pred = (col("s") == "k3") & (col("ts") >= dt.datetime(2024, 1, 20, 6))
    got = qs.prune(spark, str(root), pred).orderBy("partition", "row_group").collect()
    with qdbpm.open_table(str(root)) as t:
        want = t.prune(pred).to_pylist()
    assert [(r.partition, r.row_group, r.num_rows) for r in got] == \
        [(w["partition"], w["row_group"], w["num_rows"]) for w in want]
    assert 0 < len(got) < 60 * 6
    # the pandas_udf helper: surviving row groups per _pm path
    pm_paths = spark.createDataFrame([(os.path.join(os.path.dirname(p), "_pm"),) for p in paths[:10]], "pm string")
    counts = pm_paths.select(qs.surviving_row_groups_udf(pred)("pm").alias("n")).collect()
    expect = [int(qdbpm.open(os.path.join(os.path.dirname(p), "_pm")).prune(pred).sum()) for p in paths[:10]]
    assert [r.n for r in counts] == expect


@pytest.fixture(scope="module")
def trades(tmp_path_factory):
    root = tmp_path_factory.mktemp("trades")
    for d in range(3):
        part = root / f"2024-03-0{d + 1}"
        part.mkdir()
        pyarrow_partition(str(part / "data.parquet"), d)
        generate(str(part / "data.parquet"))
    return str(root)


QUERIES = [
    "ts >= '2024-03-02 00:00:00' AND ts < '2024-03-02 06:00:00'",
    "sym = 'S2' AND qty > 0",
    "sym IN ('S0', 'S3') AND NOT (qty <= 100)",
    "dec > 0.5 AND note IS NOT NULL",
    "px > 100 OR px IS NULL",
    "isnan(px) OR qty = 7",
    "flag AND sym <> 'S1'",
    "note IS NULL AND ts > '2024-03-03 12:00:00'",
    "qty <=> 5 OR NOT (sym IN ('S1', 'S2'))",
]


@pytest.mark.parametrize("tz", ["UTC", "America/New_York", "Asia/Kolkata"])
def test_data_source_matches_spark_parquet(spark, trades, tz, tmp_path):
    qs.register(spark)
    spark.conf.set("spark.sql.session.timeZone", tz)
    try:
        total_rgs = sum(qdbpm.open(os.path.join(trades, p, "_pm")).row_group_count for p in os.listdir(trades))
        for q in QUERIES:
            audit = tmp_path / f"audit{abs(hash((q, tz)))}"
            audit.mkdir()
            ours = spark.read.format("qdbpm").option("audit_dir", str(audit)).load(trades)
            theirs = spark.read.option("recursiveFileLookup", "true").parquet(trades).select(*ours.columns)
            assert ours.schema == theirs.schema
            a = sorted(map(repr, ours.where(q).collect()))
            b = sorted(map(repr, theirs.where(q).collect()))
            assert a == b, q
            read = sum(len(f.read_text().splitlines()) for f in audit.iterdir())
            print(f"{tz} {q!r}: qdbpm read {read} of {total_rgs} row groups, {len(a)} rows")
            if q in QUERIES[:2] or q.startswith("note IS NULL"):
                assert read < total_rgs / 2, (q, read)
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def test_filter_pushdown_accepts_only_exact_filters(spark, trades):
    from pyspark.sql import datasource as D

    with qdbpm.open(os.path.join(trades, "2024-03-01", "_pm")) as pm:
        assert qs.convert_filter(D.EqualTo(("sym",), "S1"), pm) is not None
        assert qs.convert_filter(D.GreaterThan(("px",), 1.0), pm) is None  # Spark: NaN > everything
        assert qs.convert_filter(D.In(("sym",), ("a", None)), pm) is None
        assert qs.convert_filter(D.Not(D.In(("qty",), (1, 2))), pm) is not None
        assert qs.convert_filter(D.StringStartsWith(("sym",), "S"), pm) is None
        assert qs.convert_filter(D.EqualTo(("nope",), 1), pm) is None


def test_sql_temporary_view_and_catalog_table(spark, trades, tmp_path):
    """From Spark SQL: a temporary view and a catalog table USING qdbpm answer as
    spark.read.parquet does. PySpark 4.3 hands a catalog table's reader no options, so CREATE
    TABLE keeps them in the schema; each query on the table plans anew (no stale pushdown)."""
    qs.register(spark)
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW qv USING qdbpm OPTIONS (path '{trades}')")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW qnp USING qdbpm OPTIONS (path '{trades}', pushdown 'false')")
    theirs = spark.read.option("recursiveFileLookup", "true").parquet(trades)
    theirs.createOrReplaceTempView("pv")
    copy = str(tmp_path / "copy")  # the catalog tables get their own copy: DROP TABLE may delete
    shutil.copytree(trades, copy)
    cols = "sym, qty, note"
    spark.sql("DROP TABLE IF EXISTS qt")
    spark.sql("DROP TABLE IF EXISTS qloc")
    spark.sql(f"CREATE TABLE qt USING qdbpm OPTIONS (path '{copy}', max_gap '0')")
    spark.sql(f"CREATE TABLE qloc USING qdbpm LOCATION '{copy}'")
    try:
        for q in ("qty > 10 AND sym = 'S1'", "note IS NULL", "sym LIKE 'S%' AND qty < 5", "true"):
            b = sorted(map(repr, spark.sql(f"SELECT {cols} FROM pv WHERE {q}").collect()))
            assert b, q
            # a view reuses its last pushdown when a query pushes none (docs/api.md): "true" not on qv
            for rel in ("qt", "qloc", "qnp") if q == "true" else ("qt", "qloc", "qnp", "qv"):
                a = sorted(map(repr, spark.sql(f"SELECT {cols} FROM {rel} WHERE {q}").collect()))
                assert a == b, (rel, q)
            n = spark.sql(f"SELECT count(*) FROM qt WHERE {q}").collect()[0][0]
            assert n == len(b), q
        stored = json.loads(spark.table("qt").schema.fields[0].metadata["qdbpm.table"])
        assert stored == {"path": f"file:{copy}", "max_gap": "0"}
        plan = spark.sql("SELECT * FROM qnp WHERE qty > 10")._jdf.queryExecution().executedPlan().toString()
        assert "Filter (" in plan, plan  # without pushdown Spark keeps every filter
    finally:
        spark.sql("DROP TABLE IF EXISTS qt")
        spark.sql("DROP TABLE IF EXISTS qloc")
    assert sorted(os.listdir(copy)) == sorted(os.listdir(trades))  # DROP TABLE leaves the files alone


def test_catalog_table_declared_columns_keeps_no_options(spark, trades, tmp_path):
    """A catalog table created with its own column list never asks the source for a schema, so
    nothing keeps its options: reading it is a clear error naming the missing path."""
    qs.register(spark)
    copy = str(tmp_path / "copy")
    shutil.copytree(trades, copy)
    spark.sql("DROP TABLE IF EXISTS qcols")
    spark.sql(f"CREATE TABLE qcols (sym string, qty bigint) USING qdbpm OPTIONS (path '{copy}')")
    try:
        with pytest.raises(Exception, match="needs a path.*without columns"):
            spark.sql("SELECT count(*) FROM qcols").collect()
        # options given with the query serve it
        n = spark.sql(f"SELECT count(*) FROM qcols WITH ('path' = '{copy}') WHERE qty > 10").collect()[0][0]
        assert n == spark.read.option("recursiveFileLookup", "true").parquet(trades).where("qty > 10").count()
    finally:
        spark.sql("DROP TABLE IF EXISTS qcols")


def test_catalog_table_insert_into(spark, tmp_path, monkeypatch):
    """INSERT INTO a catalog table writes where the table's stored options say (Spark qualifies
    its location as file:/path: the writer reads it as the reader does, not as a relative
    directory named 'file:'), appending a `_pm` snapshot to the partition it lands in."""
    monkeypatch.chdir(tmp_path)  # a misread root would land here
    qs.register(spark)
    root = str(tmp_path / "w")
    df = spark.createDataFrame([(1, "a", "d1"), (2, "b", "d2")], "x int, s string, day string")
    df.write.format("qdbpm").option("partition_by", "day").mode("append").save(root)
    spark.sql("DROP TABLE IF EXISTS qw")
    spark.sql(f"CREATE TABLE qw USING qdbpm OPTIONS (path '{root}', partition_by 'day')")
    try:
        spark.sql("INSERT INTO qw VALUES (3, 'c', 'd1'), (4, 'd', 'd3')")
        got = [tuple(r) for r in spark.sql("SELECT x, s, day FROM qw ORDER BY x").collect()]
        assert got == [(1, "a", "d1"), (2, "b", "d2"), (3, "c", "d1"), (4, "d", "d3")]
        assert sorted(os.listdir(root)) == ["day=d1", "day=d2", "day=d3"]
        assert sorted(os.listdir(tmp_path)) == ["w"]
        with qdbpm.open(os.path.join(root, "day=d1", "_pm")) as pm:
            assert len(pm.snapshots()) == 2 and pm.row_group_count == 2
    finally:
        spark.sql("DROP TABLE IF EXISTS qw")
