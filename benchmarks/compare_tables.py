"""The table scenarios of benchmarks/compare.py: tables of day partitions, each `data.parquet` +
`_pm` of 10 row groups x 8 columns (benchmarks/datasets.py, table_dir).

  table    Table.prune over 1,000 partitions after every `_pm` is open (first call and cached)
  oneshot  one query answered from nothing kept: `with open_table(root) as t: t.prune(WHERE)` and
           `t.scan(WHERE).count()`, per table size (issue 17)

"One shot" is a cold process's point of view with the files in the page cache: modules are
imported and every contender has run once before timing, but no table state survives a call (the
table is listed, every `_pm` opened and the table closed inside the timed region). The peers are
timed the way a user meets them: DuckDB with its Parquet metadata cache on and warm (its best
case; one connection kept, threads=1), pyarrow.dataset built fresh each call.
"""

from __future__ import annotations

import glob
import os
import time

import pyarrow  # noqa: F401  (Table.prune returns a pyarrow table: import cost not counted)
import pyarrow.dataset as ds

from benchmarks import datasets as D
from benchmarks.harness import Contender, duckdb_connection, run_rounds
from qdbpm.prune.sql import parse
from qdbpm.table.table import open_table

ROW_GROUPS = 10  # per partition, as table_dir builds them
WINDOW = 100  # row groups the ts window covers at every size: the same answer, a bigger haystack


def scenario_table(rep, rounds, target):
    root = D.table_dir()
    lo, hi = D.selective_window(10_000)
    sql = D.predicate_sql(lo, hi)
    expr = parse(sql)

    def opened():
        t = open_table(root)
        for p in t.partitions:
            t.meta(p)
        return t

    t0 = time.perf_counter()
    warm = opened()
    t_open = time.perf_counter() - t0
    warm.prune(expr)
    n_parts = len(warm.partitions)
    res = warm.prune(expr)
    survivors = res.num_rows

    def close(t):
        t.close()

    dset = ds.dataset(root, format="parquet")
    frags = list(dset.get_fragments())
    for f in frags:
        f.ensure_complete_metadata()
    flt = D.arrow_filter(lo, hi)

    def ds_cached():
        n = 0
        for f in frags:
            n += len(f.split_by_row_group(flt))
        return n

    if ds_cached() != survivors:
        raise SystemExit(f"table: pyarrow.dataset keeps {ds_cached()} row groups, qdbpm {survivors}")
    con = duckdb_connection(True)
    q = f"SELECT count(*) FROM read_parquet('{root}/*/data.parquet') WHERE {sql}"
    con.execute(q).fetchone()
    cs = run_rounds([
        Contender("qdbpm Table.prune, first call after open", lambda t: t.prune(expr), setup=opened, teardown=close,
                  note="schemas grouped, ts/x stats decoded + concatenated, pyarrow result"),
        Contender("qdbpm Table.prune, cached", lambda: warm.prune(expr)),
        Contender("qdbpm open_table + open every _pm", lambda box: box.append(opened()), setup=list,
                  teardown=lambda box: box.pop().close(), note="not part of the goal"),
        Contender("pyarrow.dataset split_by_row_group x 1,000, cached", ds_cached),
        Contender("DuckDB count(*) over 1,000 files, metadata cache on", lambda: con.execute(q).fetchone()),
    ], max(3, rounds // 2), target)
    rep.table("table", f"{n_parts:,} partitions x 10 row groups x 8 columns, {survivors} row groups survive",
              cs, cs[0])
    rep.info["table"] = {"predicate": sql, "partitions": n_parts, "survivors": survivors, "open_once_s": t_open}
    # An absolute goal on a shared machine: judged on this process's CPU time (other processes'
    # load does not count), the wall time shown next to it.
    print(f"  first call: wall {cs[0].median * 1e3:.2f} ms, process CPU {cs[0].cpu_median * 1e3:.2f} ms; "
          f"second call: wall {cs[1].median * 1e3:.3f} ms, CPU {cs[1].cpu_median * 1e3:.3f} ms")
    rep.goal("1,000-partition Table.prune after open, first call, CPU (<= 10 ms)", cs[0].cpu_median * 1e3, 10,
             "ms", higher_is_better=False)
    rep.goal("1,000-partition Table.prune after open, first call, wall (<= 10 ms)", cs[0].median * 1e3, 10,
             "ms", higher_is_better=False, report_only=True)
    rep.goal("1,000-partition Table.prune, second call, wall (<= 10 ms)", cs[1].median * 1e3, 10, "ms",
             higher_is_better=False, report_only=True)
    warm.close()
    con.close()


# --- one shot ----------------------------------------------------------------------------------

PRUNE = "qdbpm open_table + first prune, one shot"
COUNT = "qdbpm open_table + scan().count(), one shot"
DUCK = "DuckDB count(*), file list, metadata cache on"


def oneshot_calls(root, sql, flt):
    """(prune, count, ds_fresh): the one-shot calls every table-size comparison times (here and
    compare_scaling.py): open_table + prune, open_table + scan().count(), a fresh pyarrow.dataset
    + split_by_row_group (its row groups kept). SQL text each call: a one-shot planner parses its
    query too (microseconds)."""
    def prune():
        with open_table(root) as t:
            return t.prune(sql)

    def count():
        with open_table(root) as t:
            return t.scan(sql).count()

    def ds_fresh():
        return sum(len(f.split_by_row_group(flt)) for f in ds.dataset(root, format="parquet").get_fragments())

    return prune, count, ds_fresh


def oneshot_size(rep, partitions, rounds, target):
    """The one-shot contenders on a table of `partitions` partitions: {name: Contender}."""
    root = D.table_dir(partitions)
    lo, hi = D.selective_window(partitions * ROW_GROUPS, width=WINDOW)
    sql = D.predicate_sql(lo, hi)
    flt = D.arrow_filter(lo, hi)
    files = sorted(glob.glob(os.path.join(root, "*", "data.parquet")))
    if len(files) != partitions:
        raise SystemExit(f"oneshot: {root} holds {len(files)} data.parquet, expected {partitions}")

    prune, count, ds_fresh = oneshot_calls(root, sql, flt)

    def listing():
        open_table(root).close()

    con = duckdb_connection(True)
    q_list = f"SELECT count(*) FROM read_parquet({files!r}) WHERE {sql}"
    q_glob = f"SELECT count(*) FROM read_parquet('{root}/*/data.parquet') WHERE {sql}"

    # The same answer everywhere (the DuckDB calls also fill its metadata cache).
    survivors, rows = prune().num_rows, count()
    ducks = (con.execute(q_list).fetchone()[0], con.execute(q_glob).fetchone()[0])
    if ds_fresh() != survivors or ducks != (rows, rows):
        raise SystemExit(f"oneshot {partitions}: row groups qdbpm {survivors}, pyarrow.dataset {ds_fresh()}; "
                         f"rows qdbpm {rows}, DuckDB (list, glob) {ducks}")
    cs = run_rounds([
        Contender(PRUNE, prune, note="list + open every _pm + prune + close"),
        Contender(COUNT, count, note="+ read and filter the survivors' ts/x chunks"),
        Contender("qdbpm open_table + close (listing only)", listing, note="part of both rows above"),
        Contender(DUCK, lambda: con.execute(q_list).fetchone()),
        Contender("DuckDB count(*), glob, metadata cache on", lambda: con.execute(q_glob).fetchone(),
                  note="lists the directories itself"),
        Contender("pyarrow.dataset fresh + split_by_row_group", ds_fresh,
                  note="discovery + every footer + the filter's row groups"),
    ], max(3, rounds // 2), target)
    con.close()
    rep.table("oneshot", f"{partitions:,} partitions x {ROW_GROUPS} row groups x 8 columns, {survivors} row "
              f"groups / {rows} rows match", cs, cs[0])
    by = {c.name: c for c in cs}
    print(f"  {PRUNE}: wall {by[PRUNE].median * 1e3:.2f} ms, process CPU {by[PRUNE].cpu_median * 1e3:.2f} ms "
          f"({by[PRUNE].cpu_median / partitions * 1e6:.1f} us CPU per partition)")
    rep.info[f"oneshot_{partitions}"] = {"predicate": sql, "partitions": partitions, "survivors": survivors,
                                         "rows": rows}
    return by


def scenario_oneshot(rep, sizes, rounds, target):
    """oneshot_size per table size, then the growth from the smallest to the largest and the
    goals (1,000 and 10,000 partitions are judged where measured; absolute times on CPU time)."""
    sizes = sorted(set(sizes))
    runs = {n: oneshot_size(rep, n, rounds, target) for n in sizes}
    if len(sizes) > 1:
        print("\n== oneshot growth (process CPU time; linear = the partitions' factor)")
        width = max(len(name) for name in runs[sizes[0]])
        for name in runs[sizes[0]]:
            ts = [runs[n][name].cpu_median for n in sizes]
            steps = "  ".join(f"{n:>7,}: {t * 1e3:9.2f} ms" for n, t in zip(sizes, ts))
            print(f"  {name:<{width}}  {steps}   x{ts[-1] / ts[0]:.1f} for x{sizes[-1] / sizes[0]:g} partitions")
        paired = growth_paired(sizes, max(15, 2 * rounds))
    if 1000 in runs:
        r = runs[1000]
        rep.goal("1,000-partition open_table + first prune, one shot, CPU (<= 15 ms)", r[PRUNE].cpu_median * 1e3,
                 15, "ms", higher_is_better=False)
        rep.goal("1,000-partition open_table + first prune, one shot, wall (<= 15 ms)", r[PRUNE].median * 1e3,
                 15, "ms", higher_is_better=False, report_only=True)
        rep.ratio_goal("1,000-partition one-shot prune vs DuckDB metadata cache on (>= 9x)", r[DUCK], r[PRUNE], 9,
                       "x faster")
        rep.goal("1,000-partition one-shot count() vs DuckDB metadata cache on",
                 r[DUCK].median / r[COUNT].median, 9, "x faster", report_only=True)
    if 10_000 in runs:
        rep.goal("10,000-partition open_table + first prune, one shot, CPU (<= 150 ms)",
                 runs[10_000][PRUNE].cpu_median * 1e3, 150, "ms", higher_is_better=False)
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        rep.goal(f"one-shot prune growth {lo:,} -> {hi:,} partitions, CPU, paired (linear: <= x{hi / lo:g})",
                 paired[hi] / paired[lo], hi / lo, "x", higher_is_better=False)
        rep.goal(f"one-shot prune growth {lo:,} -> {hi:,}, CPU, from the tables above (linear: <= x{hi / lo:g})",
                 runs[hi][PRUNE].cpu_median / runs[lo][PRUNE].cpu_median, hi / lo, "x", higher_is_better=False,
                 report_only=True)


def growth_paired(sizes, rounds) -> dict:
    """{size: median CPU seconds} of the one-shot prune alone, one call per size in turn each
    round: every call follows the other size's, the same machine state for both, where the
    tables above time the sizes minutes apart, each among its own peers (DuckDB and
    pyarrow.dataset at 10,000 files leave the caches in another state than at 1,000) and in
    batches of different lengths (~20 calls of the small table, 1-2 of the large)."""
    calls = {}
    for n in sizes:
        lo, hi = D.selective_window(n * ROW_GROUPS, width=WINDOW)
        calls[n] = oneshot_calls(D.table_dir(n), D.predicate_sql(lo, hi), D.arrow_filter(lo, hi))[0]
    cs = run_rounds([Contender(f"{n:,}", lambda _, f=calls[n]: f(), setup=lambda: None) for n in sizes],
                    rounds, 0)
    out = {n: c.cpu_median for n, c in zip(sizes, cs)}
    steps = "  ".join(f"{n:>7,}: {out[n] * 1e3:9.2f} ms" for n in sizes)
    print(f"  open_table + prune, paired ({rounds} rounds, one call per size in turn)  {steps}   "
          f"x{out[sizes[-1]] / out[sizes[0]]:.1f}")
    return out
