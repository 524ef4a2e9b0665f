"""`qdbpm scan`, run as users run it (a real subprocess), against DuckDB over the same files."""

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.sync.generate import generate

from support.table_files import duckdb_rows as duck

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DAY_US = 86_400_000_000


def run(*args, stderr=subprocess.PIPE, env=None):
    env = dict(env or os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "qdbpm.cli", *args], stdout=subprocess.PIPE, stderr=stderr,
                          text=True, env=env, timeout=120)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("cli_scan"))
    files = []
    for d in range(3):
        part = os.path.join(root, f"day={d}")
        os.makedirs(part)
        rng = np.random.default_rng(d)
        n = 600
        t = pa.table({
            "rid": pa.array(d * 10_000 + np.arange(n), pa.int64()),
            "ts": pa.array(np.datetime64("2024-01-01", "us") + (d * DAY_US + np.arange(n) * (DAY_US // n))
                           .astype("timedelta64[us]"), pa.timestamp("us")),
            "sym": pa.array([f"S{(i // 100 + d) % 3}" for i in range(n)]),
            "px": pa.array(np.round(rng.normal(100, 5, n) * 4) / 4, mask=rng.random(n) < 0.1),
        })
        files.append(os.path.join(part, "data.parquet"))
        pq.write_table(t, files[-1], row_group_size=100, sorting_columns=[pq.SortingColumn(1)])
        generate(files[-1])
    return root, files


WHERES = ["sym = 'S1' AND px > 101.5", "ts >= '2024-01-02T04:00:00' AND ts < '2024-01-02T16:00:00'",
          "px IS NULL OR rid < 50", "sym IN ('S0', 'S2') AND NOT (px <= 99.25)"]


def test_scan_count_equals_duckdb(table):
    root, files = table
    for where in WHERES:
        p = run("scan", root, "--where", where, "--count", "--json")
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        assert out["count"] == duck(files, f"SELECT count(*) FROM FILES WHERE {where}")[0][0], where
        p = run("scan", root, "--where", where, "--count")
        assert p.stdout.startswith(f"{out['count']} rows match (") and p.stderr == ""
    # a time range over whole row groups: counted from _pm alone, nothing fetched
    p = run("scan", root, "--where", WHERES[1], "--count", "--json")
    out = json.loads(p.stdout)
    assert out == {"count": 300, "row_groups": 3, "full": 3, "fetched_bytes": 0}


def test_scan_head_ranges_and_decision(table):
    root, files = table
    where = WHERES[0]
    p = run("scan", root, "--where", where, "--columns", "rid,px", "--head", "5", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["columns"] == ["rid", "px"]
    assert [tuple(r) for r in out["rows"]] == duck(files, f"SELECT rid, px FROM FILES WHERE {where} ORDER BY rid LIMIT 5")
    p = run("scan", root, "--where", where, "--columns", "rid,px", "--head", "2")
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["rid", "px"] and len(lines) == 3

    with qdbpm.open_table(root) as t:
        scan = t.scan(where, ["rid", "px"])
        chunks = scan.byte_ranges().to_pylist()
        kept = scan.row_groups().drop_columns(["path"]).to_pylist()
    p = run("scan", root, "--where", where, "--columns", "rid,px", "--ranges", "--json")
    out = json.loads(p.stdout)
    assert out["chunks"] == chunks and out["requests"] == len({(c["path"], c["offset"]) for c in chunks})
    p = run("scan", root, "--where", where, "--columns", "rid,px", "--ranges")
    assert p.stdout.splitlines()[-1].startswith(f"{out['requests']} requests, {out['bytes']:,} bytes")

    p = run("scan", root, "--where", where, "--json")
    out = json.loads(p.stdout)
    assert out["kept"] == kept and out["partitions"] == 3 and out["row_groups"] == 18 and out["rows"] == 1800
    p = run("scan", root, "--where", WHERES[1])
    assert p.stdout.splitlines()[-1].startswith("kept 3 of 18 row groups (3 full, marked *) in 1 of 3 partitions")


def test_scan_errors_and_usage(table, tmp_path):
    root, _ = table
    for args in [["--where", "px >"], ["--where", "nope = 1"], ["--columns", "rid,nope", "--count"]]:
        p = run("scan", root, *args)
        assert p.returncode == 1 and p.stderr.startswith("qdbpm: error:") and p.stderr.count("\n") == 1, p.stderr
    p = run("scan", str(tmp_path / "missing"), "--count")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    for args in [["--count", "--ranges"], ["--head", "-1"], ["--head", "x"]]:
        p = run("scan", root, *args)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "usage error" in p.stderr, p.stderr


def test_scan_progress_bar_on_a_terminal(table):
    root, files = table
    master, slave = os.openpty()
    try:
        p = run("scan", root, "--where", "px > 100", "--count", stderr=slave)
        os.close(slave)
        slave = None
        err = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            err += chunk
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    assert p.returncode == 0
    assert int(p.stdout.split()[0]) == duck(files, "SELECT count(*) FROM FILES WHERE px > 100")[0][0]
    text = err.decode()
    assert "[" + "#" * 30 + "]" in text and "MiB/s" in text, text
