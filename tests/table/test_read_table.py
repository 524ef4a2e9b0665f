"""Cold storage: read_table against a real S3-compatible server (SeaweedFS on loopback).

Tables written by pyarrow, DuckDB and Spark are uploaded; read_table must equal pyarrow's own
result (values and types), fetch nothing but surviving chunks and one footer (never an all-null
chunk, at most 5% extra bytes), and refuse objects that do not match their `_pm`.
"""

import datetime as dt
import decimal
import os
import pathlib
import random
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import col
from qdbpm.prune.arrow import filter_table
from qdbpm.sync.generate import generate
from qdbpm.table.ranges import all_null_mask

from support.table_files import CountingFS, pyarrow_partition, upload


def build_local(root, days, writer):
    truth = {}
    for d in range(days):
        part = os.path.join(root, f"day{d:02d}")
        os.makedirs(part)
        path = os.path.join(part, "data.parquet")
        writer(path, d)
        generate(path)
        truth[f"day{d:02d}"] = pq.read_table(path)
    return truth


def same(a, b):
    """Equal schemas and values, NaN equal to NaN (Table.equals says NaN != NaN)."""
    if a.schema != b.schema or a.num_rows != b.num_rows:
        return False

    def norm(rows):
        return [{k: ("NaN" if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in rows]

    return norm(a.to_pylist()) == norm(b.to_pylist())


def expected(truth, columns, pred):
    parts = [filter_table(truth[p], pred).select(columns) if pred is not None else truth[p].select(columns)
             for p in sorted(truth)]
    return pa.concat_tables(parts)


PREDICATES = [
    None,
    col("ts") >= dt.datetime(2024, 3, 2, 12, tzinfo=dt.timezone.utc),
    (col("ts").between("2024-03-01T03:00:00", "2024-03-01T09:00:00")) & (col("qty") > 0),
    col("sym") == "S2",
    col("sym").isin(["S0", "S3"]) & ~(col("px") < 100),
    col("px").is_null() | (col("dec") > decimal.Decimal("0.5")),
    col("note").is_not_null() & (col("flag") == True),  # noqa: E712
    (col("qty") == 7) | (col("sym") == "nope"),
]


def check_requests(counting, table_root, fs, pred, columns):
    """One footer read in all (every partition has one _pm column schema here), else no footer
    bytes, no all-null chunk, and <= 5% over the surviving chunks' bytes."""
    footers = []
    with qdbpm.open_table(table_root, fs) as table:
        masks = table.prune_masks(pred) if pred is not None else None
        useful = 0
        for p in table.partitions:
            pm = table.meta(p)
            need = set(columns) | (pred.columns() if pred is not None else set())
            cols = [pm.column_index(n) for n in need]
            rgs = np.nonzero(masks[p])[0] if masks is not None else np.arange(pm.row_group_count)
            sub = pm.chunks[np.ix_(rgs, cols)]
            nulls = all_null_mask(sub, pm.columns["max_def_level"][cols][None, :])
            useful += int(sub["total_compressed"][~nulls].sum())
            path = fs._strip_protocol(table.parquet_path(p))
            reqs = [(s, e) for q, s, e, _ in counting.requests if fs._strip_protocol(q) == path]
            for s, e in reqs:
                assert s is not None and e is not None, "a whole-object read of data.parquet"
                if (s, e) == (pm.parquet_footer_offset, pm.parquet_size):
                    footers.append((path, s, e))  # the footer, for pyarrow's exact types
                    continue
                assert 4 <= s and e <= pm.parquet_footer_offset, f"request [{s}, {e}) touches the footer"
                for (r, c) in zip(*np.nonzero(nulls)):
                    cs = int(sub[r, c]["byte_range_start"])
                    ce = cs + int(sub[r, c]["total_compressed"])
                    assert e <= cs or s >= ce, "fetched an all-null chunk"
    assert len(footers) == 1, footers
    fetched = sum(n for q, s, e, n in counting.requests if q.endswith("data.parquet")
                  and (fs._strip_protocol(q), s, e) not in footers)
    assert fetched <= 1.05 * useful, (fetched, useful)
    return fetched, useful


@pytest.fixture(scope="module")
def pyarrow_table(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("pa_table"))
    truth = build_local(root, 3, pyarrow_partition)
    return root, truth


def test_read_table_local_equals_pyarrow(pyarrow_table):
    root, truth = pyarrow_table
    for pred in PREDICATES:
        got = qdbpm.read_table(root, where=pred)
        want = expected(truth, truth["day00"].column_names, pred)
        assert same(got, want), (pred, got.schema, want.schema)


def test_read_table_s3_random_columns_and_predicates(s3_server, s3_bucket, pyarrow_table):
    root, truth = pyarrow_table
    fs = s3_server.filesystem()
    remote = f"{s3_bucket}/trades"
    upload(fs, root, remote)
    rnd = random.Random(7)
    names = truth["day00"].column_names
    for pred in PREDICATES:
        cols = rnd.sample(names, rnd.randint(1, len(names)))
        counting = CountingFS(fs)
        got = qdbpm.read_table(f"s3://{remote}", columns=cols, where=pred, filesystem=counting)
        assert same(got, expected(truth, cols, pred)), pred
        check_requests(counting, f"s3://{remote}", fs, pred, cols)


def test_selective_query_fetches_little(s3_server, s3_bucket, pyarrow_table):
    root, truth = pyarrow_table
    fs = s3_server.filesystem()
    remote = f"{s3_bucket}/sel"
    upload(fs, root, remote)
    counting = CountingFS(fs)
    pred = col("ts").between("2024-03-02T06:00:00", "2024-03-02T08:59:59")
    got = qdbpm.read_table(f"s3://{remote}", columns=["ts", "px"], where=pred, filesystem=counting)
    assert got.num_rows == 100
    fetched, useful = check_requests(counting, f"s3://{remote}", fs, pred, ["ts", "px"])
    total = sum(os.path.getsize(os.path.join(root, p, "data.parquet")) for p in truth)
    assert fetched < total / 20


def duckdb_partition(path, day):
    import duckdb

    con = duckdb.connect()
    con.execute(f"""
        COPY (SELECT TIMESTAMPTZ '2024-03-01 00:00:00+00' + INTERVAL (i * 60 + {day} * 86400) SECOND AS ts,
                     'S' || ((i // 100 + {day}) % 4) AS sym,
                     CASE WHEN i % 17 = 0 THEN NULL ELSE i * 1.5 END AS px,
                     (i * 7919 % 2000 - 1000)::BIGINT AS qty,
                     (i * 31 % 1000)::DECIMAL(18, 3) / 7 AS dec
              FROM range(600) t(i))
        TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 100)""")
    con.close()


def test_duckdb_table_on_s3(s3_server, s3_bucket, tmp_path):
    import duckdb  # noqa: F401  (a test dependency: missing must fail, not skip)
    truth = build_local(str(tmp_path), 2, duckdb_partition)
    fs = s3_server.filesystem()
    remote = f"{s3_bucket}/duck"
    upload(fs, str(tmp_path), remote)
    for pred in [None, (col("sym") == "S1") & (col("qty") > 0), col("px").is_null(), col("dec") < 10,
                 col("ts") >= dt.datetime(2024, 3, 2, 5, tzinfo=dt.timezone.utc)]:
        counting = CountingFS(fs)
        got = qdbpm.read_table(f"s3://{remote}", where=pred, filesystem=counting)
        want = expected(truth, truth["day00"].column_names, pred)
        assert same(got, want), (pred, got.schema, want.schema)
        check_requests(counting, f"s3://{remote}", fs, pred, want.column_names)


def test_spark_table_on_s3(spark, s3_server, s3_bucket, tmp_path):
    from pyspark.sql import functions as F

    def spark_partition(path, day):
        out = str(tmp_path / f"spark_out_{day}")
        df = (spark.range(0, 500).withColumn("ts", F.timestamp_seconds(F.lit(1709251200 + day * 86400) + F.col("id") * 60))
              .withColumn("sym", F.concat(F.lit("S"), ((F.col("id") / 100).cast("int") + day) % 4))
              .withColumn("px", F.when(F.col("id") % 13 == 0, None).otherwise(F.col("id") * 0.5))
              .withColumn("dec", (F.col("id") % 97).cast("decimal(10,2)")))
        (df.coalesce(1).write.option("parquet.block.size", 4096).mode("overwrite").parquet(out))
        part = [f for f in os.listdir(out) if f.endswith(".parquet")][0]
        shutil.copy(os.path.join(out, part), path)

    local = tmp_path / "table"
    local.mkdir()
    truth = build_local(str(local), 2, spark_partition)
    assert pq.ParquetFile(os.path.join(local, "day00", "data.parquet")).metadata.num_row_groups > 1
    fs = s3_server.filesystem()
    remote = f"{s3_bucket}/spark"
    upload(fs, str(local), remote)
    for pred in [None, col("sym") == "S2", (col("id") > 250) & col("px").is_not_null(), col("dec") >= 50]:
        counting = CountingFS(fs)
        got = qdbpm.read_table(f"s3://{remote}", where=pred, filesystem=counting)
        want = expected(truth, truth["day00"].column_names, pred)
        assert same(got, want), (pred, got.schema, want.schema)
        check_requests(counting, f"s3://{remote}", fs, pred, want.column_names)


def test_truncated_object_is_refused(s3_server, s3_bucket, pyarrow_table):
    root, _ = pyarrow_table
    fs = s3_server.filesystem()
    remote = f"{s3_bucket}/trunc"
    upload(fs, root, remote)
    victim = f"{remote}/day01/data.parquet"
    data = fs.cat_file(victim)
    fs.pipe_file(victim, data[: len(data) // 3])  # the object no longer holds what _pm describes
    with pytest.raises(qdbpm.StorageError, match="shorter than its _pm snapshot") as info:
        qdbpm.read_table(f"s3://{remote}", filesystem=fs)
    assert "day01/data.parquet" in str(info.value) and isinstance(info.value, OSError)


@pytest.mark.parametrize("change", ["truncated", "footer replaced", "removed"])
def test_a_local_object_unlike_its_pm_is_refused_at_its_footer(pyarrow_table, tmp_path, change):
    """The footer is the first Parquet byte a local read asks for (pread, `ranges.read_range`):
    a file cut short, one whose footer is not the one `_pm` describes, or a missing one is a
    StorageError naming the file, never a wrong schema."""
    root = str(tmp_path / "t")
    shutil.copytree(pyarrow_table[0], root)
    victim = os.path.join(root, "day01", "data.parquet")
    data = pathlib.Path(victim).read_bytes()
    if change == "truncated":
        pathlib.Path(victim).write_bytes(data[: len(data) // 3])
    elif change == "footer replaced":  # same size, the length before PAR1 says another footer
        pathlib.Path(victim).write_bytes(data[:-8] + (int.from_bytes(data[-8:-4], "little") + 1).to_bytes(4, "little")
                                         + b"PAR1")
    else:
        os.remove(victim)
    t = qdbpm.open_table(root)
    try:
        scan = t.scan(None, ["qty"])
        scan._made = [p for p in scan._parts if p.name == "day01"]  # its footer is the one read
        with pytest.raises(qdbpm.StorageError) as info:
            scan.schema
    finally:
        t.close()
    assert "day01/data.parquet" in str(info.value) and isinstance(info.value, OSError)


def test_pm_pointing_past_the_object(s3_server, s3_bucket, tmp_path):
    # a _pm from a bigger file paired with a smaller object of the same schema
    big, small = tmp_path / "big", tmp_path / "small"
    for d, rows in ((big, 800), (small, 200)):
        (d / "day00").mkdir(parents=True)
        pyarrow_partition(str(d / "day00" / "data.parquet"), 0, rows=rows)
    generate(str(big / "day00" / "data.parquet"))
    shutil.copy(big / "day00" / "_pm", small / "day00" / "_pm")
    fs = s3_server.filesystem()
    remote = f"{s3_bucket}/past"
    upload(fs, str(small), remote)
    with pytest.raises(qdbpm.StorageError):
        qdbpm.read_table(f"s3://{remote}", where=col("ts") > dt.datetime(2024, 3, 1, 18, tzinfo=dt.timezone.utc),
                         filesystem=fs)


def test_chunk_bytes_that_do_not_decode(s3_server, s3_bucket, pyarrow_table):
    root, _ = pyarrow_table
    fs = s3_server.filesystem()
    remote = f"{s3_bucket}/garbage"
    upload(fs, root, remote)
    victim = f"{remote}/day00/data.parquet"
    data = bytearray(fs.cat_file(victim))
    with qdbpm.open(os.path.join(root, "day00", "_pm")) as pm:
        s = int(pm.chunks[0, 3]["byte_range_start"])
        n = int(pm.chunks[0, 3]["total_compressed"])
    data[s : s + n] = np.random.default_rng(7).integers(0, 256, n, dtype=np.uint8).tobytes()  # garbage, page header included
    fs.pipe_file(victim, bytes(data))
    with pytest.raises(qdbpm.PmError, match="do not decode"):
        qdbpm.read_table(f"s3://{remote}", columns=["qty"], filesystem=fs)


def test_nested_column_is_refused_clearly(tmp_path):
    part = tmp_path / "p"
    part.mkdir()
    pq.write_table(pa.table({"a": [1, 2], "l": [[1], [2, 3]]}), str(part / "data.parquet"))
    generate(str(part / "data.parquet"))
    assert qdbpm.read_table(str(tmp_path), columns=["a"]).column("a").to_pylist() == [1, 2]
    with pytest.raises(qdbpm.PmError, match="nested"):
        qdbpm.read_table(str(tmp_path), columns=["l.list.element"])
