"""qdbpm and its peers on the same data, in one run: medians, ratios, and the issues' goals.

    python benchmarks/compare.py [--quick] [--json FILE] [--skip table,bloom,...]
                                 [--oneshot-sizes 1000,10000]

Datasets (seeded, built once per machine in $QDBPM_BENCH_CACHE, default ~/.cache/qdbpm-bench; see
benchmarks/datasets.py): A = 10,000 row groups x 8 columns, B = 200 row groups x 1,000 columns
(100 rows per row group; ts ascending timestamp[us] + int64 / double / string columns), and
tables of 1,000 and 10,000 partitions x 10 row groups x 8 columns (the 10,000 one only for
oneshot at that size: about 2 minutes to build, once). Contenders run in interleaved rounds and
report medians (benchmarks/harness.py). Compare ratios, not absolute times. Everything is
single-threaded except where a row says otherwise (DuckDB runs with threads=1).

Scenarios:
  open     open + CRC verify of the `_pm` vs pq.read_metadata of the Parquet file; limits: CRC-32
           (ours, zlib) and a numpy copy of the file
  prune    `ts BETWEEN a AND b AND x > c` (a 1 % ts window AND the top band of x: ~0.01 % of the
           row groups survive); qdbpm pm.prune with stats cached and first time (stats decoded in
           the call) vs pyarrow read_metadata + a Python stats loop, pyarrow.dataset
           split_by_row_group (fresh dataset; cached fragment metadata), DuckDB count(*) with the
           Parquet metadata cache off / on; limit: numpy copy of the chunk records it reads
  generate qdbpm.generate (footer parse + _pm write + fsync) vs pq.read_metadata
  table    Table.prune over 1,000 partitions after every `_pm` is open (first call and cached) vs
           DuckDB with its metadata cache on and pyarrow.dataset fragments with cached metadata
  oneshot  (benchmarks/compare_tables.py) the same predicate (a 100-row-group ts window at every
           size) answered from nothing kept: `with open_table(root) as t: t.prune(WHERE)` and
           `t.scan(WHERE).count()` vs DuckDB count(*) over the file list (metadata cache on and
           warm) and a fresh pyarrow.dataset + split_by_row_group; per table size
           (--oneshot-sizes; default 1000 with --quick, else 1000,10000) and the growth across sizes,
           judged on the prune alone with one call per size in turn (compare_tables.growth_paired)
  tpch     (benchmarks/compare_tpch.py) TPC-H lineitem SF1 by ship month: read_table of one day, one
           month and Q6, one shot, vs DuckDB's same SELECT (threads=1, metadata cache on, Arrow out)
  bloom    batch SBBF probes (value x filter) vs pybloom-live; batch XXH64 vs the xxhash package
  crc      CRC-32 GB/s: ours (isal when installed) vs zlib vs memory copy

Goals (from the issues), printed met / MISSED ("report" rows are context, not judged). Absolute
times are judged on this process's CPU time, which other load on a shared machine does not
inflate (wall time reported next to them):
  open + CRC + validation >= 50x faster than pq.read_metadata (file A)
  generate >= 3x faster than pq.read_metadata (file A)
  prune (stats cached) >= 1,000x pyarrow read_metadata + Python stats loop, >= 100x DuckDB cached
  1,000-partition Table.prune <= 10 ms after open (first call)
  one shot (issue 17): 1,000 partitions open_table + first prune <= 15 ms and >= 9x faster than
  DuckDB with its metadata cache on; 10,000 partitions <= 150 ms; growth linear or better
  TPC-H day / month / Q6: read_table one shot >= 2x faster than DuckDB
  bloom batch >= 50 M value x filter probes/s on one core and >= 100x pybloom-live
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import time

if __package__ in (None, ""):  # run as a script: make `benchmarks` and the working tree importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks import datasets as D  # noqa: E402
from benchmarks.compare_tables import scenario_oneshot, scenario_table  # noqa: E402
from benchmarks.compare_tpch import scenario_tpch  # noqa: E402
from benchmarks.harness import Contender, Report, duckdb_connection, run_rounds  # noqa: E402

SCENARIOS = ("open", "prune", "generate", "table", "oneshot", "tpch", "bloom", "crc")


# --- scenarios ---------------------------------------------------------------------------------


def scenario_open(rep, label, parquet, pm_path, rounds, target, goals=False):
    import zlib

    import pyarrow.parquet as pq

    import qdbpm
    from qdbpm.pm import crc

    with open(pm_path, "rb") as f:
        data = np.frombuffer(f.read(), np.uint8)
    dst = np.empty_like(data)
    cs = run_rounds([
        Contender("qdbpm open + verify", lambda: qdbpm.open(pm_path).close(),
                  note="map, footer chain, CRC, every structural check"),
        Contender("qdbpm open, no CRC", lambda: qdbpm.open(pm_path, verify=False).close()),
        Contender(f"limit: CRC-32 of the file ({crc.BACKEND})", lambda: crc.crc32(data, 0, len(data))),
        Contender("limit: zlib.crc32 of the file", lambda: zlib.crc32(data)),
        Contender("limit: numpy copy of the file", lambda: np.copyto(dst, data)),
        Contender("pq.read_metadata of the Parquet file", lambda: pq.read_metadata(parquet)),
    ], rounds, target)
    rep.table("open", f"{label}, _pm {len(data) / 2**20:.1f} MiB", cs, cs[0])
    if goals:
        rep.ratio_goal(f"open + CRC + validation vs pq.read_metadata ({label})", cs[5], cs[0], 50, "x faster")


def _pyarrow_prune(path, lo, hi, x_cut, md=None):
    """What a user writes with pyarrow: footer, then a loop over row groups reading the stats."""
    import pyarrow.parquet as pq

    md = md if md is not None else pq.read_metadata(path)
    names = [md.schema.column(i).name for i in range(md.num_columns)]
    its, ix = names.index("ts"), names.index("x")
    epoch = dt.datetime(1970, 1, 1)
    a, b = epoch + dt.timedelta(microseconds=lo), epoch + dt.timedelta(microseconds=hi)
    keep = []
    for r in range(md.num_row_groups):
        g = md.row_group(r)
        s = g.column(its).statistics
        if s is not None and s.has_min_max and (s.max < a or s.min > b):
            continue
        s = g.column(ix).statistics
        if s is not None and s.has_min_max and s.max <= x_cut:
            continue
        keep.append(r)
    return keep


def _ds_fresh(path, flt):
    import pyarrow.dataset as ds

    out = []
    for frag in ds.dataset(path, format="parquet").get_fragments():
        out.extend(f.row_groups[0].id for f in frag.split_by_row_group(flt))
    return out


def scenario_prune(rep, label, parquet, pm_path, rounds, target, goals=False):
    import pyarrow.parquet as pq

    import qdbpm
    from qdbpm.prune.sql import parse

    md_r = qdbpm.open(pm_path)
    R, C = md_r.row_group_count, md_r.column_count
    lo, hi = D.selective_window(R)
    sql = D.predicate_sql(lo, hi)
    expr = parse(sql)
    pm = qdbpm.open(pm_path)
    pm.prune(expr)
    fresh = qdbpm.open(pm_path)
    md = pq.read_metadata(parquet)
    flt = D.arrow_filter(lo, hi, D.X_CUT)
    import pyarrow.dataset as ds

    frag = next(ds.dataset(parquet, format="parquet").get_fragments())
    frag.ensure_complete_metadata()
    q = f"SELECT count(*) FROM read_parquet('{parquet}') WHERE {sql}"
    duck_off, duck_on = duckdb_connection(False), duckdb_connection(True)

    # The same answer everywhere (row groups kept; DuckDB's count over them).
    ours = np.nonzero(pm.prune(expr))[0].tolist()
    theirs = _pyarrow_prune(parquet, lo, hi, D.X_CUT)
    via_ds = sorted(f.row_groups[0].id for f in frag.split_by_row_group(flt))
    if not (ours == theirs == via_ds):
        raise SystemExit(f"prune disagreement on {label}: qdbpm {ours}, pyarrow {theirs}, dataset {via_ds}")
    count = duck_on.execute(q).fetchone()[0]
    if ours:
        import pyarrow.compute as pc

        tbl = pq.ParquetFile(parquet).read_row_groups(ours, columns=["ts", "x"])
        m = pc.and_(pc.and_(pc.greater_equal(tbl["ts"], _ts(lo)), pc.less_equal(tbl["ts"], _ts(hi))),
                    pc.greater(tbl["x"], D.X_CUT))
        expect = int(pc.sum(pc.cast(m, "int64")).as_py() or 0)
    else:
        expect = 0
    if count != expect:
        raise SystemExit(f"DuckDB counted {count} rows, the surviving row groups hold {expect}")

    def first():
        fresh._cache.clear()
        fresh.prune(expr)

    recs = np.ascontiguousarray(pm.chunks[:, [0, 1]]).view(np.uint8).reshape(-1)
    dst = np.empty_like(recs)
    cs = run_rounds([
        Contender("qdbpm pm.prune, stats cached", lambda: pm.prune(expr)),
        Contender("qdbpm pm.prune, first time", first, note="schema + ts/x stats decoded in the call"),
        Contender("qdbpm pm.prune(SQL text), stats cached", lambda: pm.prune(sql), note="parse + bind + evaluate"),
        Contender("pyarrow read_metadata + Python stats loop", lambda: _pyarrow_prune(parquet, lo, hi, D.X_CUT)),
        Contender("pyarrow stats loop only (metadata parsed)", lambda: _pyarrow_prune(parquet, lo, hi, D.X_CUT, md)),
        Contender("pyarrow.dataset split_by_row_group, fresh", lambda: _ds_fresh(parquet, flt)),
        Contender("pyarrow.dataset split_by_row_group, cached", lambda: frag.split_by_row_group(flt),
                  note="ensure_complete_metadata() done"),
        Contender("DuckDB count(*), metadata cache off", lambda: duck_off.execute(q).fetchone()),
        Contender("DuckDB count(*), metadata cache on", lambda: duck_on.execute(q).fetchone()),
        Contender("limit: numpy copy of ts+x chunk records", lambda: np.copyto(dst, recs),
                  note=f"{recs.nbytes / 1024:.0f} KiB, what a first-time decode must read"),
    ], rounds, target)
    rep.table("prune", f"{label}: {R:,} row groups x {C:,} columns, {len(ours)} survive", cs, cs[0])
    first_t = cs[1].median
    print(f"  first-time decode vs peers: {cs[3].median / first_t:,.0f}x pyarrow footer path, "
          f"{cs[8].median / first_t:,.0f}x DuckDB cached")
    rep.info[f"prune_{label}"] = {"predicate": sql, "surviving_row_groups": ours, "duckdb_count": count}
    if goals:
        rep.ratio_goal(f"prune vs pyarrow footer+loop ({label})", cs[3], cs[0], 1000, "x")
        rep.ratio_goal(f"prune vs DuckDB cached ({label})", cs[8], cs[0], 100, "x")
        rep.goal(f"first-time prune vs pyarrow footer+loop ({label})", cs[3].median / first_t, 1000, "x",
                 report_only=True)
        rep.goal(f"first-time prune vs DuckDB cached ({label})", cs[8].median / first_t, 100, "x", report_only=True)
    for p in (pm, fresh, md_r):
        p.close()
    duck_off.close()
    duck_on.close()


def _ts(micros):
    import pyarrow as pa

    return pa.scalar(micros, pa.timestamp("us"))


def scenario_generate(rep, label, parquet, rounds, target, goals=False):
    import pyarrow.parquet as pq

    from qdbpm.sync.generate import generate
    from qdbpm.parquet.footer import read_footer

    out = os.path.join(tempfile.mkdtemp(prefix="qdbpm-compare-"), "_pm")
    cs = run_rounds([
        Contender("qdbpm generate (bloom=None)", lambda: generate(parquet, out, bloom=None),
                  note="footer parse + encode + write + fsync + rename"),
        Contender("qdbpm generate (default bloom='inline')", lambda: generate(parquet, out)),
        Contender("qdbpm read_footer (parse only)", lambda: read_footer(parquet)),
        Contender("pq.read_metadata", lambda: pq.read_metadata(parquet)),
    ], rounds, target)
    rep.table("generate", label, cs, cs[3])
    if goals:
        rep.ratio_goal(f"generate vs pq.read_metadata ({label})", cs[3], cs[0], 3, "x faster")
    os.remove(out)


def scenario_bloom(rep, rounds, target, quick):
    from qdbpm import bloom

    n_values = 20_000 if quick else 100_000
    row_groups, per_filter = 64, 10_000
    rng = np.random.default_rng(7)
    strings = [f"user-{i:09d}" for i in rng.integers(0, 10**9, n_values).tolist()]
    inserted = strings[:per_filter]
    num_bytes = bloom.optimal_num_bytes(per_filter, 0.01)
    data = np.zeros(row_groups * num_bytes, np.uint8)
    for r in range(row_groups):
        bloom.insert_hashes(data[r * num_bytes:(r + 1) * num_bytes],
                            bloom.hash_values(inserted if r == 0 else [f"{s}/{r}" for s in inserted]))
    offsets = np.arange(row_groups, dtype=np.int64) * num_bytes
    lengths = np.full(row_groups, num_bytes, np.int64)
    hashes = bloom.hash_values(strings)
    encoded = [s.encode() for s in strings]
    probes = n_values * row_groups
    cons = [
        Contender(f"qdbpm probe_many ({n_values:,} hashes x {row_groups} filters)",
                  lambda: bloom.probe_many(hashes, data, offsets, lengths)),
        Contender("qdbpm hash_values + probe_many (str)",
                  lambda: bloom.probe_many(bloom.hash_values(strings), data, offsets, lengths)),
        Contender("qdbpm hash_values (str, batch)", lambda: bloom.hash_values(strings)),
    ]
    try:
        import xxhash

        f = xxhash.xxh64_intdigest
        cons.append(Contender("xxhash.xxh64_intdigest per value", lambda: [f(b) for b in encoded]))
    except ImportError:
        print("xxhash not installed: skipped", file=sys.stderr)
    pyb = None
    try:
        from pybloom_live import BloomFilter

        pyb = BloomFilter(capacity=per_filter, error_rate=0.01)
        for s in inserted:
            pyb.add(s)
        cons.append(Contender("pybloom-live `v in f` per value, 1 filter", lambda: [s in pyb for s in strings]))
    except ImportError:
        print("pybloom-live not installed: skipped", file=sys.stderr)
    cs = run_rounds(cons, rounds, target)
    by = {c.name: c for c in cs}
    rate = probes / cs[0].median
    extra = {cs[0].name: f"{rate / 1e6:8.1f} M probes/s",
             cs[1].name: f"{probes / cs[1].median / 1e6:8.1f} M probes/s",
             cs[2].name: f"{n_values / cs[2].median / 1e6:8.2f} M hashes/s"}
    if "xxhash.xxh64_intdigest per value" in by:
        extra["xxhash.xxh64_intdigest per value"] = \
            f"{n_values / by['xxhash.xxh64_intdigest per value'].median / 1e6:8.2f} M hashes/s"
    pyb_name = "pybloom-live `v in f` per value, 1 filter"
    if pyb is not None:
        extra[pyb_name] = f"{n_values / by[pyb_name].median / 1e6:8.2f} M probes/s"
    rep.table("bloom", "SBBF 16 KiB filters of 10,000 values; strings", cs, cs[0], extra)
    print("  (ratios compare equal work only where the units match: use the rates)")
    rep.goal("bloom batch probes/s, one core (M)", rate / 1e6, 50, "M/s")
    if pyb is not None:
        rep.goal("bloom batch vs pybloom-live (per probe)", rate / (n_values / by[pyb_name].median), 100, "x")


def scenario_crc(rep, rounds, target):
    import zlib

    from qdbpm.pm import crc

    rng = np.random.default_rng(3)
    out = []
    for size in (1 << 20, 64 << 20):
        buf = rng.integers(0, 256, size, dtype=np.uint8)
        dst = np.empty_like(buf)
        cs = run_rounds([
            Contender(f"qdbpm.crc.crc32 ({crc.BACKEND})", lambda: crc.crc32(buf, 0, size)),
            Contender("zlib.crc32", lambda: zlib.crc32(buf)),
            Contender("limit: numpy copy (read + write)", lambda: np.copyto(dst, buf)),
        ], rounds, target)
        extra = {c.name: f"{size / c.median / 1e9:6.2f} GB/s" for c in cs}
        rep.table("crc", f"{size >> 20} MiB buffer", cs, cs[0], extra)
        out.append(cs)
    return out


def machine_info():
    import duckdb
    import pyarrow

    import qdbpm
    from qdbpm.pm import crc

    info = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "numpy": np.__version__, "pyarrow": pyarrow.__version__, "duckdb": duckdb.__version__,
            "crc_backend": crc.BACKEND, "qdbpm": getattr(qdbpm, "__version__", "?")}
    for mod in ("xxhash", "pybloom_live"):
        try:
            m = __import__(mod)
            info[mod] = getattr(m, "__version__", getattr(m, "VERSION", "?"))
        except ImportError:
            info[mod] = None
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds, shorter samples, smaller bloom input")
    ap.add_argument("--json", metavar="FILE", help="also write every sample and goal as JSON ('-': stdout)")
    ap.add_argument("--skip", default="", help=f"comma-separated scenarios to skip: {','.join(SCENARIOS)}")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 7, --quick 3)")
    ap.add_argument("--oneshot-sizes", metavar="N,N", help="oneshot table sizes in partitions "
                    "(default 1000 with --quick, else 1000,10000; a new size is built once, ~12 ms a partition)")
    args = ap.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    if skip - set(SCENARIOS):
        ap.error(f"unknown scenario(s) {sorted(skip - set(SCENARIOS))}")
    rounds = args.rounds or (3 if args.quick else 7)
    target = 0.02 if args.quick else 0.05
    try:
        sizes = [int(n) for n in (args.oneshot_sizes or ("1000" if args.quick else "1000,10000")).split(",")]
    except ValueError:
        ap.error(f"--oneshot-sizes wants comma-separated partition counts, not {args.oneshot_sizes!r}")
    if min(sizes) < 1:
        ap.error("--oneshot-sizes: partition counts start at 1")
    rep = Report()
    rep.info["machine"] = machine_info()
    started = time.perf_counter()
    t = time.perf_counter()
    a = D.parquet_and_pm(10_000, 8)
    b = D.parquet_and_pm(200, 1_000)
    if "table" not in skip:
        D.table_dir()
    if "oneshot" not in skip:
        for n in sizes:
            D.table_dir(n)
    print(f"datasets ready in {time.perf_counter() - t:.1f} s (cache: {D.CACHE}); "
          f"{rounds} rounds; medians; ratio = time / time of the first (reference) row")
    A, B = "A 10,000 x 8", "B 200 x 1,000"
    if "open" not in skip:
        scenario_open(rep, A, *a, rounds, target, goals=True)
        scenario_open(rep, B, *b, rounds, target)
    if "prune" not in skip:
        scenario_prune(rep, A, *a, rounds, target, goals=True)
        scenario_prune(rep, B, *b, rounds, target)
    if "generate" not in skip:
        scenario_generate(rep, A, a[0], rounds, target, goals=True)
        scenario_generate(rep, B, b[0], rounds, target)
    if "table" not in skip:
        scenario_table(rep, rounds, target)
    if "oneshot" not in skip:
        scenario_oneshot(rep, sizes, rounds, target)
    if "tpch" not in skip:
        scenario_tpch(rep, rounds, target)
    if "bloom" not in skip:
        scenario_bloom(rep, rounds, target, args.quick)
    if "crc" not in skip:
        scenario_crc(rep, rounds, target)
    if rep.goals:
        rep.print_goals()
    elapsed = time.perf_counter() - started
    print(f"\ntotal {elapsed:.0f} s")
    if args.json:
        doc = {"rows": rep.rows, "goals": rep.goals, "info": rep.info, "rounds": rounds, "elapsed_s": elapsed}
        if args.json == "-":
            json.dump(doc, sys.stdout, indent=1, default=str)
        else:
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
