"""TPC-H lineitem end to end (issue 17): `read_table` of selective queries, one shot, vs DuckDB.

    python benchmarks/compare.py --skip ... (scenario `tpch`), or alone:
    python benchmarks/compare_tpch.py [--rounds N] [--breakdown]

Data: lineitem at scale factor 1 (6 M rows) from tpchgen-cli (PyPI), re-written by DuckDB sorted by
l_shipdate into one partition per ship month (84 partitions, DuckDB's default row groups), each
`_pm` by qdbpm.generate: tests/support/tpch.py's build, cached in $QDBPM_BENCH_CACHE/tpch1.

`--codec lz4_raw` (or zstd, uncompressed): the same partitions re-written by DuckDB with that codec
(QuestDB writes LZ4_RAW), cached in $QDBPM_BENCH_CACHE/tpch1-<codec>; goals labelled with it.

Queries (the same SELECT for both, same answer checked):
  day    every column of the rows shipped on 1995-06-17
  month  every column of the rows shipped in June 1995
  Q6     TPC-H Q6: sum(l_extendedprice * l_discount) over 1994, discount 0.05..0.07, quantity < 24
qdbpm: `read_table(root, columns, where)` with nothing kept (the table opened, pruned, read and
closed in the call; Q6's sum in pyarrow.compute over the rows it returns). DuckDB: the SELECT over
the file list with threads=1 and its Parquet metadata cache on and warm. Goal: qdbpm >= 2x faster
on each query.

--breakdown: where a one-shot read's time goes, each stage timed alone in the same rounds (open
only; open + plan: the scan pruned, its byte ranges and schema worked out; the read of a scan
planned outside the clock), with each contender's CPU time beside its wall time (qdbpm's decode
pool runs beside the calling thread; DuckDB has one thread), and the calling thread's own CPU time:
where that is near the wall time, the calling thread is the critical path (it never waits for the
pool), and only less work in it shortens the call. Then the function calls the calling thread
makes in a one shot and in its open + plan (`calls`): a count, not a time, so it does not drift
with the VM. Then the timeline of a one shot (benchmarks/timeline.py): when its plan ends, when the
pool starts, how busy the pool is after the plan and how long its tasks wait off the CPU. Report
only: no goal.
"""

from __future__ import annotations

import decimal
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from benchmarks import datasets as D  # noqa: E402
from benchmarks.harness import Contender, Report, duckdb_connection, run_rounds  # noqa: E402
from benchmarks.timeline import describe, timeline  # noqa: E402

SCALE = 1
Q6 = ("l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
      "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24")
QUERIES = {
    "day": ("*", "l_shipdate = DATE '1995-06-17'"),
    "month": ("*", "l_shipdate BETWEEN DATE '1995-06-01' AND DATE '1995-06-30'"),
    "Q6": ("sum(l_extendedprice * l_discount)", Q6),
}


def lineitem(scale=SCALE, codec="snappy") -> str:
    """The month-partitioned lineitem root (built once); `codec` other than DuckDB's default
    Snappy: the same partitions re-written with it (`recompressed`)."""
    from support.tpch import build

    base = os.path.join(D.CACHE, f"tpch{scale}")
    root = os.path.join(base, "lineitem")
    if not os.path.exists(os.path.join(base, ".complete")):
        print(f"building TPC-H lineitem at scale {scale} in {base} (once, a few minutes)", file=sys.stderr, flush=True)
        build(base, scale=scale, tables=("lineitem",), row_group_rows=None)
        with open(os.path.join(base, ".complete"), "w"):
            pass
    return root if codec == "snappy" else recompressed(root, os.path.join(D.CACHE, f"tpch{scale}-{codec}"), codec)


def recompressed(src, base, codec) -> str:
    """The partitions of `src` re-written by DuckDB (one thread: rows and row groups as they were)
    with Parquet codec `codec`, e.g. lz4_raw (QuestDB's), each `_pm` generated; built once."""
    import duckdb

    from qdbpm.sync.generate import generate

    root = os.path.join(base, "lineitem")
    if not os.path.exists(os.path.join(base, ".complete")):
        print(f"re-writing lineitem with {codec} in {base} (once)", file=sys.stderr, flush=True)
        con = duckdb.connect()
        con.execute("SET threads = 1")
        for f in sorted(glob.glob(os.path.join(src, "*", "data.parquet"))):
            out = os.path.join(root, os.path.basename(os.path.dirname(f)), "data.parquet")
            os.makedirs(os.path.dirname(out), exist_ok=True)
            con.execute(f"COPY (SELECT * FROM read_parquet('{f}')) TO '{out}' (FORMAT parquet, COMPRESSION {codec})")
            generate(out)
        con.close()
        with open(os.path.join(base, ".complete"), "w"):
            pass
    return root


def _keys(tbl):
    order = [("l_orderkey", "ascending"), ("l_linenumber", "ascending")]
    return tbl.select(["l_orderkey", "l_linenumber"]).sort_by(order).to_pydict()


def read_args(name):
    """(columns, where) of `read_table` for query `name`: Q6 reads only the columns its sum needs."""
    return (["l_extendedprice", "l_discount"] if name == "Q6" else None), QUERIES[name][1]


def q6_sum(tbl):
    import pyarrow.compute as pc

    return pc.sum(pc.multiply(tbl["l_extendedprice"], tbl["l_discount"])).as_py()


def one_shot(root, name):
    """qdbpm's answer to query `name`, one shot: `read_table` (nothing kept), Q6 then summed."""
    from qdbpm.table.read import read_table

    columns, where = read_args(name)
    finish = q6_sum if name == "Q6" else (lambda t: t)
    return lambda: finish(read_table(root, columns, where))


def calls(fn) -> dict:
    """{"python": ..., "builtin": ...}: the function calls one call of `fn` makes in this thread
    (sys.setprofile's call and c_call events; Cython functions count as neither). Unlike a time,
    the count does not drift with the VM, so Python taken out of a one shot's calling thread
    shows in it even where a few percent of time cannot be seen. It moves only where the calling
    thread waits for the pool (a wait may run `idle` steps, or take over a split)."""
    got = {"python": 0, "builtin": 0}

    def hook(frame, event, arg):
        if event == "call":
            got["python"] += 1
        elif event == "c_call":
            got["builtin"] += 1

    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(old)
    got["python"] -= 1  # fn's own frame
    got["builtin"] -= 1  # sys.setprofile(old), seen before it takes effect
    return got


def scenario_tpch(rep, rounds, target, scale=SCALE, codec="snappy"):
    root = lineitem(scale, codec)
    tag = "" if codec == "snappy" else f", {codec}"
    files = sorted(glob.glob(os.path.join(root, "*", "data.parquet")))
    con = duckdb_connection(True)
    contenders = []
    for name, (select, where) in QUERIES.items():
        sql = f"SELECT {select} FROM read_parquet({files!r}) WHERE {where}"
        ours = one_shot(root, name)
        # Both hand back Arrow (DuckDB's fetchall would add a Python object per value to its side).
        got, want = ours(), con.sql(sql).to_arrow_table()
        if name == "Q6":
            if decimal.Decimal(str(got)) != decimal.Decimal(str(want.column(0)[0].as_py())):
                raise SystemExit(f"tpch {name}: qdbpm {got}, DuckDB {want.column(0)[0]}")
        elif got.num_rows != want.num_rows or _keys(got) != _keys(want):
            raise SystemExit(f"tpch {name}: qdbpm {got.num_rows} rows, DuckDB {want.num_rows}")
        cs = run_rounds([
            Contender(f"qdbpm read_table, one shot ({name})", ours, note="open + prune + read + close"),
            Contender(f"DuckDB SELECT, threads=1, metadata cache on ({name})",
                      lambda sql=sql: con.sql(sql).to_arrow_table(), note="result as Arrow"),
        ], rounds, target)
        rows = 1 if name == "Q6" else got.num_rows
        rep.table("tpch", f"lineitem SF{scale}{tag}, {len(files)} month partitions; {name}: {rows:,} rows", cs, cs[0])
        rep.ratio_goal(f"TPC-H{tag} {name}: read_table one shot vs DuckDB (>= 2x)", cs[1], cs[0], 2, "x faster")
        contenders += cs
    con.close()
    return contenders


def scenario_breakdown(rep, rounds, target, scale=SCALE, codec="snappy"):
    """One-shot read_table split into its stages (module docstring, --breakdown)."""
    from qdbpm.table.table import open_table

    root = lineitem(scale, codec)
    files = sorted(glob.glob(os.path.join(root, "*", "data.parquet")))
    con = duckdb_connection(True)
    for name, (select, where) in QUERIES.items():
        columns = read_args(name)[0]
        finish = q6_sum if name == "Q6" else (lambda t: t)
        sql = f"SELECT {select} FROM read_parquet({files!r}) WHERE {where}"
        con.sql(sql).to_arrow_table()  # DuckDB's metadata cache warm

        def planned(where=where, columns=columns):
            t = open_table(root)
            s = t.scan(where, columns)
            s.byte_ranges(), s.schema
            return t, s

        def opened_and_planned(where=where, columns=columns):
            t, _ = planned(where, columns)
            t.close()

        cs = run_rounds([
            Contender(f"qdbpm one shot ({name})", one_shot(root, name), note="open + plan + read + close"),
            Contender("  open_table + close", lambda: open_table(root).close(), note="every _pm read and checked"),
            Contender("  open + plan + close", opened_and_planned, note="pruned, byte ranges, schema"),
            Contender("  read of a planned scan", lambda ts, f=finish: f(ts[1].to_table()), setup=planned,
                      teardown=lambda ts: ts[0].close(), note="fetch, filter, gather, build"),
            Contender(f"DuckDB SELECT, threads=1 ({name})", lambda sql=sql: con.sql(sql).to_arrow_table()),
        ], rounds, target)
        cpu = {c.name: f"cpu {c.cpu_median * 1e3:6.2f} ms ({c.cpu_median / c.median:.2f} of wall), "
                       f"this thread {c.thread_median * 1e3:6.2f} ms ({c.thread_median / c.median:.2f})" for c in cs}
        rep.table("tpch breakdown", f"lineitem SF{scale}; {name}", cs, cs[0], cpu)
        # the calling thread's calls, the second time round (first-use imports and caches aside)
        once, one_fn = {}, one_shot(root, name)
        for key, fn in (("one_shot", one_fn), ("open_plan", opened_and_planned)):
            calls(fn)
            once[key] = calls(fn)
        one, plan = once["one_shot"], once["open_plan"]
        rep.info[f"tpch_calls_{name}"] = once
        print(f"  calls in the calling thread: one shot {one['python']:,} Python + {one['builtin']:,} builtin; "
              f"open + plan + close {plan['python']:,} + {plan['builtin']:,}")
        rep.info[f"tpch_timeline_{name}"] = tl = timeline(one_fn, n=100)
        print(f"  timeline (medians of 100 one shots): {describe(tl)}")
    con.close()


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--scale", type=int, default=SCALE)
    ap.add_argument("--breakdown", action="store_true", help="also time a one-shot read's stages alone")
    ap.add_argument("--codec", default="snappy", choices=["snappy", "lz4_raw", "zstd", "uncompressed"],
                    help="the partitions' codec: DuckDB's default Snappy, or re-written with another "
                         "(lz4_raw: QuestDB's)")
    args = ap.parse_args(argv)
    rep = Report()
    scenario_tpch(rep, args.rounds, 0.2, args.scale, args.codec)
    if args.breakdown:
        scenario_breakdown(rep, args.rounds, 0.2, args.scale, args.codec)
    rep.print_goals()


if __name__ == "__main__":
    main()
