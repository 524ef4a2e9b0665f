"""Distributed generate and prune on S3 (real SeaweedFS, a local Spark session): the `_pm` objects
are byte-identical to local generation of the same files, prune equals Table.prune, and on the
wire (the loopback proxy) the driver lists once, executors never list, every `_pm` is fetched
once and each generated file costs one PUT. A bad or unreachable object is a row with `error`."""

import collections
import datetime as dt
import shutil
import urllib.parse

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import col
from qdbpm.sync.generate import generate

import pyspark  # noqa: F401  (a test dependency: missing must fail, not skip)
import qdbpm.spark as qs
from support.s3_proxy import Fault

# Hive key `k`: 0..11 and "x". The whole table types it as a string; a share holding digits
# only would infer int32 (and then order "10" after "3"): prune must type every share alike.
KEYS = [str(k) for k in range(12)] + ["x"]
BAD = "k=bad"  # an object that is not Parquet
FAILING = "k=5"  # every GET of its data answers 500 (generate through the proxy only)


def write_partition(path, seed, rows=120, rg=20):
    rng = np.random.default_rng(seed)
    t = pa.table({"ts": pa.array(np.datetime64("2024-01-01", "us") + np.timedelta64(seed, "D")
                                 + (np.arange(rows) * 600_000_000).astype("timedelta64[us]"),
                                 pa.timestamp("us", tz="UTC")),
                  "v": pa.array(rng.integers(0, 100, rows), pa.int64()),
                  "s": pa.array([f"k{(i // rg + seed) % 7}" for i in range(rows)])})
    pq.write_table(t, path, row_group_size=rg, bloom_filter_options={"s": {"ndv": 7, "fpp": 0.01}})


@pytest.fixture
def table(tmp_path, s3_server, s3_bucket):
    """(s3 root URL, local copy root): the same files on S3 and on disk, `_pm` nowhere yet."""
    local = tmp_path / "local"
    for i, k in enumerate(KEYS):
        (local / f"k={k}").mkdir(parents=True)
        write_partition(str(local / f"k={k}" / "data.parquet"), i)
    fs = s3_server.filesystem()
    for k in KEYS:
        fs.put_file(str(local / f"k={k}" / "data.parquet"), f"{s3_bucket}/t/k={k}/data.parquet")
    fs.pipe_file(f"{s3_bucket}/t/{BAD}/data.parquet", b"PAR1 this is not parquet PAR1")
    return f"s3://{s3_bucket}/t", local


def by_kind(proxy, kind, suffix):
    return collections.Counter(urllib.parse.unquote(p.split("?")[0]) for k, p, _, _ in proxy.requests
                               if k == kind and urllib.parse.unquote(p.split("?")[0]).endswith(suffix))


def test_generate_root_on_s3_is_byte_identical_and_lists_once(spark, s3_server, s3_proxy, table, tmp_path):
    root, local = table
    opts = s3_proxy.storage_options(s3_server)
    s3_proxy.fault = fail_one
    s3_proxy.reset()
    rows = {r.parquet_path: r for r in qs.generate(spark, root, storage_options=opts, files_per_task=3).collect()}
    s3_proxy.fault = None
    counts = s3_proxy.counts()
    good = [k for k in KEYS if f"k={k}" != FAILING]
    assert sorted(rows) == sorted(f"{root}/{p}/data.parquet" for p in [f"k={k}" for k in KEYS] + [BAD])
    # the driver's one listing (sizes included), no HEAD, one PUT per generated file, no `_pm` read back
    assert counts.get("LIST") == 1 and counts.get("HEAD", 0) == 0, counts
    assert counts.get("PUT") == len(good), counts
    assert not by_kind(s3_proxy, "GET", "/_pm")

    bad = rows[f"{root}/{BAD}/data.parquet"]
    assert bad.error and "Parquet" in bad.error and bad.pm_size is None and bad.row_groups is None
    failing = rows[f"{root}/{FAILING}/data.parquet"]
    assert failing.error and "HTTP 500" in failing.error and f"{FAILING}/data.parquet" in failing.error

    fs = s3_server.filesystem()
    for k in good:
        r = rows[f"{root}/k={k}/data.parquet"]
        assert r.error is None and r.row_groups == 6, r
        assert r.pm_path == f"{root}/k={k}/_pm"
        generate(str(local / f"k={k}" / "data.parquet"))
        want = (local / f"k={k}" / "_pm").read_bytes()
        assert fs.cat_file(r.pm_path) == want and r.pm_size == len(want)
    assert not fs.exists(f"{root}/{FAILING}/_pm") and not fs.exists(f"{root}/{BAD}/_pm")

    # the local root, as today: the same bytes
    copy = tmp_path / "copy"
    shutil.copytree(local, copy, ignore=shutil.ignore_patterns("_pm"))
    rows = qs.generate(spark, str(copy)).collect()
    assert len(rows) == len(KEYS) and all(r.error is None and r.row_groups == 6 for r in rows)
    for k in good:
        assert (copy / f"k={k}" / "_pm").read_bytes() == (local / f"k={k}" / "_pm").read_bytes()


def fail_one(method, path, headers):
    if method == "GET" and urllib.parse.unquote(path).split("?")[0].endswith(f"/{FAILING}/data.parquet"):
        return Fault(status=500)
    return None


def test_generate_url_list_reports_missing_objects(spark, s3_server, s3_proxy, table):
    root, _ = table
    opts = s3_proxy.storage_options(s3_server)
    urls = [f"{root}/k={k}/data.parquet" for k in KEYS[:4]] + [f"{root}/k=missing/data.parquet"]
    s3_proxy.reset()
    rows = {r.parquet_path: r for r in qs.generate(spark, urls, storage_options=opts).collect()}
    counts = s3_proxy.counts()
    # each file's size asked for once, no listing but s3fs's look for a directory at the missing key
    assert counts.get("PUT") == 4 and counts.get("HEAD") == 5, counts
    lists = [urllib.parse.unquote(p) for k, p, _, _ in s3_proxy.requests if k == "LIST"]
    assert all("k=missing/data.parquet" in p for p in lists), lists
    missing = rows[urls[-1]]
    assert missing.error and "missing" in missing.error and missing.pm_size is None
    fs = s3_server.filesystem()
    for u in urls[:4]:
        assert rows[u].error is None and rows[u].pm_size == len(fs.cat_file(rows[u].pm_path))


PREDICATES = [
    (col("k") >= "3") & (col("s") == "k3"),  # strings: "10" < "3" <= "x"
    (col("k") == "x") | ((col("v") > 90) & (col("ts") >= dt.datetime(2024, 1, 5))),
    "s IN ('k1', 'k2') AND k <> '7'",
]


@pytest.mark.parametrize("pred", PREDICATES, ids=range(len(PREDICATES)))
def test_prune_on_s3_equals_table_prune_and_fetches_each_pm_once(spark, s3_server, s3_proxy, table, pred):
    root, _ = table
    opts = s3_server.storage_options()
    assert all(r.error is None for r in qs.generate(spark, [f"{root}/k={k}/data.parquet" for k in KEYS],
                                                    storage_options=opts).collect())
    with qdbpm.open_table(root, storage_options=opts) as t:
        want = [(w["partition"], w["row_group"], w["num_rows"]) for w in t.prune(pred).to_pylist()]
        assert t.partition_keys.schema.field("k").type == pa.string()
    proxied = s3_proxy.storage_options(s3_server)
    s3_proxy.reset()
    # sorted here: Spark's orderBy would run the job twice (once to sample its range boundaries)
    got = qs.prune(spark, root, pred, storage_options=proxied, partitions_per_task=4).collect()
    assert sorted((r.partition, r.row_group, r.num_rows) for r in got) == want
    assert 0 < len(want) < len(KEYS) * 6
    counts = s3_proxy.counts()
    assert counts.get("LIST") == 1 and set(counts) <= {"LIST", "GET"}, counts  # the driver's listing only
    pm_gets = by_kind(s3_proxy, "GET", "/_pm")
    # each task opens only its share: every `_pm` the key plan keeps, once
    assert pm_gets and set(pm_gets.values()) == {1}, pm_gets
    assert counts["GET"] == sum(pm_gets.values())
