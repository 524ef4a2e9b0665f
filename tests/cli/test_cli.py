"""The command line, run as users run it: a real subprocess of `python -m qdbpm.cli`."""

import json
import os
import subprocess
import sys

import pytest

from conftest import GOLDEN, write_bytes
from support.golden_cases import EXAMPLE_A

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "qdbpm.cli", *args], capture_output=True, text=True, env=env, timeout=120)


def test_inspect_text_shows_header_columns_snapshots_and_stats():
    p = run("inspect", os.path.join(GOLDEN, "ool_stats.pm"))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "snapshots (Parquet size, newest first): " in out
    assert "TIMESTAMP" in out and "UUID" in out and "VARCHAR" in out
    assert "min='2023-11-14T22:13:20.000000Z'" in out  # 1.7e15 micros decoded as a timestamp
    assert "min='00010203-0405-0607-0809-0a0b0c0d0e0f'" in out
    assert "min='AAPL' max='TSLA'" in out
    assert "3 row groups" in out


def test_inspect_json_and_snapshot_pin():
    p = run("inspect", "--json", os.path.join(GOLDEN, "example_b.pm"))
    info = json.loads(p.stdout)
    assert info["snapshots"] == [288, 8] and len(info["row_groups"]) == 2
    assert info["row_groups"][1]["num_rows"] == 50
    p = run("inspect", "--json", "--snapshot", "8", os.path.join(GOLDEN, "example_b.pm"))
    info = json.loads(p.stdout)
    assert info["parquet_size"] == 8 and [rg["num_rows"] for rg in info["row_groups"]] == [100]


def test_verify_ok_and_failures(tmp_path):
    bad = tmp_path / "bad_pm"
    data = bytearray(EXAMPLE_A)
    data[100] ^= 1
    write_bytes(str(bad), bytes(data))
    good = os.path.join(GOLDEN, "example_b.pm")
    p = run("verify", good)
    assert p.returncode == 0 and p.stdout.startswith("OK   ") and "2 snapshots" in p.stdout
    p = run("verify", good, str(bad), str(tmp_path / "missing"))
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    assert lines[0].startswith("OK") and "checksum mismatch" in lines[1] and lines[2].startswith("FAIL")


def test_errors_are_one_line_without_traceback(tmp_path):
    p = run("inspect", str(tmp_path / "missing"))
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr and p.stderr.startswith("qdbpm: error:")
    bad = tmp_path / "short"
    write_bytes(str(bad), b"x" * 10)
    p = run("inspect", str(bad))
    assert p.returncode == 1 and "shorter than the 32-byte header" in p.stderr


@pytest.mark.parametrize("args", [[], ["inspect"], ["nosuch"], ["inspect", "x", "--snapshot", "abc"]])
def test_usage_errors_exit_2(args):
    p = run(*args)
    assert p.returncode == 2 and "usage" in p.stderr


def test_demo_runs_the_whole_story(tmp_path):
    p = run("demo", "--dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "30 daily partitions" in out and "generated 30 _pm files" in out
    # One footer read (its Arrow types) serves all 30 partitions: they share one column schema.
    assert "the Parquet footer (for the exact Arrow types) is read once" in out
    assert "same rows as pyarrow.dataset reading the whole table: yes" in out
    import re

    kept, total = map(int, re.search(r"pruned with _pm: (\d+) of (\d+) row groups", out).groups())
    assert 0 < kept < total / 10
