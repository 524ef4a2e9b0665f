"""Cold start: each `qdbpm` command in a fresh process, next to DuckDB's Python client answering the
same question cold.

    python benchmarks/compare_startup.py [--runs 7]

Table: TPC-H lineitem by ship month (`compare_tpch.lineitem`, built once), page cache warm. Each
row is the median wall time of --runs processes, imports included; what a command-line user
waits for. The one-shot goals of `compare.py` are measured inside one process and exclude these.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

from benchmarks.compare_tpch import lineitem  # noqa: E402

DAY = "l_shipdate >= DATE '1994-03-01' AND l_shipdate < DATE '1994-03-02'"


def cold(argv, runs) -> float:
    """Median wall seconds of `argv` in fresh processes (stdout discarded; a failure raises)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    root = lineitem()
    pm = os.path.join(root, "1994-03", "_pm")
    cli = [sys.executable, "-m", "qdbpm.cli"]
    duck = ("import duckdb; duckdb.execute(\"SELECT count(*) FROM read_parquet('%s/*/data.parquet') WHERE %s\")"
            ".fetchall()" % (root, DAY))
    rows = [
        ("python -c pass (the interpreter alone)", [sys.executable, "-c", "pass"]),
        ("qdbpm --help", cli + ["--help"]),
        ("qdbpm inspect (one _pm)", cli + ["inspect", pm]),
        ("qdbpm verify (one _pm)", cli + ["verify", pm]),
        ("qdbpm prune (one ship day)", cli + ["prune", root, "--where", DAY]),
        ("qdbpm scan --count (one ship day)", cli + ["scan", root, "--where", DAY, "--count"]),
        ("DuckDB count(*) (one ship day), python -c", [sys.executable, "-c", duck]),
    ]
    print(f"cold processes, median of {args.runs} (page cache warm)")
    for name, argv in rows:
        print(f"  {name:<44} {cold(argv, args.runs):6.3f} s", flush=True)


if __name__ == "__main__":
    main()
