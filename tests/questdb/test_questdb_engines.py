"""Everything that takes a table takes a QuestDB table directory too: the CLI, the Spark data
source, and an object store (SeaweedFS on loopback), on QuestDB's own legacy_bool table."""

import json
import os
import shutil
import zipfile

import pyarrow.parquet as pq
import pytest
import s3fs

from qdbpm.cli.main import main
from qdbpm.questdb.table_dir import read_table_dir
from qdbpm.table.read import read_table
from qdbpm.table.table import open_table

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "questdb")


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("qdb"))
    with zipfile.ZipFile(os.path.join(DATA, "legacy_bool~11.zip")) as f:
        f.extractall(root)
    t = os.path.join(root, "legacy_bool~11")
    # a stale version beside the committed one: never read by anyone
    shutil.copytree(os.path.join(t, "2024-01-01.4"), os.path.join(t, "2024-01-01.3"))
    return t


def rows_of(root):
    return sum(pq.read_metadata(os.path.join(root, p.name, "data.parquet")).num_rows
               for p in read_table_dir(root).partitions)


def test_cli_scan_counts_the_committed_rows(table_dir, capsys):
    assert main(["scan", table_dir, "--count", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == rows_of(table_dir) == 300


def test_spark_source_reads_the_committed_partitions(table_dir, spark):
    import qdbpm.spark as qs

    qs.register(spark)
    df = spark.read.format("qdbpm").load(table_dir)
    assert df.count() == 300
    want = read_table(table_dir, None, "b = true").num_rows
    assert df.where("b = true").count() == want


def test_on_an_object_store(table_dir, s3_server, s3_bucket):
    opts = s3_server.storage_options()
    fs = s3fs.S3FileSystem(**opts)
    for d, _, files in os.walk(table_dir):
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), table_dir)
            fs.put_file(os.path.join(d, f), f"{s3_bucket}/qdb/{rel}")
    url = f"s3://{s3_bucket}/qdb"
    with open_table(url, storage_options=opts) as t:
        assert t.questdb is not None
        assert t.partitions == [p.name for p in read_table_dir(table_dir).partitions]
        assert read_table(t).equals(read_table(table_dir))
        assert read_table(t, None, "b = true").equals(read_table(table_dir, None, "b = true"))
