"""df.write.format("qdbpm"): partitioned writes, appends and overwrites on a local directory and on
SeaweedFS, read back by qdbpm and Spark, `_pm` files the CLI verifies (every snapshot), and failing
tasks that publish nothing."""

import datetime as dt
import json
import os

import numpy as np
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.cli.main import main as cli_main
from qdbpm.sync.remote import find_parquet
from qdbpm.table.read import read_table

import pyspark  # noqa: F401  (a test dependency: missing must fail, not skip)
import qdbpm.spark as qs
from qdbpm.spark.writer import STAGING_DIR

SCHEMA = "day int, ts timestamp, v long, s string, x double"


def rows(seed, days, n):
    """n rows spread over `days`, ts increasing within each call."""
    rng = np.random.default_rng(seed)
    base = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(days=seed)
    out = []
    for i in range(n):
        x = None if i % 17 == 0 else float(rng.normal())
        out.append((int(days[i % len(days)]), base + dt.timedelta(seconds=i), int(rng.integers(-1000, 1000)),
                    f"k{int(rng.integers(0, 40))}", x))
    return out


def frame(spark, data, parts=3):
    return spark.createDataFrame(data, SCHEMA).repartition(parts)


def expected(data):
    """The rows as read back: sorted by (day, ts)."""
    return sorted(data, key=lambda r: (r[0], r[1]))


def as_rows(table):
    t = table.select(["day", "ts", "v", "s", "x"]).to_pylist()
    out = [(int(r["day"]), r["ts"].replace(tzinfo=dt.timezone.utc) if r["ts"].tzinfo is None else r["ts"],
            r["v"], r["s"], r["x"]) for r in t]
    return sorted(out, key=lambda r: (r[0], r[1]))


def spark_rows(df):
    out = [(r.day, r.ts.astimezone(dt.timezone.utc) if r.ts.tzinfo else r.ts.replace(tzinfo=dt.timezone.utc),
            r.v, r.s, r.x) for r in df.select("day", "ts", "v", "s", "x").collect()]
    return sorted(out, key=lambda r: (r[0], r[1]))


def write(df, root, mode, options=None, **extra):
    w = df.write.format("qdbpm").option("partition_by", "day").option("bloom_columns", "s") \
        .option("row_group_size", "40").mode(mode)
    for k, v in {**(options or {}), **extra}.items():
        w = w.option(k, v)
    w.save(root)


def check_pm_local(root, days, snapshots):
    """Every partition verifies with the CLI (all snapshots), its latest snapshot describes the
    whole file, and it has `snapshots` snapshots."""
    for d in days:
        part = os.path.join(root, f"day={d}")
        assert sorted(os.listdir(part)) == ["_pm", "data.parquet"]
        pm_path = os.path.join(part, "_pm")
        assert cli_main(["verify", pm_path]) == 0
        md = pq.ParquetFile(os.path.join(part, "data.parquet")).metadata
        with qdbpm.open(pm_path) as pm:
            assert pm.parquet_size == os.path.getsize(os.path.join(part, "data.parquet"))
            assert pm.row_group_count == md.num_row_groups
            assert int(np.sum(pm.num_rows)) == md.num_rows
            assert "s" in [pm.column_names[c] for c in pm.bloom_columns]
            assert len(pm.snapshots()) == snapshots[d], d
    assert not os.path.exists(os.path.join(root, STAGING_DIR))


@pytest.fixture(scope="module")
def registered(spark):
    qs.register(spark)
    return spark


def test_local_write_append_overwrite(registered, tmp_path):
    spark = registered
    root = str(tmp_path / "t")
    first = rows(1, [1, 2, 3], 300)
    write(frame(spark, first), root, "overwrite")
    check_pm_local(root, [1, 2, 3], {1: 1, 2: 1, 3: 1})  # several tasks per day: one snapshot
    assert as_rows(read_table(root)) == expected(first)
    assert spark_rows(spark.read.format("qdbpm").load(root)) == expected(first)
    assert spark_rows(spark.read.parquet(root)) == expected(first)  # Spark's own reader agrees

    sizes = {d: os.path.getsize(os.path.join(root, f"day={d}", "data.parquet")) for d in (1, 2, 3)}
    counts = {d: sum(1 for r in first if r[0] == d) for d in (1, 2, 3)}
    second = rows(2, [2, 3, 4], 150)  # 2, 3 exist: appended by several tasks each; 4 is new
    write(frame(spark, second), root, "append")
    check_pm_local(root, [1, 2, 3, 4], {1: 1, 2: 2, 3: 2, 4: 1})
    both = expected(first + second)
    assert as_rows(read_table(root)) == both
    assert spark_rows(spark.read.format("qdbpm").load(root)) == both
    assert spark_rows(spark.read.parquet(root)) == both
    for d in (2, 3):  # the older snapshot still describes the file as it was
        pm_path = os.path.join(root, f"day={d}", "_pm")
        with qdbpm.open(pm_path, parquet_size=sizes[d]) as old:
            assert int(np.sum(old.num_rows)) == counts[d]
    assert os.path.getsize(os.path.join(root, "day=1", "data.parquet")) == sizes[1]  # untouched

    third = rows(3, [3, 5], 60)
    write(frame(spark, third), root, "overwrite")
    assert sorted(os.listdir(root)) == ["day=3", "day=5"]
    check_pm_local(root, [3, 5], {3: 1, 5: 1})
    assert as_rows(read_table(root)) == expected(third)
    assert spark_rows(spark.read.format("qdbpm").load(root)) == expected(third)


def test_unpartitioned_write(registered, tmp_path):
    spark = registered
    root = str(tmp_path / "flat")
    data = rows(4, [7], 100)
    spark.createDataFrame(data, SCHEMA).repartition(2).write.format("qdbpm").mode("append").save(root)
    assert sorted(os.listdir(root)) == ["_pm", "data.parquet"]
    assert cli_main(["verify", os.path.join(root, "_pm")]) == 0
    assert as_rows(read_table(root)) == expected(data)


def failing_frame(spark, data):
    from pyspark.sql import functions as F

    @F.udf("long")
    def boom(v):
        if v is not None and v % 97 == 0:
            raise ValueError("injected task failure")
        return v

    df = frame(spark, data)
    return df.withColumn("v", boom(df.v))


def snapshot_tree(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                out[os.path.relpath(os.path.join(d, f), root)] = fh.read()
    return out


def test_failing_task_publishes_nothing(registered, tmp_path):
    spark = registered
    root = str(tmp_path / "t")
    first = rows(5, [1, 2], 120)
    write(frame(spark, first), root, "overwrite")
    before = snapshot_tree(root)
    bad = rows(6, [2, 3], 400)
    assert any(r[2] % 97 == 0 for r in bad)
    for mode in ("append", "overwrite"):
        with pytest.raises(Exception, match="injected task failure"):
            write(failing_frame(spark, bad), root, mode)
        # nothing published. A task Spark had not stopped yet when the job aborted may still stage
        # files afterwards: they stay under the hidden _qdbpm_staging/, which no reader lists.
        published = {k: v for k, v in snapshot_tree(root).items() if not k.startswith("_qdbpm_staging")}
        assert published == before
        assert not any("_pm" == os.path.basename(k) for k in snapshot_tree(root) if k.startswith("_qdbpm_staging"))
    assert as_rows(read_table(root)) == expected(first)
    with qdbpm.open_table(root) as t:
        assert all(not p.startswith("_") for p in t.partitions)
    listed = find_parquet(root)
    assert all("_qdbpm_staging" not in p for p, _ in listed)  # generate never sees staged files


def test_bad_options_are_named(registered, tmp_path):
    spark = registered
    df = frame(spark, rows(7, [1], 10))
    for opts, text in (({"partition_by": "nope"}, "partition_by"), ({"partition_by": "day", "bloom_columns": "day"}, "partition keys"),
                       ({"row_group_size": "x"}, "row_group_size")):
        w = df.write.format("qdbpm").mode("append")
        for k, v in opts.items():
            w = w.option(k, v)
        with pytest.raises(Exception, match=text):
            w.save(str(tmp_path / "bad"))
    assert not os.path.exists(tmp_path / "bad")


# -- SeaweedFS ---------------------------------------------------------------------------------

def s3_options(server):
    so = server.storage_options()
    return {"key": so["key"], "secret": so["secret"], "client_kwargs": json.dumps(so["client_kwargs"])}


def check_pm_s3(fs, root, days, snapshots, tmp_path):
    """As check_pm_local, on copies fetched from the bucket."""
    listed = sorted(p.rsplit("/", 1)[-1] for p in fs.find(root))
    assert not any(STAGING_DIR in p for p in fs.find(root))
    assert listed == sorted(["_pm", "data.parquet"] * len(days))
    local = tmp_path / f"copy{len(list(tmp_path.iterdir()))}"
    for d in days:
        part = local / f"day={d}"
        part.mkdir(parents=True)
        fs.get_file(f"{root}/day={d}/_pm", str(part / "_pm"))
        fs.get_file(f"{root}/day={d}/data.parquet", str(part / "data.parquet"))
    check_pm_local(str(local), days, snapshots)
    return str(local)


def test_s3_write_append_overwrite(registered, s3_server, s3_bucket, tmp_path):
    spark = registered
    fs = s3_server.filesystem()
    root = f"{s3_bucket}/t"
    url = f"s3://{root}"
    opts = s3_options(s3_server)
    first = rows(11, [1, 2, 3], 300)
    write(frame(spark, first), url, "overwrite", opts)
    local = check_pm_s3(fs, root, [1, 2, 3], {1: 1, 2: 1, 3: 1}, tmp_path)
    assert as_rows(read_table(url, filesystem=fs)) == expected(first)
    assert spark_rows(spark.read.parquet(local)) == expected(first)
    reader = spark.read.format("qdbpm")
    for k, v in opts.items():
        reader = reader.option(k, v)
    assert spark_rows(reader.load(url)) == expected(first)

    sizes = {d: fs.size(f"{root}/day={d}/data.parquet") for d in (1, 2, 3)}
    counts = {d: sum(1 for r in first if r[0] == d) for d in (1, 2, 3)}
    second = rows(12, [2, 3, 4], 150)
    write(frame(spark, second), url, "append", opts)
    check_pm_s3(fs, root, [1, 2, 3, 4], {1: 1, 2: 2, 3: 2, 4: 1}, tmp_path)
    both = expected(first + second)
    assert as_rows(read_table(url, filesystem=fs)) == both
    assert spark_rows(reader.load(url)) == both
    for d in (2, 3):
        with qdbpm.open(f"{root}/day={d}/_pm", parquet_size=sizes[d], filesystem=fs) as old:
            assert int(np.sum(old.num_rows)) == counts[d]

    third = rows(13, [3, 5], 60)
    write(frame(spark, third), url, "overwrite", opts)
    check_pm_s3(fs, root, [3, 5], {3: 1, 5: 1}, tmp_path)
    assert as_rows(read_table(url, filesystem=fs)) == expected(third)


def test_s3_failing_task_publishes_nothing(registered, s3_server, s3_bucket):
    spark = registered
    fs = s3_server.filesystem()
    root = f"{s3_bucket}/t"
    url = f"s3://{root}"
    opts = s3_options(s3_server)
    first = rows(14, [1, 2], 120)
    write(frame(spark, first), url, "overwrite", opts)
    before = {p: fs.cat_file(p) for p in fs.find(root)}
    for mode in ("append", "overwrite"):
        with pytest.raises(Exception, match="injected task failure"):
            write(failing_frame(spark, rows(15, [2, 3], 400)), url, mode, opts)
        assert {p: fs.cat_file(p) for p in fs.find(root)} == before
    assert as_rows(read_table(url, filesystem=fs)) == expected(first)
