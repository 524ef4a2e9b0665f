"""`qdbpm generate PATH...` as a real subprocess (`python -m qdbpm.cli generate ...`): tree walk,
worker processes, progress, every failure listed at the end, exit status."""

import os
import pty
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm

from support.generate_checks import check_pm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args, stderr_tty=False, timeout=120):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "qdbpm.cli", *args]
    if not stderr_tty:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, text=True, env=env, cwd=ROOT)
        os.close(slave)
        chunks = []
        while True:
            try:
                b = os.read(master, 4096)
            except OSError:  # EIO: the child closed its end
                break
            if not b:
                break
            chunks.append(b)
        out = p.stdout.read()
        p.wait(timeout)
        p.stdout.close()
    finally:
        os.close(master)
    return subprocess.CompletedProcess(cmd, p.returncode, out, b"".join(chunks).decode())


def write(path, rows=300, seed=0, **kw):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rng = np.random.default_rng(seed)
    t = pa.table({"ts": pa.array(np.arange(rows) * 1000 + seed, pa.timestamp("us")), "x": rng.integers(0, 100, rows),
                  "s": [f"v{i % 7}" for i in range(rows)]})
    pq.write_table(t, path, row_group_size=100, bloom_filter_options={"x": {"ndv": 100}}, **kw)
    return path


@pytest.fixture
def tree(tmp_path):
    """A table of good partitions, two bad ones and a file not named data.parquet."""
    root = tmp_path / "root"
    good = [write(str(root / "t1" / f"2024-01-0{d}" / "data.parquet"), seed=d) for d in range(1, 6)]
    good.append(write(str(root / "t2" / "a" / "b" / "c" / "data.parquet"), seed=9))
    bad = str(root / "t1" / "2024-02-01" / "data.parquet")
    os.makedirs(os.path.dirname(bad))
    with open(bad, "wb") as f:
        f.write(b"this is not parquet at all")
    trunc = str(root / "t2" / "trunc" / "data.parquet")
    with open(write(trunc), "rb") as f:
        data = f.read()
    with open(trunc, "wb") as f:
        f.write(data[: len(data) // 2])
    write(str(root / "t1" / "ignored.parquet"))
    return str(root), good, [bad, trunc]


def test_tree_with_failures(tree):
    root, good, bad = tree
    r = run("generate", root, "--jobs", "3")
    assert r.returncode == 1, r
    assert "Traceback" not in r.stderr + r.stdout
    assert f"generated {len(good)} of {len(good) + len(bad)} _pm files" in r.stdout
    fails = re.findall(r"^FAIL (\S+): (.+)$", r.stdout, re.M)
    assert sorted(p for p, _ in fails) == sorted(bad)
    for _, msg in fails:
        assert "not a Parquet file" in msg or "PAR1" in msg
    # The failures come last, after the summary.
    assert r.stdout.index("generated") < r.stdout.index("FAIL")
    for p in good:
        check_pm(os.path.join(os.path.dirname(p), "_pm"), p, bloom="inline")
    for p in bad:
        assert not os.path.exists(os.path.join(os.path.dirname(p), "_pm"))
    assert not os.path.exists(os.path.join(root, "t1", "_pm"))  # ignored.parquet is no partition
    assert re.search(rf"generate: {len(good) + len(bad)}/{len(good) + len(bad)}", r.stderr)


@pytest.mark.parametrize("mode", ["inline", "external", "none"])
def test_all_good_exits_zero(tmp_path, mode):
    files = [write(str(tmp_path / f"p{i}" / "data.parquet"), seed=i) for i in range(12)]
    r = run("generate", str(tmp_path), "--bloom", mode)
    assert r.returncode == 0, r
    assert "generated 12 of 12 _pm files" in r.stdout and "FAIL" not in r.stdout
    for p in files:
        seen = check_pm(os.path.join(os.path.dirname(p), "_pm"), p, bloom=None if mode == "none" else mode)
        assert seen["blooms"] == (0 if mode == "none" else 3)
    v = run("verify", *[os.path.join(os.path.dirname(p), "_pm") for p in files])
    assert v.returncode == 0 and v.stdout.count("OK ") == 12


def test_files_and_missing_paths(tmp_path):
    a = write(str(tmp_path / "one.parquet"))
    b = write(str(tmp_path / "sub" / "data.parquet"), seed=3)
    missing = str(tmp_path / "nope.parquet")
    r = run("generate", a, missing, str(tmp_path / "sub"), "--jobs", "1")
    assert r.returncode == 1
    assert "generated 2 of 3" in r.stdout
    assert re.search(rf"^FAIL {re.escape(missing)}: .*No such file", r.stdout, re.M)
    # A file named directly gets its _pm beside it, whatever its name.
    check_pm(str(tmp_path / "_pm"), a)
    check_pm(str(tmp_path / "sub" / "_pm"), b)


def test_progress_bar_on_a_terminal(tmp_path):
    for i in range(4):
        write(str(tmp_path / f"p{i}" / "data.parquet"), seed=i)
    r = run("generate", str(tmp_path), "--jobs", "2", stderr_tty=True)
    assert r.returncode == 0, r
    assert "[" + "#" * 30 + "] 4/4" in r.stderr and "files/s" in r.stderr
    assert "generated 4 of 4" in r.stdout


def test_many_files_with_bad_ones_among_them(tmp_path):
    """Many files, bad ones spread among them: every good one still generates (chunked pool)."""
    paths = []
    for i in range(40):
        p = str(tmp_path / f"p{i:02d}" / "data.parquet")
        if i % 9 == 4:
            os.makedirs(os.path.dirname(p))
            with open(p, "wb") as f:
                f.write(b"PAR1" + b"\0" * 20 + b"PAR1")
        else:
            write(p, rows=50, seed=i)
        paths.append(p)
    r = run("generate", str(tmp_path), "--jobs", "4")
    assert r.returncode == 1
    bad = [p for i, p in enumerate(paths) if i % 9 == 4]
    assert sorted(re.findall(r"^FAIL (\S+):", r.stdout, re.M)) == bad
    for i, p in enumerate(paths):
        if i % 9 != 4:
            with qdbpm.open(os.path.join(os.path.dirname(p), "_pm")) as m:
                assert m.parquet_size == os.path.getsize(p)


@pytest.mark.parametrize("args, code, text", [
    (["generate"], 2, "usage error"),
    (["generate", "x", "--bloom", "sometimes"], 2, "usage error"),
    (["generate", "--jobs", "many", "x"], 2, "usage error"),
])
def test_usage_errors(args, code, text):
    r = run(*args)
    assert r.returncode == code and text in r.stderr and "Traceback" not in r.stderr


def test_empty_directory(tmp_path):
    r = run("generate", str(tmp_path))
    assert r.returncode == 1 and "no Parquet files found" in r.stderr
