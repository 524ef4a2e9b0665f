"""Scans of a Spark-written table against DuckDB over the same files: the scan table's rows
(support.scan_cases), re-written by Spark's own Parquet writer (small row groups, timestamps as
TIMESTAMP_NTZ micros), one `data.parquet` per partition, `_pm` by qdbpm.generate."""

import glob
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.prune.arrow import to_arrow
from qdbpm.sync.generate import generate
from support.scan_cases import COLUMNS, DAYS, cases, rows_of, write_partition
from support.table_files import duckdb_rows as duck


@pytest.fixture(scope="module")
def spark_table(spark, tmp_path_factory):
    from pyspark.sql import types as T

    root = str(tmp_path_factory.mktemp("spark-scan"))
    schema = T.StructType([
        T.StructField("rid", T.LongType()), T.StructField("ts", T.TimestampNTZType()),
        T.StructField("grp", T.IntegerType()), T.StructField("px", T.DoubleType()),
        T.StructField("sym", T.StringType()), T.StructField("qty", T.LongType()),
        T.StructField("flag", T.BooleanType()), T.StructField("note", T.StringType()),
    ])
    files = []
    for d in range(DAYS):
        src = os.path.join(root, f"src{d}.parquet")
        write_partition(src, d)
        rows = [tuple(r.values()) for r in pq.read_table(src).select(COLUMNS).to_pylist()]
        os.remove(src)
        out = os.path.join(root, f"_spark{d}")
        # one file per partition, sorted by rid, row groups of a few KB (several per file)
        (spark.createDataFrame(rows, schema).coalesce(1).sortWithinPartitions("rid").write
         .option("parquet.block.size", 4096).option("compression", "snappy").parquet(out))
        part = os.path.join(root, f"day={d:02d}")
        os.makedirs(part)
        (written,) = glob.glob(os.path.join(out, "part-*.parquet"))
        shutil.move(written, os.path.join(part, "data.parquet"))
        shutil.rmtree(out)
        files.append(os.path.join(part, "data.parquet"))
        generate(files[-1])
    return root, files


def test_spark_written_table_scans_equal_duckdb(spark_table):
    root, files = spark_table
    meta = pq.read_metadata(files[0])
    assert "spark" in (meta.created_by or "").lower() or b"org.apache.spark.version" in (meta.metadata or {})
    assert min(pq.read_metadata(f).num_row_groups for f in files) > 1
    pruned = 0
    with qdbpm.open_table(root) as table:
        total = sum(table.meta(p).row_group_count for p in table.partitions)
        for where, cols, batch_rows in cases():
            want = duck(files, f"SELECT {', '.join(cols)} FROM FILES WHERE {where} ORDER BY rid")
            scan = table.scan(where, cols, batch_rows=batch_rows)
            got = scan.to_table()
            assert got.column_names == cols and rows_of(got) == want, where
            streamed = pa.Table.from_batches(list(scan.to_reader()), scan.schema)
            assert rows_of(streamed) == want, where
            assert scan.count() == len(want), where
            ds = scan.to_dataset()
            viads = ds.to_table(columns=cols, filter=to_arrow(scan.predicate, ds.schema))
            assert sorted(rows_of(viads), key=repr) == sorted(want, key=repr), where
            pruned += total - scan.row_groups().num_rows
    assert pruned > 0  # Spark's statistics prune here too
