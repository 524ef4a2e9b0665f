"""Scans, same run, same data: qdbpm vs pyarrow.dataset on S3 (SeaweedFS on loopback), vs DuckDB
locally, and count() vs DuckDB count(*).

    python benchmarks/compare_scan.py [--quick] [--partitions 30,300] [--repeat N]

Tables: daily partitions of synthetic trades (qdbpm.cli.demo.build_trades; --quick: a quarter of
the rows, same row groups per day), `_pm` generated, uploaded to SeaweedFS
(tests/support/s3_server.py). Queries: a selective one (four hours of one day and one symbol)
and a broad one (a price band every row group may hold). Readers:

  S3     qdbpm (Table.scan(...).to_table() when Table has scan, else read_table) vs
         pyarrow.dataset over the same s3fs filesystem (FSSpecHandler) with the same filter, and
         qdbpm's decision handed to pyarrow (to_dataset + Dataset.to_table with the filter).
         Requests (GET, HEAD, LIST) and object bytes are counted on the wire by a loopback proxy
         in front of the server (tests/support/s3_proxy.py) in one run of each reader, whatever
         its S3 client; wall is timed straight to the server, the median of
         --repeat runs, each from a fresh filesystem and table (nothing cached between runs).
  local  the same query, qdbpm vs DuckDB's read_parquet over the files (threads=1 and default),
         and DuckDB over to_dataset.
  count  Scan.count() of a time range (when Scan has count; table open, `_pm` cached) vs DuckDB
         count(*) with its Parquet metadata cache on (warmed first).

Goals (issue 14), printed met / MISSED: on 300 partitions, the selective query fetches >= 10x
fewer bytes and takes >= 3x less wall than pyarrow.dataset on S3; count >= 20x faster than DuckDB.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, ".."))

import duckdb  # noqa: E402
import pyarrow.dataset as pads  # noqa: E402
import pyarrow.fs as pafs  # noqa: E402

import qdbpm  # noqa: E402
from benchmarks.harness import timed_calls  # noqa: E402
from qdbpm.cli.demo import build_trades  # noqa: E402
from qdbpm.prune.arrow import to_arrow  # noqa: E402
from qdbpm.sync.generate import generate  # noqa: E402
from qdbpm.table.dataset import to_dataset  # noqa: E402
from support.s3_proxy import S3Proxy  # noqa: E402
from support.s3_server import SeaweedS3  # noqa: E402

COLUMNS = ["ts", "sym", "price", "qty"]
QUERIES = {
    "selective": "ts BETWEEN '2024-01-15T10:00:00Z' AND '2024-01-15T13:59:59Z' AND sym = 'NVDA'",
    "broad": "price BETWEEN 120 AND 125",
}
COUNT_QUERY = "ts BETWEEN '2024-01-05T06:30:00Z' AND '2024-01-25T17:45:00Z'"
def qdbpm_read(root, fs, sql):
    with qdbpm.open_table(root, fs) as table:
        return table.scan(sql, COLUMNS).to_table()


def pyarrow_read(root, fs, sql):
    handler = pafs.PyFileSystem(pafs.FSSpecHandler(fs)) if fs is not None else None
    path = fs._strip_protocol(root) if fs is not None else root  # pyarrow wants the bare bucket/key
    ds = pads.dataset(path, filesystem=handler, format="parquet", partitioning=None)
    return ds.to_table(columns=COLUMNS, filter=to_arrow(qdbpm.parse(sql), ds.schema))


def handoff_read(root, fs, sql):
    with qdbpm.open_table(root, fs, partitioning=None) as table:
        ds = to_dataset(table, table.prune_masks(sql))
        return ds.to_table(columns=COLUMNS, filter=to_arrow(qdbpm.parse(sql), ds.schema))


def timed(fn, repeat):
    """(median seconds, last result)."""
    times, out = timed_calls(fn, repeat)
    return statistics.median(times), out


def s3_rows(server, proxy, remote, sql, repeat):
    rows = {}
    for name, fn in (("qdbpm", qdbpm_read), ("pyarrow.dataset", pyarrow_read), ("to_dataset+pyarrow", handoff_read)):
        proxy.reset()
        fn(remote, proxy.filesystem(server), sql)  # counted on the wire, once
        counts = (proxy.requests_total(), proxy.bytes_out)
        # timed straight to the server: the proxy's own per-request cost stays out of the wall
        wall, out = timed(lambda: fn(remote, server.filesystem(), sql), repeat)
        rows[name] = (out.num_rows, *counts, wall)
    return rows


def local_rows(local, sql, repeat):
    glob = os.path.join(local, "*", "data.parquet")
    where = sql  # the same text: DuckDB casts '...Z' to TIMESTAMPTZ exactly
    out = {}
    out["qdbpm"] = timed(lambda: qdbpm_read(local, None, sql).num_rows, repeat)
    for threads in (1, None):
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        if threads:
            con.execute(f"SET threads TO {threads}")
        q = f"SELECT {', '.join(COLUMNS)} FROM read_parquet('{glob}', hive_partitioning = false) WHERE {where}"
        # Arrow out, as qdbpm hands back (fetchall would add a Python tuple per row to DuckDB's side)
        out[f"duckdb (threads={threads or 'default'})"] = timed(lambda: con.sql(q).to_arrow_table().num_rows, repeat)

    def duck_ds():
        with qdbpm.open_table(local, partitioning=None) as table:
            con = duckdb.connect()
            con.execute("SET TimeZone = 'UTC'")
            con.register("ds", to_dataset(table, table.prune_masks(sql)))
            return con.sql(f"SELECT {', '.join(COLUMNS)} FROM ds WHERE {where}").to_arrow_table().num_rows

    out["duckdb over to_dataset"] = timed(duck_ds, repeat)
    return out


def count_rows(local, repeat):
    glob = os.path.join(local, "*", "data.parquet")
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET parquet_metadata_cache = true")
    q = f"SELECT count(*) FROM read_parquet('{glob}', hive_partitioning = false) WHERE {COUNT_QUERY}"
    con.execute(q).fetchall()  # warm the metadata cache
    duck = timed(lambda: con.execute(q).fetchall()[0][0], max(repeat, 5))
    with qdbpm.open_table(local) as table:
        table.scan(COUNT_QUERY, ["ts"]).count()  # `_pm` mapped and stats decoded, as DuckDB's cache
        mine = timed(lambda: table.scan(COUNT_QUERY, ["ts"]).count(), max(repeat, 5))
    return mine, duck


def build(work, days, quick):
    local = os.path.join(work, f"t{days}")
    kw = {"rows_per_day": 12_000, "row_group": 1_000} if quick else {}
    paths = build_trades(local, days=days, **kw)
    for p in paths:
        generate(p)
    return local, paths


def upload(fs, local, remote):
    for d, _, files in os.walk(local):
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), local).replace(os.sep, "/")
            fs.put_file(os.path.join(d, f), f"{remote}/{rel}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a quarter of the rows, one run per reader")
    ap.add_argument("--partitions", default="30,300")
    ap.add_argument("--repeat", type=int, default=None, help="runs per reader (default 3, --quick 1)")
    args = ap.parse_args()
    repeat = args.repeat or (1 if args.quick else 3)
    work = tempfile.mkdtemp(prefix="qdbpm-scan-")
    os.makedirs(os.path.join(work, "weed"))
    goals = []
    print(f"qdbpm reader: Table.scan().to_table(); repeat={repeat}")
    with SeaweedS3(root=os.path.join(work, "weed")) as server, S3Proxy(server.endpoint_url) as proxy:
        bucket = server.make_bucket("bench")
        for days in [int(x) for x in args.partitions.split(",")]:
            t0 = time.perf_counter()
            local, paths = build(work, days, args.quick)
            remote = f"{bucket}/t{days}"
            upload(server.filesystem(), local, remote)
            total = sum(os.path.getsize(p) for p in paths)
            print(f"\n== {days} partitions, {total / 1e6:.1f} MB of Parquet (built and uploaded in "
                  f"{time.perf_counter() - t0:.0f} s)")
            for qname, sql in QUERIES.items():
                print(f"-- {qname}: {sql}")
                s3 = s3_rows(server, proxy, f"s3://{remote}", sql, repeat)
                print(f"  {'S3 reader':<22}{'rows':>9}{'reqs':>7}{'bytes':>14}{'wall':>11}")
                for name, (n, req, nbytes, wall) in s3.items():
                    print(f"  {name:<22}{n:>9}{req:>7}{nbytes:>14,}{wall * 1e3:>9.0f}ms")
                (_, rq, bq, tq), (_, rp, bp, tp) = s3["qdbpm"], s3["pyarrow.dataset"]
                print(f"  pyarrow.dataset / qdbpm: requests {rp / max(rq, 1):.1f}x, bytes {bp / max(bq, 1):.1f}x, "
                      f"wall {tp / tq:.1f}x")
                if days == 300 and qname == "selective":
                    goals.append(("300-partition selective: bytes vs pyarrow.dataset on S3", bp / max(bq, 1), 10))
                    goals.append(("300-partition selective: wall vs pyarrow.dataset on S3", tp / tq, 3))
                loc = local_rows(local, sql, repeat)
                tq_local = loc["qdbpm"][0]
                for name, (wall, n) in loc.items():
                    print(f"  local {name:<26}{n:>9} rows {wall * 1e3:>9.1f}ms  ({wall / tq_local:.1f}x qdbpm)")
            (tq, nq), (td, nd) = count_rows(local, repeat)
            assert nq == nd, (nq, nd)
            print(f"-- count: {COUNT_QUERY}\n  qdbpm Scan.count {nq} in {tq * 1e3:.2f}ms; DuckDB count(*) "
                  f"(metadata cache on) {nd} in {td * 1e3:.2f}ms: {td / tq:.1f}x")
            if days == 300:
                goals.append(("300-partition count() vs DuckDB count(*), cache on", td / tq, 20))
    print("\nGoals:")
    for name, ratio, want in goals:
        print(f"  {name}: {ratio:.1f}x (goal >= {want}x) {'met' if ratio >= want else 'MISSED'}")


if __name__ == "__main__":
    main()
