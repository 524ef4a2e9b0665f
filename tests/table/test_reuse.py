"""Open tables kept across queries (qdbpm.table.reuse.OpenTables): reused only while the listing
is unchanged; an appended, rewritten (even to the same size), added or removed `_pm` reopens, so
a query never sees an older snapshot than a fresh open pins. Locally and on SeaweedFS."""

import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.errors import PmError
from qdbpm.storage.objects import reader_for
from qdbpm.sync.generate import generate
from qdbpm.table.listing import find_partitions, list_partitions
from qdbpm.table.reuse import OpenTables
from qdbpm.table.table import Table


def write_partition(root, name, values, rg=2):
    part = os.path.join(root, name)
    os.makedirs(part, exist_ok=True)
    path = os.path.join(part, "data.parquet")
    pq.write_table(pa.table({"x": pa.array(values, pa.int64())}), path, row_group_size=rg)
    generate(path)
    return path


@pytest.fixture
def root(tmp_path):
    r = str(tmp_path / "t")
    write_partition(r, "d=1", [1, 2, 3, 4])
    write_partition(r, "d=2", [5, 6, 7, 8])
    return r


def opener(root, fs=None, calls=None):
    def open_(names):
        if calls is not None:
            calls.append(list(names))
        return Table(root, fs, partitions=names)
    return open_


def count(t, where=None):
    return t.scan(where).count()


def test_reused_while_unchanged_reopened_on_every_kind_of_change(root):
    cache, calls = OpenTables(), []
    t1 = cache.get("k", root, None, opener(root, calls=calls))
    assert count(t1, "x > 2") == 6
    pm1 = t1.meta("d=1")
    assert cache.get("k", root, None, opener(root, calls=calls)) is t1 and len(calls) == 1
    assert hasattr(pm1, "chunks")
    # a new snapshot appended to a _pm (it grows): reopened, the new rows seen
    with qdbpm.open(os.path.join(root, "d=1", "_pm")) as pm:
        before = pm.pm_size
    pq.write_table(pa.table({"x": pa.array([1, 2, 3, 4, 9], pa.int64())}), os.path.join(root, "d=1", "data.parquet"),
                   row_group_size=2)
    qdbpm.update(os.path.join(root, "d=1", "data.parquet"))
    with qdbpm.open(os.path.join(root, "d=1", "_pm")) as pm:
        assert pm.pm_size > before
    t2 = cache.get("k", root, None, opener(root, calls=calls))
    assert t2 is not t1 and len(calls) == 2 and count(t2, "x > 2") == 7
    # a _pm rewritten to the very same size (a new file renamed in): reopened
    pm_path = os.path.join(root, "d=2", "_pm")
    shutil.copyfile(pm_path, pm_path + ".new")
    os.replace(pm_path + ".new", pm_path)
    t3 = cache.get("k", root, None, opener(root, calls=calls))
    assert t3 is not t2 and len(calls) == 3
    # a partition added, then one removed
    write_partition(root, "d=3", [10, 11])
    t4 = cache.get("k", root, None, opener(root, calls=calls))
    assert calls[-1] == ["d=1", "d=2", "d=3"] and count(t4, "x > 2") == 9
    shutil.rmtree(os.path.join(root, "d=1"))
    t5 = cache.get("k", root, None, opener(root, calls=calls))
    assert calls[-1] == ["d=2", "d=3"] and count(t5, "x > 2") == 6
    assert cache.opened == 5
    assert not hasattr(pm1, "chunks")  # a replaced table was closed: its mappings are gone


def test_capacity_closes_the_least_recently_used(root, tmp_path):
    other = str(tmp_path / "u")
    write_partition(other, "d=9", [1])
    cache = OpenTables(capacity=1)
    a = cache.get("a", root, None, opener(root))
    pa_ = a.meta("d=1")
    b = cache.get("b", other, None, opener(other))
    assert count(b) == 1 and not hasattr(pa_, "chunks")  # a was closed to make room
    pb = b.meta("d=9")
    assert cache.get("a", root, None, opener(root)) is not a
    assert not hasattr(pb, "chunks")
    c = cache.get("a", root, None, opener(root))
    pc = c.meta("d=2")
    cache.clear()
    assert not hasattr(pc, "chunks")


def test_listing_rule_and_identities(root):
    os.makedirs(os.path.join(root, "_staging", "d=7"))
    shutil.copyfile(os.path.join(root, "d=1", "_pm"), os.path.join(root, "_staging", "d=7", "_pm"))
    got = list_partitions(root)
    assert sorted(got) == find_partitions(root) == ["d=1", "d=2"]
    st = os.stat(os.path.join(root, "d=1", "_pm"))
    assert got["d=1"] == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert list_partitions(root, identities=False) == {"d=1": None, "d=2": None}
    with pytest.raises(PmError, match="not a directory"):
        list_partitions(os.path.join(root, "nope"))


def test_remote_reuse_follows_the_etag(s3_server, s3_bucket, root):
    fs = s3_server.filesystem(use_listings_cache=False)
    fs.put(root, f"{s3_bucket}/t", recursive=True)
    url = f"{s3_bucket}/t"
    lister = reader_for(fs)
    assert type(lister).__name__ == "S3Direct"
    listed = list_partitions(url, fs, io=lister)
    assert listed == list_partitions(url, fs)  # S3Direct's listing gives what s3fs's does
    cache, calls = OpenTables(), []
    t1 = cache.get("k", url, fs, opener(url, fs, calls), io=lister)
    assert count(t1, "x > 2") == 6
    assert cache.get("k", url, fs, opener(url, fs, calls), io=lister) is t1
    # the same size, other bytes (the other partition's _pm is the same length): a new ETag
    a, b = fs.cat_file(f"{url}/d=1/_pm"), fs.cat_file(f"{url}/d=2/_pm")
    assert len(a) == len(b) and a != b
    fs.pipe_file(f"{url}/d=1/_pm", b)
    fs.pipe_file(f"{url}/d=1/data.parquet", fs.cat_file(f"{url}/d=2/data.parquet"))
    t2 = cache.get("k", url, fs, opener(url, fs, calls), io=lister)
    assert t2 is not t1 and len(calls) == 2
    assert sorted(t2.scan("x > 2").to_table().column("x").to_pylist()) == [5, 5, 6, 6, 7, 7, 8, 8]
    cache.clear()
    lister.close()
