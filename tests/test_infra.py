"""Smoke tests of the real test infrastructure: SeaweedFS S3 (via s3fs) and Spark.

Fixtures come from fixtures_infra (imported by conftest.py).
"""

import datetime as dt
import io
import os
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest


def _table(n=1000):
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i) for i in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "sym": pa.array(["s%d" % (i % 7) for i in range(n)]),
        }
    )


def _parquet_bytes(table, **kw):
    buf = io.BytesIO()
    pq.write_table(table, buf, **kw)
    return buf.getvalue()


# ------------------------------------------------------------------- S3 (SeaweedFS)


def test_s3_parquet_roundtrip(s3_server, s3_bucket):
    fs = s3_server.filesystem()
    table = _table()
    expected = _parquet_bytes(table, row_group_size=250)
    path = s3_bucket + "/dir/part-0.parquet"
    with fs.open(path, "wb") as f:
        pq.write_table(table, f, row_group_size=250)

    assert fs.cat_file(path) == expected  # byte-identical
    assert fs.size(path) == len(expected)
    assert fs.ls(s3_bucket + "/dir", detail=False) == [path]
    back = pq.read_table(path, filesystem=fs)
    assert back.equals(table)
    assert pq.ParquetFile(path, filesystem=fs).metadata.num_row_groups == 4


def test_s3_ranged_reads(s3_server, s3_bucket):
    fs = s3_server.filesystem()
    data = os.urandom(3 * 1024 * 1024 + 17)  # > one multipart chunk, odd size
    path = s3_bucket + "/blob.bin"
    fs.pipe_file(path, data)
    n = len(data)
    # s3fs's cat_file is (path, version_id=None, start=None, end=None): start and
    # end MUST be keywords (positionally, start would be taken as the version id).
    for start, end in [(0, 1), (0, 8), (5, 4101), (n - 8, n), (n - 8, None), (1 << 20, 3 << 20), (n - 1, n)]:
        assert fs.cat_file(path, start=start, end=end) == data[start:end], (start, end)
    assert fs.cat_file(path, start=-8) == data[-8:]  # suffix range
    assert fs.cat_ranges([path, path], [0, 100], [4, 164]) == [data[0:4], data[100:164]]
    assert fs.read_block(path, 10, 20) == data[10:30]
    with fs.open(path, "rb", block_size=64 * 1024) as f:
        f.seek(n - 100)
        assert f.read(100) == data[-100:]
        f.seek(12345)
        assert f.read(10) == data[12345:12355]


def test_s3_auth_required(s3_server, s3_bucket):
    fs = s3_server.filesystem()
    path = s3_bucket + "/secret.txt"
    fs.pipe_file(path, b"top secret")
    obj = "/" + path

    # Raw HTTP: unsigned, wrong secret, unknown key are all rejected; right creds work.
    assert s3_server.request("GET", obj)[0] == 200
    assert s3_server.request("GET", obj, signed=False)[0] == 403
    assert s3_server.request("GET", obj, secret="wrong-secret")[0] == 403
    assert s3_server.request("GET", obj, key="unknown-key", secret="x")[0] == 403
    assert s3_server.request("PUT", obj, body=b"x", signed=False)[0] == 403
    assert s3_server.request("GET", "/", signed=False)[0] == 403  # ListBuckets

    # Through s3fs.
    anon = s3_server.filesystem(anon=True, key=None, secret=None)
    with pytest.raises(PermissionError):
        anon.cat_file(path)
    wrong = s3_server.filesystem(secret="wrong-secret")
    with pytest.raises(PermissionError):
        wrong.cat_file(path)
    with pytest.raises(PermissionError):
        wrong.pipe_file(s3_bucket + "/other", b"x")
    assert fs.cat_file(path) == b"top secret"
    assert not fs.exists(s3_bucket + "/other")


def test_s3_server_stop_leaves_nothing():
    """A second, short-lived server: stop() ends the whole process group and
    removes its files; the ports are free again."""
    from support.s3_server import SeaweedS3

    srv = SeaweedS3()
    with srv:
        pid, root = srv.proc.pid, srv.root
        ports = dict(srv.ports)
        assert srv.request("GET", "/")[0] == 200
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert not os.path.exists(root)
    for name in ("master", "volume", "filer", "s3", "admin"):
        assert not os.path.exists("/tmp/seaweedfs-%s-grpc-%d.sock" % (name, ports[name + ".grpc"]))
    out = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True).stdout if _has("ss") else ""
    for port in ports.values():
        assert ":%d " % port not in out


def _has(cmd):
    from shutil import which

    return which(cmd) is not None


# ------------------------------------------------------------------- Spark


def test_spark_range_count(spark):
    assert spark.range(10).count() == 10
    assert spark.conf.get("spark.sql.python.filterPushdown.enabled") == "true"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


def test_spark_map_in_arrow(spark):
    import pyarrow.compute as pc

    def double(batches):
        for b in batches:
            yield pa.RecordBatch.from_arrays(
                [b.column(0), pc.multiply(b.column(0), 2), pa.array([os.getpid()] * b.num_rows, pa.int64())],
                names=["id", "twice", "pid"],
            )

    rows = spark.range(0, 100, numPartitions=2).mapInArrow(double, "id long, twice long, pid long").collect()
    assert sorted((r.id, r.twice) for r in rows) == [(i, 2 * i) for i in range(100)]
    assert os.getpid() not in {r.pid for r in rows}  # ran in Python workers


def test_spark_parquet_dir_with_timestamps(spark, tmp_path):
    from pyspark.sql import functions as F

    out = str(tmp_path / "sp")
    df = spark.range(0, 50, numPartitions=2).select(
        F.col("id"),
        F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id") * 60).alias("ts"),
        (F.col("id") % 3).cast("string").alias("k"),
    )
    df.write.mode("overwrite").parquet(out)
    assert any(name.endswith(".parquet") for name in os.listdir(out))

    back = spark.read.parquet(out)
    assert dict(back.dtypes) == {"id": "bigint", "ts": "timestamp", "k": "string"}
    # The literal is parsed in the session time zone (UTC): 1_700_000_000 + 5 * 60.
    rows = sorted(back.filter(F.col("ts") >= F.lit("2023-11-14 22:18:20").cast("timestamp")).collect())
    assert [r.id for r in rows] == list(range(5, 50))
    # collect() gives naive datetimes in the driver's local time zone.
    assert rows[0].ts.timestamp() == 1_700_000_000 + 5 * 60

    # The same files read by pyarrow. Spark writes INT96 timestamps by default
    # (spark.sql.parquet.outputTimestampType); pyarrow reads them as timestamp[ns].
    ts = pq.read_table(out).sort_by("id").column("ts")
    assert pa.types.is_timestamp(ts.type)
    per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[ts.type.unit]
    assert ts.cast(pa.int64())[0].as_py() == 1_700_000_000 * per_second
