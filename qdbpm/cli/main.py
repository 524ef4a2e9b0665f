"""Command line: `qdbpm generate | inspect | verify | prune | scan | demo`. Argument parsing and
printing only."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..errors import PmError
from .progress import Progress
from .storage import add_storage_option, is_url, storage_options

# Each command imports what it runs on (numpy, the `_pm` reader, the table layer, pyarrow) when it
# runs: `qdbpm --help` and a usage error answer at once instead of after ~0.3 s of imports.


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors: one line, exit 2
        self.exit(2, f"{self.prog}: usage error: {message}\n")


def _flags_names(flags, table):
    names = [name for bit, name in table if flags & bit]
    unknown = flags & ~sum(bit for bit, _ in table)
    if unknown:
        names.append(f"0x{unknown:x}")
    return "|".join(names) or "-"


def _header_flag_names():
    from ..pm import layout as L

    return [(L.FEATURE_BLOOM_FILTERS, "BLOOM_FILTERS"), (L.FEATURE_BLOOM_FILTERS_EXTERNAL, "BLOOM_FILTERS_EXTERNAL"),
            (L.FEATURE_SORTING_IS_DTS_ASC, "SORTING_IS_DTS_ASC"), (L.FEATURE_SQUASH_TRACKER, "SQUASH_TRACKER")]


def _footer_flag_names():
    from ..pm import layout as L

    return [(L.FOOTER_FEATURE_SEQ_TXN, "SEQ_TXN"), (L.FOOTER_FEATURE_SCRATCHPAD, "SCRATCHPAD")]


def describe(pm) -> dict:
    """Everything `inspect` shows, as plain JSON-able data."""
    import numpy as np

    from ..pm import layout as L
    from ..pm import qdb_types as Q
    from .display import decode_stat

    cols = []
    for i, c in enumerate(pm.columns):
        cols.append({
            "index": i,
            "name": pm.column_names[i],
            "id": int(c["id"]),
            "type": int(c["type"]),
            "type_name": Q.type_name(int(c["type"])),
            "physical_type": L.PHYSICAL_TYPE_NAMES[int(c["physical_type"])],
            "fixed_byte_len": int(c["fixed_byte_len"]),
            "repetition": L.REPETITION_NAMES.get(L.flags_repetition(int(c["flags"]))),
            "flags": int(c["flags"]),
            "max_rep_level": int(c["max_rep_level"]),
            "max_def_level": int(c["max_def_level"]),
            "bloom": bool(np.any(pm.bloom_columns == i)),
        })
    rgs = []
    for r in range(pm.row_group_count):
        chunks = []
        for c in range(pm.column_count):
            ch = pm.chunks[r, c]
            mn, mx = pm.stat_bytes(r, c)
            pt, tc = int(pm.columns[c]["physical_type"]), int(pm.columns[c]["type"])
            flags = int(ch["stat_flags"])
            chunks.append({
                "column": pm.column_names[c],
                "codec": L.CODEC_NAMES[int(ch["codec"])],
                "encodings": [n for b, n in enumerate(L.ENCODING_BIT_NAMES) if int(ch["encodings"]) >> b & 1],
                "num_values": int(ch["num_values"]),
                "byte_range_start": int(ch["byte_range_start"]),
                "total_compressed": int(ch["total_compressed"]),
                "null_count": int(ch["null_count"]) if flags & L.STAT_NULL_COUNT_PRESENT else None,
                "distinct_count": int(ch["distinct_count"]) if flags & L.STAT_DISTINCT_COUNT_PRESENT else None,
                "min": decode_stat(mn, pt, tc),
                "max": decode_stat(mx, pt, tc),
                "min_exact": bool(flags & L.STAT_MIN_EXACT) if mn is not None else None,
                "max_exact": bool(flags & L.STAT_MAX_EXACT) if mx is not None else None,
                "bloom": pm.bloom_filter(r, c) is not None or pm.bloom_ref(r, c) is not None,
            })
        rgs.append({"index": r, "num_rows": int(pm.num_rows[r]), "block_offset": int(pm.block_offsets[r]),
                    "chunks": chunks})
    return {
        "path": pm.path,
        "pm_size": pm.pm_size,
        "snapshot_pm_size": pm.snapshot_pm_size,
        "parquet_size": pm.parquet_size,
        "parquet_footer_offset": pm.parquet_footer_offset,
        "parquet_footer_length": pm.parquet_footer_length,
        "feature_flags": pm.feature_flags,
        "feature_flag_names": _flags_names(pm.feature_flags, _header_flag_names()),
        "footer_feature_flags": pm.footer_feature_flags,
        "designated_timestamp": pm.designated_timestamp,
        "sorting_columns": [{"column": i, "descending": d} for i, d in pm.sorting_columns],
        "unused_bytes": pm.unused_bytes,
        "squash_tracker": pm.squash_tracker,
        "seq_txn": pm.seq_txn,
        "scratchpad": None if pm.scratchpad is None else [{"code": c, "hex": v.hex()} for c, v in pm.scratchpad],
        "snapshots": pm.snapshots(),
        "columns": cols,
        "row_groups": rgs,
    }


def _print_inspect(info, out, max_row_groups):
    w = out.write
    w(f"{info['path']}: _pm {info['pm_size']} bytes, snapshot at {info['snapshot_pm_size']}, "
      f"Parquet {info['parquet_size']} bytes (footer {info['parquet_footer_offset']}+{info['parquet_footer_length']})\n")
    w(f"features: {info['feature_flag_names']}   footer features: "
      f"{_flags_names(info['footer_feature_flags'], _footer_flag_names())}   unused bytes: {info['unused_bytes']}\n")
    dts = info["designated_timestamp"]
    w(f"designated timestamp: {info['columns'][dts]['name'] if dts >= 0 else '-'}   sorting: "
      + (", ".join(f"{info['columns'][s['column']]['name']}{' desc' if s['descending'] else ''}"
                   for s in info["sorting_columns"]) or "-") + "\n")
    for key in ("squash_tracker", "seq_txn"):
        if info[key] is not None:
            w(f"{key}: {info[key]}\n")
    w("snapshots (Parquet size, newest first): " + ", ".join(map(str, info["snapshots"])) + "\n\n")
    w(f"{'#':>3} {'name':<20} {'type':<16} {'physical':<20} {'rep':<9} {'id':>4} bloom\n")
    for c in info["columns"]:
        w(f"{c['index']:>3} {c['name'][:20]:<20} {c['type_name'][:16]:<16} {c['physical_type']:<20} "
          f"{c['repetition']:<9} {c['id']:>4} {'yes' if c['bloom'] else ''}\n")
    rgs = info["row_groups"]
    w(f"\n{len(rgs)} row groups\n")
    for rg in rgs[:max_row_groups]:
        w(f"row group {rg['index']}: {rg['num_rows']} rows, block at {rg['block_offset']}\n")
        for ch in rg["chunks"]:
            w(f"    {ch['column'][:20]:<20} {ch['codec']:<12} bytes [{ch['byte_range_start']}, +{ch['total_compressed']})"
              f" nulls={ch['null_count']} min={ch['min']!r} max={ch['max']!r}"
              f"{' bloom' if ch['bloom'] else ''}\n")
    if len(rgs) > max_row_groups:
        w(f"... {len(rgs) - max_row_groups} more row groups (use --all or --json)\n")


def cmd_inspect(args):
    from ..meta import open as open_pm

    with open_pm(args.pm_file, parquet_size=args.snapshot) as pm:
        info = describe(pm)
    if args.json:
        json.dump(info, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        _print_inspect(info, sys.stdout, 1 << 62 if args.all else 20)
    return 0


def cmd_verify(args):
    from ..meta import open as open_pm

    bad = 0
    for path in args.pm_files:
        try:
            with open_pm(path) as pm:
                snaps = pm.snapshots()
                for size in snaps[1:]:
                    with open_pm(path, parquet_size=size):
                        pass
                print(f"OK   {path}: {pm.row_group_count} row groups, {len(snaps)} snapshots, {pm.pm_size} bytes")
        except (PmError, OSError) as e:
            bad += 1
            print(f"FAIL {path}: {_one_line(e)}")
    return 1 if bad else 0


def _generate_one(job):
    from ..sync.generate import generate

    path, bloom, repetition, *remote = job  # remote: (storage options, Parquet size from the listing)
    try:
        if remote:
            options, size = remote
            return path, generate(path, bloom=bloom, storage_options=options, parquet_size=size,
                                  repetition=repetition), None
        return path, generate(path, bloom=bloom, repetition=repetition), None
    except (PmError, OSError) as e:
        return path, None, _one_line(e)
    except Exception as e:  # a bug, not bad input: still report it per file and keep going
        return path, None, f"internal error {type(e).__name__}: {_one_line(e)}"


def cmd_generate(args):
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    from ..sync.remote import find_parquet

    bloom = None if args.bloom == "none" else args.bloom
    options = storage_options(args)
    try:
        objects = find_parquet(args.paths, options)
    except PmError:
        print("qdbpm: error: no Parquet files found (directories are searched for data.parquet)", file=sys.stderr)
        return 1
    files = [p for p, _ in objects]
    remote = options is not None or any(is_url(p) for p in files)
    rep = args.repetition
    jobs = [(p, bloom, rep, options, size) for p, size in objects] if remote else [(p, bloom, rep) for p in files]
    progress = Progress(len(files))
    failures, total = [], 0
    # remote generation waits on requests, not a core: threads, several per core
    workers = args.jobs or (min(len(files), 16) if remote else min(len(files), os.cpu_count() or 1))
    if workers <= 1:
        results = map(_generate_one, jobs)
        pool = None
    elif remote:
        pool = ThreadPoolExecutor(max_workers=workers)
        results = pool.map(_generate_one, jobs)
    else:
        pool = ProcessPoolExecutor(max_workers=workers)
        results = pool.map(_generate_one, jobs, chunksize=max(1, len(jobs) // (workers * 8)))
    try:
        for path, size, err in results:
            progress.step(path)
            if err is None:
                total += size
            else:
                failures.append((path, err))
    finally:
        if pool is not None:
            pool.shutdown()
    print(f"generated {len(files) - len(failures)} of {len(files)} _pm files ({total:,} bytes)")
    for path, err in failures:
        print(f"FAIL {path}: {err}")
    return 1 if failures else 0


def cmd_prune(args):
    from ..prune.filters import where_text
    from ..table.table import open_table

    pred = where_text(args.where)
    with open_table(args.table_dir, storage_options=storage_options(args)) as table:
        t0 = time.perf_counter()
        kept = table.prune(pred)
        elapsed = time.perf_counter() - t0
        total_rgs = sum(table.meta(p).row_group_count for p in table.partitions)
        total_rows = sum(int(table.meta(p).num_rows.sum()) for p in table.partitions)
    rows = kept.to_pylist()
    if args.json:
        json.dump({"partitions": len(table.partitions), "row_groups": total_rgs, "rows": total_rows,
                   "kept": rows, "seconds": elapsed}, sys.stdout)
        sys.stdout.write("\n")
        return 0
    by_part = {}
    for r in rows:
        by_part.setdefault(r["partition"], []).append(r)
    for p, rs in by_part.items():
        rgs = ",".join(str(r["row_group"]) for r in rs)
        print(f"{p or '.'}: row groups [{rgs}] ({sum(r['num_rows'] for r in rs):,} rows)")
    kept_rows = sum(r["num_rows"] for r in rows)
    print(f"kept {len(rows)} of {total_rgs} row groups ({kept_rows:,} of {total_rows:,} rows) in "
          f"{len(by_part)} of {len(table.partitions)} partitions; pruning took {elapsed * 1e3:.2f} ms")
    return 0


def cmd_scan(args):
    from .scan import run_scan  # pyarrow and the table layer load only for this command

    return run_scan(args)


def cmd_demo(args):
    if args.spark:
        from .demo import run_spark_demo

        return run_spark_demo(args)
    from .demo import run_demo

    return run_demo(args)


def _one_line(e):
    return str(e).replace("\n", " ")


def _non_negative(text):
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer")
    return n


def build_parser():
    p = _Parser(prog="qdbpm", description="QuestDB Parquet partition metadata (_pm) tools")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("generate", help="generate _pm files from Parquet files or directory trees")
    s.add_argument("paths", nargs="+", metavar="PATH", help="a Parquet file, or a directory (every data.parquet below)")
    s.add_argument("--bloom", choices=["inline", "external", "none"], default="inline",
                   help="copy bloom filters into _pm (inline), reference them (external) or skip them")
    s.add_argument("--jobs", type=int, default=0,
                   help="worker processes (default: one per core; URLs: 16 threads)")
    s.add_argument("--repetition", choices=["encoder", "parquet"], default=None,
                   help="column repetition flags as QuestDB's partition encoder writes them (default for "
                        "files QuestDB wrote) or as the Parquet schema says (default for other files)")
    add_storage_option(s)
    s.set_defaults(func=cmd_generate)

    s = sub.add_parser("inspect", help="show a _pm file: header, columns, snapshots, row groups and stats")
    s.add_argument("pm_file")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument("--snapshot", type=int, metavar="PARQUET_SIZE", help="pin the snapshot of this Parquet size")
    s.add_argument("--all", action="store_true", help="print every row group (default: first 20)")
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("verify", help="verify CRC and structure of _pm files (every snapshot)")
    s.add_argument("pm_files", nargs="+", metavar="PM_FILE")
    s.set_defaults(func=cmd_verify)

    s = sub.add_parser("prune", help="row groups of a table that may match a WHERE clause")
    s.add_argument("table_dir", metavar="TABLE_DIR")
    s.add_argument("--where", required=True, metavar="EXPR",
                   help="SQL WHERE clause, e.g. \"ts >= '2024-01-02' AND x > 5\", or a JSON DNF filter list, "
                        "e.g. '[[\"x\", \">\", 5]]'")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    add_storage_option(s)
    s.set_defaults(func=cmd_prune)

    s = sub.add_parser("scan", help="a query's row groups, exact count, byte ranges or first rows")
    s.add_argument("table", metavar="TABLE", help="a table directory or an fsspec URL (s3://bucket/table)")
    s.add_argument("--where", metavar="EXPR", help="SQL WHERE clause or JSON DNF filter list (default: every row)")
    s.add_argument("--columns", metavar="A,B", help="columns to read, comma-separated (default: all)")
    mode = s.add_mutually_exclusive_group()
    mode.add_argument("--count", action="store_true", help="the exact number of matching rows")
    mode.add_argument("--ranges", action="store_true", help="the byte ranges a read fetches, per chunk")
    mode.add_argument("--head", type=_non_negative, metavar="N", help="the first N matching rows")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    add_storage_option(s)
    s.set_defaults(func=cmd_scan)

    s = sub.add_parser("demo", help="build a sample table, generate _pm files, prune and read a query")
    s.add_argument("--dir", help="where to build the sample (default: a temporary directory)")
    s.add_argument("--spark", action="store_true", help="run the same story on a local Spark session")
    s.set_defaults(func=cmd_demo)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (PmError, OSError, KeyError) as e:
        print(f"qdbpm: error: {_one_line(e)}", file=sys.stderr)
        return 1


def command(argv=None) -> int:
    """The `qdbpm` command (its console script, `python -m qdbpm.cli`): `main` in a process of
    its own. numpy's OpenBLAS starts a thread per core when numpy loads, which spins for ~0.1 s
    on the cores qdbpm's own threads need: a Q6 `scan --count` of TPC-H took 0.66 s and 0.72 s of
    CPU, 0.62 s and 0.57 s without it (medians of 15 pairs). Set here, before any command loads
    numpy, and only where the user has not (`main` called from a program leaves its environment
    alone)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # our threads need the cores; qdbpm calls no BLAS
    return main(argv)


if __name__ == "__main__":
    sys.exit(command())
