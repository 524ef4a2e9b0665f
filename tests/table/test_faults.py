"""Faults on the store, against the real SeaweedFS server through the loopback fault proxy: a scan
either returns exactly the rows of a fault-free scan or raises StorageError, never wrong or
partial rows. Injected faults (503 SlowDown, 500, dropped connections, truncated bodies) are
chosen per request by a seeded generator keyed by the request itself, so a run does not depend
on thread timing; transient faults under the retry limit must not fail a scan at all."""

import os
import random
import threading
import time

import pyarrow as pa
import pytest

import qdbpm
from qdbpm.errors import StorageError
from qdbpm.table.pipeline import THREAD_NAME
from qdbpm.storage.s3 import ATTEMPTS, S3Direct
from support.s3_proxy import Fault
from support.table_files import upload

PREDICATES = [None, "sym = 'NVDA'", "price > 100 AND sym IN ('AAPL', 'MSFT')",
              "ts >= '2024-01-02T06:00:00Z' AND price < 90"]
DAYS = 4


@pytest.fixture(scope="module")
def local_table(tmp_path_factory):
    from qdbpm.cli.demo import build_trades
    from qdbpm.sync.generate import generate

    root = str(tmp_path_factory.mktemp("faults"))
    for p in build_trades(root, days=DAYS, rows_per_day=3000, row_group=500):
        generate(p)
    return root


@pytest.fixture
def remote(s3_server, s3_bucket, local_table):
    """(s3fs filesystem, table URL) of the table uploaded to a fresh bucket."""
    fs = s3_server.filesystem()
    upload(fs, local_table, f"{s3_bucket}/t")
    return fs, f"s3://{s3_bucket}/t"


def _parquet_keys(fs, url):
    root = url.removeprefix("s3://")
    return sorted(f for f in fs.find(root) if f.endswith("/data.parquet"))


class SeededFaults:
    """`proxy.fault`: each request (method, path, Range) is faulty or not by a generator seeded
    with (seed, request); a faulty one fails its first `n` attempts (n < ATTEMPTS unless
    `permanent`), each attempt with a fault the generator picks."""

    def __init__(self, seed, rate=0.35, permanent=False):
        self.seed, self.rate, self.permanent = seed, rate, permanent
        self.lock = threading.Lock()
        self.attempts = {}
        self.exhausted = set()  # requests whose every attempt got a fault
        self.injected = 0

    def __call__(self, method, path, headers):
        key = (method, path, headers.get("Range", ""))
        rng = random.Random(f"{self.seed}|{key}")
        if rng.random() >= self.rate:
            return None
        n = rng.randint(1, ATTEMPTS if self.permanent else ATTEMPTS - 1)
        kinds = [rng.choice(["slowdown", "500", "drop", "truncate"]) for _ in range(n)]
        with self.lock:
            k = self.attempts.get(key, 0)
            self.attempts[key] = k + 1
            if k >= n:
                return None
            self.injected += 1
            if n == ATTEMPTS:
                self.exhausted.add(key)
        return {"slowdown": Fault(status=503, code="SlowDown"), "500": Fault(status=500),
                "drop": Fault(drop=True), "truncate": Fault(truncate=rng.randrange(0, 16))}  # every body is longer[kinds[k]]


def _expected(url, opts):
    with qdbpm.open_table(url, storage_options=opts) as t:
        return {where: (t.scan(where).to_table(), t.scan(where).count()) for where in PREDICATES}


def _no_fetch_thread_left():
    deadline = time.monotonic() + 60  # a liveness bound (requests still running finish), not a timing check
    while any(t.name == THREAD_NAME for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(t.name == THREAD_NAME for t in threading.enumerate())


def test_seaweedfs_honours_if_match(s3_server, s3_bucket):
    """What the ETag pin relies on: a GET (whole or ranged) with a stale If-Match answers 412."""
    fs = s3_server.filesystem()
    fs.pipe_file(f"{s3_bucket}/o", b"a" * 1000)
    etag = fs.info(f"{s3_bucket}/o")["ETag"]
    for rng in ({}, {"Range": "bytes=10-99"}):
        status, _ = s3_server.request("GET", f"/{s3_bucket}/o", headers={"If-Match": etag, **rng})
        assert status == (206 if rng else 200)
        status, _ = s3_server.request("GET", f"/{s3_bucket}/o", headers={"If-Match": '"0123456789abcdef"', **rng})
        assert status == 412


def test_a_replaced_object_is_refused(s3_server, s3_bucket):
    direct = S3Direct.from_fsspec(s3_server.filesystem())
    fresh = S3Direct.from_fsspec(s3_server.filesystem())
    fs = s3_server.filesystem()
    path = f"{s3_bucket}/o/x"
    fs.pipe_file(path, b"a" * 1000)
    fs.pipe_file(f"{s3_bucket}/o/y", b"b" * 1000)
    assert direct.cat_file(path, start=0, end=10) == b"a" * 10  # first read: its ETag kept
    fs.pipe_file(path, b"c" * 1000)  # same size, other bytes
    with pytest.raises(StorageError, match=rf"s3://{path} bytes \[10, 20\): the object changed.*412"):
        direct.cat_file(path, start=10, end=20)
    with pytest.raises(StorageError, match="changed"):
        direct.cat_file(path)
    assert direct.find(f"{s3_bucket}/o") == [path, f"{s3_bucket}/o/y"]  # a listing pins what it lists
    fs.pipe_file(f"{s3_bucket}/o/y", b"d" * 1000)
    with pytest.raises(StorageError, match="changed"):
        direct.cat_file(f"{s3_bucket}/o/y", start=0, end=5)
    with pytest.raises(StorageError, match=r"is 1000 bytes, longer than its _pm snapshot says \(999\)"):
        fresh.cat_file(path, start=0, end=5, size=999)
    direct.close()  # forgets the ETags: the new versions read
    assert direct.cat_file(path, start=0, end=3) == b"ccc"
    assert direct.cat_file(f"{s3_bucket}/o/y") == b"d" * 1000


@pytest.mark.parametrize("seed", range(3))
def test_transient_faults_give_the_exact_rows(s3_server, s3_proxy, remote, seed):
    _, url = remote
    opts = s3_proxy.storage_options(s3_server)
    want = _expected(url, opts)
    faults = s3_proxy.fault = SeededFaults(seed)
    with qdbpm.open_table(url, storage_options=opts) as t:  # listing and `_pm` fetches faulted too
        assert isinstance(t.io, S3Direct)
        for where in PREDICATES:
            got = t.scan(where).to_table()
            assert got.equals(want[where][0]), where
            assert t.scan(where).count() == want[where][1], where
    s3_proxy.fault = None
    assert faults.injected > 0 and not faults.exhausted
    assert _no_fetch_thread_left()


@pytest.mark.parametrize("seed", range(4))
def test_persistent_faults_give_the_exact_rows_or_a_storage_error(s3_server, s3_proxy, remote, seed):
    _, url = remote
    opts = s3_proxy.storage_options(s3_server)
    want = _expected(url, opts)
    faults = s3_proxy.fault = SeededFaults(100 + seed, rate=0.15, permanent=True)
    outcomes = []
    for where in PREDICATES:
        for how in ("table", "count", "reader"):
            try:
                with qdbpm.open_table(url, storage_options=opts) as t:
                    s = t.scan(where)
                    if how == "count":
                        assert s.count() == want[where][1], where
                    else:
                        got = s.to_table() if how == "table" else \
                            pa.Table.from_batches(list(s.to_reader()), s.schema)
                        assert got.equals(want[where][0]), (where, how)
                outcomes.append("rows")
            except StorageError as e:
                assert "s3://" in str(e) and f"after {ATTEMPTS} attempts" in str(e)
                outcomes.append("error")
    s3_proxy.fault = None
    # a request that failed every attempt fails its scan; with none, every fault was retried away
    assert ("error" in outcomes) == bool(faults.exhausted), outcomes
    assert _no_fetch_thread_left()


def _replacements(blob):
    flipped = bytearray(blob)
    flipped[len(blob) // 3] ^= 0xFF
    return {"same size": bytes(flipped), "longer": blob + b"\0" * 64, "shorter": blob[: len(blob) // 2]}


@pytest.mark.parametrize("change", ["same size", "longer", "shorter"])
@pytest.mark.parametrize("listed", [True, False])
def test_parquet_replaced_between_open_and_read(s3_server, remote, change, listed):
    """S3Direct: the listing pins every object (listed), else the snapshot's size and the first
    read's ETag do: a table opened with explicit partitions (a Spark task's share, no listing)
    that has read the object once refuses a same-size change after it too."""
    fs, url = remote
    key = _parquet_keys(fs, url)[1]
    blob = fs.cat_file(key)
    where = "price > 100"
    with qdbpm.open_table(url, storage_options=s3_server.storage_options()) as t:
        if not listed:
            t = qdbpm.Table(t.root, t.filesystem, partitions=t.partitions)
        s = t.scan(where)
        if not listed:
            first = s.to_table()  # every object's first responses: their ETags kept
            assert first.num_rows and first.equals(t.scan(where).to_table())
        assert isinstance(t.io, S3Direct)
        fs.pipe_file(key, _replacements(blob)[change])
        try:
            for run in (lambda: s.to_table(), lambda: s.count(), lambda: list(t.scan(where).to_reader())):
                with pytest.raises(StorageError, match=rf"s3://{key}.*(changed|snapshot says)"):
                    run()
        finally:
            fs.pipe_file(key, blob)
        t.close()
    assert _no_fetch_thread_left()


def test_fsspec_path_catches_a_shorter_object(s3_server, remote):
    """Without S3Direct (s3fs reads), a replaced object is caught by what the bytes show: here a
    shorter one, whose later ranges end past its end (see ranges.py for what goes unnoticed)."""
    fs, url = remote
    key = _parquet_keys(fs, url)[0]
    blob = fs.cat_file(key)
    opts = dict(s3_server.storage_options(), config_kwargs={"connect_timeout": 30})  # not S3Direct's
    with qdbpm.open_table(url, storage_options=opts) as t:
        assert not isinstance(t.io, S3Direct)
        s = t.scan()
        fs.pipe_file(key, blob[: len(blob) // 2])
        try:
            with pytest.raises(StorageError, match=rf"{key}.*(shorter|replaced)"):
                s.to_table()
        finally:
            fs.pipe_file(key, blob)


class DieAt:
    """`proxy.fault`: at the n-th object GET the proxy stops listening and drops that request; every
    request after it (on connections still open) is dropped, new connections are refused."""

    def __init__(self, proxy, n):
        self.proxy, self.n, self.seen, self.dead = proxy, n, 0, False
        self.lock = threading.Lock()

    def __call__(self, method, path, headers):
        with self.lock:
            if not self.dead and self.proxy.kind(method, path) == "GET":
                self.seen += 1
                if self.seen >= self.n:
                    self.dead = True
                    self.proxy.server.shutdown()  # the accept loop runs in another thread
                    self.proxy.server.server_close()
            return Fault(drop=True) if self.dead else None


@pytest.mark.parametrize("how", ["table", "count", "reader"])
def test_a_server_dying_mid_scan_is_a_storage_error(s3_server, s3_proxy, remote, how):
    _, url = remote
    t = qdbpm.open_table(url, storage_options=s3_proxy.storage_options(s3_server))
    where = "price > 100"
    s = t.scan(where, memory_budget=64 * 1024)  # many small units: the death lands mid-stream
    s.schema  # footer fetched
    requests = {(p, o) for p, o in zip(s.byte_ranges().column("path").to_pylist(),
                                       s.byte_ranges().column("offset").to_pylist())}
    assert len(requests) > 4
    die = s3_proxy.fault = DieAt(s3_proxy, 3)
    with pytest.raises(StorageError, match=r"s3://\S+/data\.parquet bytes \[\d+, \d+\): request failed after "
                                           rf"{ATTEMPTS} attempts: (ConnectionRefusedError|\w+Error|\w+Disconnected)"):
        if how == "table":
            s.to_table()
        elif how == "count":
            s.count()
        else:
            for _ in s.to_reader():
                pass
    assert die.dead
    assert _no_fetch_thread_left()
    t.close()
