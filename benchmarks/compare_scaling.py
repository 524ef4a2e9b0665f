"""Scaling curves (issue 17): qdbpm and its peers as a table gains partitions and a file gains row
groups, measured in one run, written as JSON and drawn (matplotlib, PNG into docs/img/).

    python benchmarks/compare_scaling.py [--quick] [--json FILE] [--sweeps partitions,row_groups]
                                         [--plot-only] [--markdown]

Partitions (tables of N partitions x 10 row groups x 8 columns, benchmarks/datasets.table_dir; the
predicate keeps the same 100-row-group ts window at every size), per N:
  qdbpm one shot       open_table + first prune, nothing kept (the same call as compare.py oneshot)
  qdbpm prune cached   the table kept open: a second prune
  qdbpm count one shot open_table + scan().count()
  qdbpm generate       generate() of every partition's `_pm` (per file, bloom=None)
  DuckDB               count(*) over the file list, threads=1, metadata cache on and warm
  pyarrow.dataset      fresh dataset + split_by_row_group with the filter
Row groups (one file of R row groups x 8 columns, 100 rows each; datasets.parquet_and_pm), per R:
  qdbpm open + CRC, prune first time (stats decoded in the call), prune cached, generate;
  pq.read_metadata, DuckDB count(*) (metadata cache on), pyarrow.dataset split_by_row_group (fresh).
  1,000,000 row groups: qdbpm only, on a `_pm` written directly (datasets.synthetic_pm): a Parquet
  file of 1 M row groups x 8 columns has a footer of ~1 GB, which pyarrow and DuckDB would parse for
  minutes; the peers' rows stop at 100,000.

Every time is this process's CPU time (a shared machine's other load does not count; wall is kept
in the JSON too), the median of the repeats after one warm call (fewer repeats at large sizes).
--quick: partitions up to 10,000, row groups up to 10,000; default: up to 100,000 each, and 1 M
row groups for qdbpm; --plot-only redraws docs/img/*.png from the JSON without measuring;
--markdown prints the ratio tables for docs/performance.md.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import datasets as D  # noqa: E402
from benchmarks.compare_tables import oneshot_calls  # noqa: E402
from benchmarks.harness import duckdb_connection  # noqa: E402

IMG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "img")
WINDOW = 100


def measure(fn, repeat) -> dict:
    """{cpu, wall}: medians (seconds) of `repeat` calls after one warm call."""
    fn()
    cpu, wall = [], []
    for _ in range(repeat):
        c, t = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - t)
    return {"cpu": statistics.median(cpu), "wall": statistics.median(wall)}


def repeats(n, small=7) -> int:
    return small if n <= 1000 else 3 if n <= 10_000 else 1


def sweep_partitions(sizes) -> dict:
    from qdbpm.sync.generate import generate
    from qdbpm.table.table import open_table

    out = {}
    for n in sizes:
        root = D.table_dir(n, jobs=2)
        lo, hi = D.selective_window(n * 10, width=min(WINDOW, n * 10))
        sql, flt = D.predicate_sql(lo, hi), D.arrow_filter(lo, hi)
        files = sorted(glob.glob(os.path.join(root, "*", "data.parquet")))
        con = duckdb_connection(True)
        q = f"SELECT count(*) FROM read_parquet({files!r}) WHERE {sql}"

        prune, count, ds_fresh = oneshot_calls(root, sql, flt)
        warm = open_table(root)
        rows, survivors = count(), prune().num_rows
        if con.execute(q).fetchall()[0][0] != rows:
            raise SystemExit(f"{n} partitions: DuckDB and qdbpm count differently")
        tmp = tempfile.mkdtemp(prefix="qdbpm-scaling-")
        some = files[: min(len(files), 200)]  # generate: per file, on up to 200 files of the table

        def gen():
            for i, f in enumerate(some):
                generate(f, os.path.join(tmp, f"{i}_pm"), bloom=None)

        r = repeats(n)
        row = {
            "qdbpm one shot (open_table + prune)": measure(prune, r),
            "qdbpm prune cached": measure(lambda: warm.prune(sql), r),
            "qdbpm count one shot": measure(count, r),
            "DuckDB count(*), metadata cache on": measure(lambda: con.execute(q).fetchall(), r),
            "pyarrow.dataset fresh + split_by_row_group": measure(ds_fresh, max(1, r // 2)),
        }
        g = measure(gen, 1)
        row["qdbpm generate, per file"] = {k: v / len(some) for k, v in g.items()}
        if ds_fresh() != survivors:
            raise SystemExit(f"{n} partitions: pyarrow.dataset and qdbpm keep different row groups")
        warm.close()
        con.close()
        out[n] = row
        print(f"  partitions {n:>7,}: " + "  ".join(f"{k.split(',')[0]} {v['cpu'] * 1e3:.2f} ms"
                                                    for k, v in row.items()), flush=True)
    return out


def sweep_row_groups(sizes, synthetic) -> dict:
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    import qdbpm
    from qdbpm.sync.generate import generate

    out = {}
    for r_count in sizes + synthetic:
        real = r_count not in synthetic
        if real:
            parquet, pm_path = D.parquet_and_pm(r_count, 8)
        else:
            parquet, pm_path = None, D.synthetic_pm(r_count, 8)
        if real:
            lo, hi = D.selective_window(r_count)
            sql = D.predicate_sql(lo, hi)
        else:  # synthetic: ts from 0, 1,000 us apart, 100 rows per row group; no `x` column
            lo = r_count // 2 * 100_000
            sql = f"ts BETWEEN TIMESTAMP '{D.ts_literal(lo)}' AND TIMESTAMP '{D.ts_literal(lo + 199_999)}'"
        expr = qdbpm.parse(sql)
        pm = qdbpm.open(pm_path)
        pm.prune(expr)
        fresh = qdbpm.open(pm_path)

        def first():
            fresh._cache.clear()
            fresh.prune(expr)

        r = repeats(r_count // 10)
        row = {
            "qdbpm open + CRC": measure(lambda: qdbpm.open(pm_path).close(), r),
            "qdbpm prune first time": measure(first, r),
            "qdbpm prune cached": measure(lambda: pm.prune(expr), r),
        }
        if real:
            tmp = os.path.join(tempfile.mkdtemp(prefix="qdbpm-scaling-"), "_pm")
            row["qdbpm generate"] = measure(lambda: generate(parquet, tmp, bloom=None), r)
            row["pq.read_metadata"] = measure(lambda: pq.read_metadata(parquet), max(1, r // 2))
            con = duckdb_connection(True)
            q = f"SELECT count(*) FROM read_parquet('{parquet}') WHERE {sql}"
            row["DuckDB count(*), metadata cache on"] = measure(lambda: con.execute(q).fetchall(), r)
            con.close()
            flt = D.arrow_filter(lo, hi)
            row["pyarrow.dataset fresh + split_by_row_group"] = measure(
                lambda: next(ds.dataset(parquet, format="parquet").get_fragments()).split_by_row_group(flt),
                max(1, r // 2))
        pm.close()
        fresh.close()
        out[r_count] = row
        print(f"  row groups {r_count:>9,}: " + "  ".join(f"{k} {v['cpu'] * 1e3:.2f} ms" for k, v in row.items()),
              flush=True)
    return out


# --- pictures and tables ---------------------------------------------------------------------


def plot(data, path_prefix):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    machine = data.get("machine", "")
    for key, xlabel, base in (("partitions", "partitions (x 10 row groups x 8 columns)",
                               "qdbpm one shot (open_table + prune)"),
                              ("row_groups", "row groups in one file (x 8 columns)", "qdbpm open + CRC")):
        sweep = {int(k): v for k, v in data[key].items()}
        xs = sorted(sweep)
        names = list(dict.fromkeys(n for x in xs for n in sweep[x]))
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(14, 5.5))
        for i, name in enumerate(names):
            pts = [(x, sweep[x][name]["cpu"] * 1e3) for x in xs if name in sweep[x]]
            style = "-o" if name.startswith("qdbpm") else "--s"
            a1.plot(*zip(*pts), style, label=name, color=f"C{i}")
            ratio = [(x, sweep[x][name]["cpu"] / sweep[x][base]["cpu"]) for x in xs
                     if name in sweep[x] and base in sweep[x]]
            if not name.startswith("qdbpm") and ratio:
                a2.plot(*zip(*ratio), style, label=name, color=f"C{i}")
        for a in (a1, a2):
            a.set_xscale("log")
            a.set_yscale("log")
            a.set_xlabel(xlabel)
            a.grid(True, which="both", alpha=0.3)
        a1.set_ylabel("process CPU time, ms (median)")
        a1.set_title(f"time vs size ({key.replace('_', ' ')})")
        a2.axhline(1, color="k", lw=0.8)
        a2.set_ylabel(f"time / time of '{base}'")
        a2.set_title(f"peers' time / qdbpm's '{base}' (above 1: qdbpm is faster)", fontsize=9)
        a1.legend(fontsize=8)
        a2.legend(fontsize=8)
        fig.suptitle(f"qdbpm scaling, {machine}; files in page cache", fontsize=10)
        fig.tight_layout()
        out = f"{path_prefix}_{key}.png"
        fig.savefig(out, dpi=110)
        plt.close(fig)
        print(f"wrote {out}")


def markdown(data) -> str:
    lines = []
    for key, base in (("partitions", "qdbpm one shot (open_table + prune)"), ("row_groups", "qdbpm open + CRC")):
        sweep = {int(k): v for k, v in data[key].items()}
        xs = sorted(sweep)
        names = list(dict.fromkeys(n for x in xs for n in sweep[x]))
        lines.append(f"\n| {key.replace('_', ' ')} | " + " | ".join(names) + " |")
        lines.append("|---:|" + "---:|" * len(names))
        for x in xs:
            cells = []
            for n in names:
                v = sweep[x].get(n)
                if v is None:
                    cells.append("not run")
                    continue
                ms = v["cpu"] * 1e3
                t = f"{ms:,.2f} ms" if ms < 1000 else f"{ms / 1e3:,.2f} s"
                if not n.startswith("qdbpm") and base in sweep[x]:  # a peer: how many times qdbpm's time
                    t += f" ({v['cpu'] / sweep[x][base]['cpu']:,.1f}x)"
                cells.append(t)
            lines.append(f"| {x:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=os.path.join(IMG, "scaling.json"))
    ap.add_argument("--plot-only", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--sweeps", default="partitions,row_groups", help="which to measure (the others are kept "
                    "from --json)")
    args = ap.parse_args(argv)
    os.makedirs(IMG, exist_ok=True)
    if not args.plot_only:
        from benchmarks.compare import machine_info

        parts = [10, 100, 1000, 10_000] + ([] if args.quick else [100_000])
        rgs = [100, 1000, 10_000] + ([] if args.quick else [100_000])
        synthetic = [] if args.quick else [1_000_000]
        info = machine_info()
        data = {"machine": f"{info['cpus']} CPUs, Python {info['python']}, pyarrow {info['pyarrow']}, "
                           f"DuckDB {info['duckdb']}",
                "command": "python benchmarks/compare_scaling.py" + (" --quick" if args.quick else "")}
        if args.sweeps != "partitions,row_groups" and os.path.exists(args.json):
            with open(args.json) as f:  # keep the sweeps not run now
                data = dict(json.load(f), **data)
        for sweep in args.sweeps.split(","):
            print(f"== {sweep}")
            data[sweep] = sweep_partitions(parts) if sweep == "partitions" else sweep_row_groups(rgs, synthetic)
            with open(args.json, "w") as f:  # after each sweep: a later failure keeps it
                json.dump(data, f, indent=1)
            print(f"wrote {args.json}")
    with open(args.json) as f:
        data = json.load(f)
    plot(data, os.path.join(os.path.dirname(args.json), "scaling"))
    if args.markdown:
        print(markdown(data))


if __name__ == "__main__":
    main()
