"""Long differential fuzzing run of reads, on every core.

    python scripts/fuzz_reads.py [--cases 2000] [--queries 40] [--jobs N] [--first 0]

Each case writes a small partitioned table with random Parquet writer settings and checks random
WHERE clauses: `read_table` must return exactly what pyarrow.dataset reads of the rows DuckDB's
SELECT returns (values, types, order), and `count()` their number (tests/support/read_fuzz.py); a
clause DuckDB itself fails on is listed, not judged.
Cases are numbered: the same numbers give the same tables and clauses on every machine, and a
failure names its case and clause. Any failure: exit 1.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))  # support.read_fuzz


def work(args):
    seed, queries = args
    from support.read_fuzz import run_case

    d = tempfile.mkdtemp(prefix=f"qdbpm-fuzz-{seed}-")
    try:
        return run_case(d, seed, queries)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--first", type=int, default=0, help="number of the first case")
    a = ap.parse_args()
    t0, total, failures, oracle = time.time(), {"queries": 0, "rows": 0, "empty": 0}, [], []
    with ProcessPoolExecutor(a.jobs) as pool:
        for k, tally in enumerate(pool.map(work, [(s, a.queries) for s in range(a.first, a.first + a.cases)]), 1):
            for key in total:
                total[key] += tally[key]
            oracle += tally["oracle_errors"]
            for f in tally["failures"]:
                failures.append(f)
                print(f"FAILED case {f[0]}: {f[1]}\n    {f[2]}", flush=True)
            if k % 25 == 0 or k == a.cases:
                print(f"{k:,} cases, {total['queries']:,} queries ({total['rows']:,} with rows, "
                      f"{total['empty']:,} empty) in {time.time() - t0:.0f} s; {len(failures)} failures, "
                      f"{len(oracle)} clauses DuckDB could not answer", flush=True)
    for seed, clause, why in oracle[:20]:
        print(f"not judged (case {seed}): {clause}: DuckDB: {why}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
