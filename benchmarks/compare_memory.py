"""Memory of a streaming scan: peak RSS growth while Table.scan(...).to_reader() streams a table
at least 10x larger than its memory budget, against the budget (goal: growth <= 2x the budget).

    python benchmarks/compare_memory.py [--budget-mib 32] [--days 200]

The table (trades, ts-partitioned, pyarrow-written) is built in a temporary directory; the scan runs
in a fresh child process, so the peak (ru_maxrss) is the scan's alone. The child opens the table and
takes one batch of a first scan (loading the decoder's code and starting the fetch threads: a
one-time cost, not one that grows with the budget or the table), records its RSS, then streams every
batch of a second scan, dropping each, and reports its peak; growth counted from before the first
batch is printed too. For scale, pyarrow.dataset's to_table() of the same table (everything in memory) runs
in another child.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import json, resource, sys
sys.path.insert(0, {root!r})

def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20

import pyarrow.dataset as pads
import qdbpm
mode, table_root, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "qdbpm":
    t = qdbpm.open_table(table_root)
    cold = rss_mib()
    for _ in t.scan(None, memory_budget=budget).to_reader():
        break
    scan = t.scan(None, memory_budget=budget)
    scan.schema
    base = rss_mib()
    rows = 0
    for batch in scan.to_reader():
        rows += batch.num_rows
else:
    ds = pads.dataset(table_root, format="parquet")
    base = cold = rss_mib()
    rows = ds.to_table().num_rows
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"base": base, "cold": cold, "peak": peak, "rows": rows}}))
"""


def run_child(mode, table_root, budget):
    code = CHILD.format(root=os.path.join(HERE, ".."))
    out = subprocess.run([sys.executable, "-c", code, mode, table_root, str(budget)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-mib", type=int, default=32)
    ap.add_argument("--days", type=int, default=200, help="partitions of the trades table (~0.56 MB each)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(HERE, ".."))
    from qdbpm.cli.demo import build_trades
    from qdbpm.sync.generate import generate

    budget = args.budget_mib * 2**20
    with tempfile.TemporaryDirectory() as work:
        paths = build_trades(work, days=args.days, rows_per_day=200_000, row_group=20_000)
        for p in paths:
            generate(p)
        size = sum(os.path.getsize(p) for p in paths)
        import pyarrow.parquet as pq

        decoded = sum(pq.read_metadata(p).num_rows for p in paths)
        ours = run_child("qdbpm", work, budget)
        theirs = run_child("pyarrow", work, budget)
    growth = ours["peak"] - ours["base"]
    print(f"table: {len(paths)} partitions, {size / 2**20:.0f} MiB of Parquet, {decoded:,} rows; "
          f"budget {args.budget_mib} MiB ({size / budget:.1f}x smaller than the table)")
    print(f"qdbpm to_reader: {ours['rows']:,} rows; RSS {ours['base']:.0f} MiB before streaming, peak "
          f"{ours['peak']:.0f} MiB: growth {growth:.0f} MiB = {growth / args.budget_mib:.2f}x the budget "
          f"({ours['peak'] - ours['cold']:.0f} MiB counted from before the first scan's first batch)")
    print(f"pyarrow.dataset to_table (all in memory, for scale): peak growth "
          f"{theirs['peak'] - theirs['base']:.0f} MiB")
    ok = size >= 10 * budget and growth <= 2 * args.budget_mib
    print(f"goal: table >= 10x the budget and growth <= 2x the budget: {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
