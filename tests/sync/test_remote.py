"""generate / update on a real S3 server (SeaweedFS): the `_pm` object is byte-identical to local
generation of the same file, written with one PUT, read by exact range requests (counted on the
wire by the loopback proxy), and update appends a snapshot that keeps the older one readable."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.errors import ParquetFormatError
from qdbpm.sync.generate import generate, update


def write(path, n, seed):
    t = pa.table({"i": pa.array(range(seed, seed + n), pa.int64()),
                  "s": pa.array([f"v{k % 17}" for k in range(n)]),
                  "x": pa.array([k / 7 for k in range(n)])})
    pq.write_table(t, path, row_group_size=n // 10 if n >= 10_000 else 100, bloom_filter_options={"s": {"ndv": 17, "fpp": 0.01}})


@pytest.mark.parametrize("bloom", ["inline", "external", None])
def test_remote_generate_is_byte_identical(s3_server, s3_proxy, s3_bucket, tmp_path, bloom):
    local = tmp_path / "data.parquet"
    write(local, 100_000, 0)  # ~1.5 MB: far more than the 64 KiB tail read
    opts = s3_proxy.storage_options(s3_server)
    fs = s3_server.filesystem()
    fs.put_file(str(local), f"{s3_bucket}/t/day=1/data.parquet")
    s3_proxy.reset()
    size = generate(f"s3://{s3_bucket}/t/day=1/data.parquet", storage_options=opts, bloom=bloom)
    counts = s3_proxy.counts()
    assert counts.get("PUT") == 1 and counts.get("LIST", 0) == 0  # one PUT, no listing
    assert counts.get("GET", 0) <= 4  # magic, tail (+ footer), bloom bitsets: exact ranges
    assert s3_proxy.bytes_out < os.path.getsize(local) / 4  # the footer and bitsets, never the data
    local_size = generate(str(local), bloom=bloom)
    assert size == local_size
    assert fs.cat_file(f"{s3_bucket}/t/day=1/_pm") == (tmp_path / "_pm").read_bytes()


def test_remote_update_appends_a_snapshot(s3_server, s3_bucket, tmp_path):
    local = tmp_path / "data.parquet"
    write(local, 300, 0)
    opts = s3_server.storage_options()
    fs = s3_server.filesystem()
    url = f"s3://{s3_bucket}/u/data.parquet"
    fs.put_file(str(local), url)
    generate(url, storage_options=opts)
    old_size = os.path.getsize(local)
    # the file grows by a rewrite with more row groups (an object store replaces the object)
    both = pa.concat_tables([pq.read_table(local), pq.read_table(local).slice(0, 150)])
    pq.write_table(both, local, row_group_size=100)
    fs.put_file(str(local), url)
    new = update(url, storage_options=opts)
    assert new > len(fs.cat_file(f"{s3_bucket}/u/_pm")) // 2
    with qdbpm.open_table(f"s3://{s3_bucket}/u", storage_options=opts) as t:
        pm = t.meta("")
        assert pm.parquet_size == os.path.getsize(local) and pm.row_group_count == 5
        assert t.scan("i < 100").count() == 100 + 100  # the appended rows repeat i 0..149
    remote = fs.cat_file(f"{s3_bucket}/u/_pm")
    older = qdbpm.open(str(_store(tmp_path / "old_pm", remote)), parquet_size=old_size)
    assert older.row_group_count == 3  # the first snapshot is still reachable through the chain


def _store(path, data):
    path.write_bytes(data)
    return path


def test_remote_errors_name_the_object(s3_server, s3_bucket, tmp_path):
    opts = s3_server.storage_options()
    fs = s3_server.filesystem()
    fs.pipe_file(f"{s3_bucket}/bad/data.parquet", b"PAR1 not a parquet file at all PAR1")
    with pytest.raises(ParquetFormatError, match=f"{s3_bucket}/bad/data.parquet"):
        generate(f"s3://{s3_bucket}/bad/data.parquet", storage_options=opts)
    assert not fs.exists(f"{s3_bucket}/bad/_pm")  # nothing stored
    with pytest.raises(FileNotFoundError):
        generate(f"s3://{s3_bucket}/missing/data.parquet", storage_options=opts)
