"""The command line on a real S3 server (SeaweedFS): `qdbpm generate s3://...` writes the `_pm`
objects local generation writes, and `qdbpm scan` / `qdbpm prune` on the URL answer as locally,
with storage options given as `--storage-option key=value`."""

import json
import os
import subprocess
import sys

import pytest

from qdbpm.cli.demo import build_trades
from qdbpm.cli.storage import storage_options
from qdbpm.errors import PmError
from qdbpm.sync.generate import generate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WHERE = "sym = 'NVDA' AND price > 150"


def run(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "qdbpm.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def options(server):
    return ["--storage-option", f"key={server.key}", "--storage-option", f"secret={server.secret}",
            "--storage-option", f"client_kwargs.endpoint_url={server.endpoint_url}",
            "--storage-option", "client_kwargs.region_name=us-east-1"]


def test_generate_and_scan_a_table_on_s3(s3_server, s3_bucket, tmp_path):
    paths = build_trades(str(tmp_path), days=4, rows_per_day=4000, row_group=500)
    fs = s3_server.filesystem()
    for p in paths:
        rel = os.path.relpath(p, tmp_path).replace(os.sep, "/")
        fs.put_file(p, f"{s3_bucket}/t/{rel}")
        generate(p)
    url = f"s3://{s3_bucket}/t"
    out = run("generate", url, *options(s3_server))
    assert out.returncode == 0, out.stderr
    assert "generated 4 of 4" in out.stdout
    for p in paths:
        rel = os.path.relpath(os.path.join(os.path.dirname(p), "_pm"), tmp_path).replace(os.sep, "/")
        with open(os.path.join(os.path.dirname(p), "_pm"), "rb") as f:
            assert fs.cat_file(f"{s3_bucket}/t/{rel}") == f.read()

    local = run("scan", str(tmp_path), "--where", WHERE, "--count", "--json")
    remote = run("scan", url, "--where", WHERE, "--count", "--json", *options(s3_server))
    assert local.returncode == remote.returncode == 0, remote.stderr
    assert json.loads(remote.stdout) == json.loads(local.stdout) and json.loads(local.stdout)["count"] > 0
    local = run("prune", str(tmp_path), "--where", WHERE, "--json")
    remote = run("prune", url, "--where", WHERE, "--json", *options(s3_server))
    assert remote.returncode == 0, remote.stderr
    assert json.loads(remote.stdout)["row_groups"] == json.loads(local.stdout)["row_groups"]


def test_generate_reports_a_bad_object_and_goes_on(s3_server, s3_bucket, tmp_path):
    paths = build_trades(str(tmp_path), days=1, rows_per_day=1000, row_group=500)
    fs = s3_server.filesystem()
    fs.put_file(paths[0], f"{s3_bucket}/t/a/data.parquet")
    fs.pipe_file(f"{s3_bucket}/t/b/data.parquet", b"not parquet")
    out = run("generate", f"s3://{s3_bucket}/t", *options(s3_server))
    assert out.returncode == 1
    assert "generated 1 of 2" in out.stdout and f"FAIL s3://{s3_bucket}/t/b/data.parquet" in out.stdout
    assert fs.exists(f"{s3_bucket}/t/a/_pm") and not fs.exists(f"{s3_bucket}/t/b/_pm")


class Args:
    def __init__(self, items):
        self.storage_option = items


def test_storage_option_parsing():
    assert storage_options(Args([])) is None
    assert storage_options(Args(["anon=true", "client_kwargs.endpoint_url=http://h:1", "a.b.c=5", "k=x=y"])) == {
        "anon": True, "client_kwargs": {"endpoint_url": "http://h:1"}, "a": {"b": {"c": 5}}, "k": "x=y"}
    for bad in (["novalue"], ["=x"], ["a=1", "a.b=2"]):
        with pytest.raises(PmError, match="--storage-option"):
            storage_options(Args(bad))
