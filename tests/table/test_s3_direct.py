"""qdbpm.storage.s3.S3Direct against the real SeaweedFS server: the same bytes, keys and errors as
s3fs, retries through the loopback fault proxy, and tables that use it read what s3fs reads."""

import os
import random

import pytest
import s3fs

import qdbpm
from qdbpm.errors import StorageError
from qdbpm.storage.s3 import ATTEMPTS, S3Direct
from support.s3_proxy import Fault

KEYS = ["plain", "a b/c d", "ts=2024-01-15/_pm", "odd+chars&=,;:@$!'()*", "ünïcödé/€", "x/y/z/deep~1"]


@pytest.fixture
def objects(s3_server, s3_bucket):
    fs = s3_server.filesystem()
    rng = random.Random(5)
    data = {}
    for k in KEYS:
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 5000)))
        fs.pipe_file(f"{s3_bucket}/o/{k}", blob)
        data[f"{s3_bucket}/o/{k}"] = blob
    return fs, data


def test_from_fsspec_takes_only_what_it_reproduces(s3_server):
    assert isinstance(S3Direct.from_fsspec(s3_server.filesystem()), S3Direct)
    used = s3_server.filesystem()
    used.ls("")  # connected: s3fs has made its own session by now, which is not the user's
    assert isinstance(S3Direct.from_fsspec(used), S3Direct)
    opts = s3_server.storage_options()
    for changed in [{"anon": True}, {"config_kwargs": {"max_pool_connections": 3}}, {"requester_pays": True},
                    {"s3_additional_kwargs": {"ServerSideEncryption": "AES256"}}, {"version_aware": True},
                    {"client_kwargs": {"region_name": "us-east-1"}},  # no endpoint: AWS proper, s3fs's
                    {"session": object()},  # the user's own aiobotocore session
                    {"client_kwargs": dict(opts["client_kwargs"], proxies={"http": "x"})}]:
        assert S3Direct.from_fsspec(s3fs.S3FileSystem(**dict(opts, **changed))) is None, changed

    class Sub(s3fs.S3FileSystem):
        pass

    assert S3Direct.from_fsspec(Sub(**opts)) is None  # a subclass may read differently
    assert S3Direct.from_fsspec(None) is None


def test_other_filesystems_never_import_s3fs(tmp_path):
    # Telling an s3fs filesystem apart must not import s3fs (~0.3 s: aiobotocore, aiohttp) for a
    # table on another fsspec filesystem; a child process, as this session has s3fs loaded.
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(tmp_path / "p=1")
    pq.write_table(pa.table({"x": [1, 2, 3]}), tmp_path / "p=1" / "data.parquet")
    qdbpm.generate(str(tmp_path / "p=1" / "data.parquet"))
    code = ("import sys, fsspec, qdbpm\n"
            f"t = qdbpm.read_table({str(tmp_path)!r}, where='x > 1', filesystem=fsspec.filesystem('file'))\n"
            "assert t.column('x').to_pylist() == [2, 3], t\n"
            "print('s3fs' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out


def test_same_bytes_and_keys_as_s3fs(s3_server, s3_bucket, objects):
    fs, data = objects
    direct = S3Direct.from_fsspec(s3_server.filesystem())
    rng = random.Random(7)
    for path, blob in data.items():
        assert direct.cat_file(path) == fs.cat_file(path) == blob
        for _ in range(20 if blob else 0):
            a = rng.randrange(0, len(blob))
            b = rng.randrange(a + 1, len(blob) + 1)
            assert direct.cat_file(path, start=a, end=b) == fs.cat_file(path, start=a, end=b) == blob[a:b]
            assert direct.cat_file(path, start=b, end=b) == b""  # empty: no request (s3fs refuses it)
    assert direct.cat(list(data)) == data
    want = sorted(fs.find(f"{s3_bucket}/o"))
    assert direct.find(f"{s3_bucket}/o") == want == sorted(data)
    assert direct.find(f"{s3_bucket}/o", page_size=2) == want  # continuation tokens
    assert direct.find(f"{s3_bucket}/o/x") == [f"{s3_bucket}/o/x/y/z/deep~1"]
    assert direct.find(f"{s3_bucket}/nothing") == []


def test_errors_name_the_object(s3_server, s3_bucket, objects):
    _, data = objects
    direct = S3Direct.from_fsspec(s3_server.filesystem())
    path, blob = next((p, b) for p, b in data.items() if len(b) > 10)
    with pytest.raises(FileNotFoundError, match="no such object"):
        direct.cat_file(f"{s3_bucket}/o/missing")
    with pytest.raises(StorageError, match=r"ends before the range.*416|HTTP 416"):
        direct.cat_file(path, start=len(blob) + 10, end=len(blob) + 20)
    wrong = S3Direct.from_fsspec(s3fs.S3FileSystem(**dict(s3_server.storage_options(), secret="wrong")))
    with pytest.raises(StorageError, match=r"HTTP 403") as e:
        wrong.cat_file(path)
    assert "wrong" not in str(e.value) and s3_server.secret not in str(e.value)  # never a credential


def test_credentials_from_the_standard_chain(s3_server, s3_bucket, objects, monkeypatch):
    _, data = objects
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret)
    opts = {k: v for k, v in s3_server.storage_options().items() if k not in ("key", "secret")}
    direct = S3Direct.from_fsspec(s3fs.S3FileSystem(**opts))
    assert direct is not None
    path = next(iter(data))
    assert direct.cat_file(path) == data[path]


def test_transient_faults_are_retried(s3_server, s3_proxy, s3_bucket, objects):
    _, data = objects
    path, blob = max(data.items(), key=lambda kv: len(kv[1]))
    direct = S3Direct.from_fsspec(s3_proxy.filesystem(s3_server))
    for fault in [Fault(status=503, code="SlowDown"), Fault(status=500), Fault(drop=True),
                  Fault(truncate=len(blob) // 2)]:
        left = [ATTEMPTS - 1]

        def inject(method, p, headers, fault=fault):
            if left[0]:
                left[0] -= 1
                return fault
            return None

        s3_proxy.fault = inject
        s3_proxy.reset()
        assert direct.cat_file(path, start=3, end=len(blob)) == blob[3:], fault
        assert s3_proxy.counts() == {"GET": ATTEMPTS}, fault  # every try reached the wire
    s3_proxy.fault = lambda *a: Fault(status=503, code="SlowDown")
    with pytest.raises(StorageError, match=rf"{path}.*failed after {ATTEMPTS} attempts: HTTP 503 SlowDown"):
        direct.cat_file(path)


def test_tables_read_through_it(s3_server, s3_proxy, s3_bucket, tmp_path):
    from qdbpm.cli.demo import build_trades
    from qdbpm.sync.generate import generate

    paths = build_trades(str(tmp_path), days=3, rows_per_day=3000, row_group=500)
    for p in paths:
        generate(p)
    fs = s3_server.filesystem()
    for d, _, files in os.walk(tmp_path):
        for f in files:
            fs.put_file(os.path.join(d, f), f"{s3_bucket}/t/{os.path.relpath(os.path.join(d, f), tmp_path)}")
    where = "sym = 'NVDA' AND price > 100"
    direct = qdbpm.open_table(f"s3://{s3_bucket}/t", storage_options=s3_proxy.storage_options(s3_server))
    slow_opts = dict(s3_proxy.storage_options(s3_server), config_kwargs={"connect_timeout": 30})
    plain = qdbpm.open_table(f"s3://{s3_bucket}/t", storage_options=slow_opts)
    assert isinstance(direct.io, S3Direct) and plain.io is plain.filesystem
    s3_proxy.reset()
    got = direct.scan(where).to_table()
    assert s3_proxy.counts().get("GET", 0) > 3  # `_pm`, footer and data bytes, all on the direct path
    assert got.equals(plain.scan(where).to_table())
    assert got.equals(qdbpm.read_table(str(tmp_path), where=where))
    assert direct.partitions == plain.partitions
