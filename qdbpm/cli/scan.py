"""`qdbpm scan`: a query's decision (row groups, full ones marked), its exact count, the byte
ranges a read fetches, or its first rows; a progress bar on a terminal while it reads."""

from __future__ import annotations

import datetime as dt
import json
import math
import sys

import pyarrow as pa

from ..prune.filters import where_text
from ..table.table import open_table
from .storage import storage_options
from .progress import Progress


def _scan_progress(scan):
    """A progress bar on a terminal, over the bytes the scan fetches (released units)."""
    if not sys.stderr.isatty():
        return None
    bar = []

    def observe(event, n):
        if event == "plan" and n:
            bar[:] = [Progress(n, name="scan", unit="MiB", scale=1 << 20)]
        elif event == "release" and bar:
            bar[0].step(n=n)
    scan.observer = observe
    return bar


def _jsonable(v):
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    return str(v)  # Decimal, UUID, timedelta, ...


def _print_rows(names, rows, out, width=32):
    cells = [list(names)] + [["null" if v is None else str(v) for v in r] for r in rows]
    cells = [[c if len(c) <= width else c[: width - 3] + "..." for c in r] for r in cells]
    widths = [max(len(r[i]) for r in cells) for i in range(len(names))]
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")


def run_scan(args):
    columns = None if args.columns is None else [c.strip() for c in args.columns.split(",") if c.strip()]
    with open_table(args.table, storage_options=storage_options(args)) as table:
        scan = table.scan(where_text(args.where), columns, batch_rows=args.head or None)
        rgs = scan.row_groups()
        full = int(sum(rgs["full"].to_pylist()))
        if args.count:
            bar = _scan_progress(scan)
            fetched = []
            if bar is None:
                scan.observer = lambda event, n: fetched.append(n) if event == "release" else None
            n = scan.count()
            fetched = sum(fetched) if bar is None else (bar[0].done if bar else 0)
            if args.json:
                _dump({"count": n, "row_groups": rgs.num_rows, "full": full, "fetched_bytes": fetched})
            else:
                print(f"{n} rows match ({rgs.num_rows} row groups: {full} full, counted from _pm alone; "
                      f"{rgs.num_rows - full} partial, filtered from {fetched:,} bytes fetched)")
            return 0
        if args.ranges:
            br = scan.byte_ranges()
            chunks = br.to_pylist()
            requests = {(r["path"], r["offset"]): r["length"] for r in chunks}
            if args.json:
                _dump({"chunks": chunks, "requests": len(requests), "bytes": sum(requests.values())})
                return 0
            by_request = {}
            for r in chunks:
                by_request.setdefault((r["path"], r["offset"], r["length"]), []).append(f"{r['row_group']}:{r['column']}")
            for (path, off, ln), what in by_request.items():
                print(f"{path} [{off}, +{ln}) {' '.join(what)}")
            print(f"{len(requests)} requests, {sum(requests.values()):,} bytes, {len(chunks)} chunks of "
                  f"{rgs.num_rows} row groups")
            return 0
        if args.head is not None:
            bar = _scan_progress(scan)
            reader, batches, n = scan.to_reader(), [], 0
            try:
                while n < args.head:
                    try:
                        b = reader.read_next_batch()
                    except StopIteration:
                        break
                    batches.append(b)
                    n += b.num_rows
            finally:
                reader.close()
                if bar:
                    bar[0].close()
            t = pa.Table.from_batches(batches, reader.schema).slice(0, args.head)
            rows = [list(r.values()) for r in t.to_pylist()]
            if args.json:
                _dump({"columns": t.column_names, "rows": [[_jsonable(v) for v in r] for r in rows]})
            else:
                _print_rows(t.column_names, rows, sys.stdout)
            return 0
        # The decision alone: nothing but _pm read.
        total_rgs = sum(table.meta(p).row_group_count for p in table.partitions)
        total_rows = sum(int(table.meta(p).num_rows.sum()) for p in table.partitions)
        br = scan.byte_ranges()
        requests = {(p, o): n for p, o, n in zip(br["path"].to_pylist(), br["offset"].to_pylist(),
                                                 br["length"].to_pylist())}
        kept = rgs.drop_columns(["path"]).to_pylist()
        summary = {"partitions": len(table.partitions), "row_groups": total_rgs, "rows": total_rows,
                   "kept": kept, "full": full, "requests": len(requests), "fetch_bytes": sum(requests.values())}
    if args.json:
        _dump(summary)
        return 0
    by_part = {}
    for r in kept:
        by_part.setdefault(r["partition"], []).append(r)
    for p, rs in by_part.items():
        marks = ",".join(f"{r['row_group']}{'*' if r['full'] else ''}" for r in rs)
        print(f"{p or '.'}: row groups [{marks}] ({sum(r['num_rows'] for r in rs):,} rows)")
    print(f"kept {len(kept)} of {total_rgs} row groups ({full} full, marked *) in {len(by_part)} of "
          f"{len(table.partitions)} partitions: at most {sum(r['num_rows'] for r in kept):,} of {total_rows:,} rows; "
          f"reading them fetches {summary['fetch_bytes']:,} bytes in {len(requests)} requests")
    return 0


def _dump(obj):
    json.dump(obj, sys.stdout)
    sys.stdout.write("\n")
