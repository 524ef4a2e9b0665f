"""Cold storage, same run, same server: qdbpm.read_table vs pyarrow.dataset on a selective query.

    python benchmarks/compare_cold.py [--days 30]

Starts SeaweedFS on loopback (tests/support/s3_server.py), uploads a trades table, and counts every
request each reader sends (GET, HEAD, LIST, and the object bytes) on the wire, through a loopback
proxy in front of the server (tests/support/s3_proxy.py).
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

import pyarrow.dataset as pads  # noqa: E402
import pyarrow.fs as pafs  # noqa: E402

import qdbpm  # noqa: E402
from qdbpm.cli.demo import build_trades  # noqa: E402
from qdbpm.prune.arrow import to_arrow  # noqa: E402
from qdbpm.sync.generate import generate  # noqa: E402
from support.s3_proxy import S3Proxy  # noqa: E402
from support.s3_server import SeaweedS3  # noqa: E402

QUERY = "ts BETWEEN '2024-01-15T10:00:00Z' AND '2024-01-15T13:59:59Z' AND sym = 'NVDA'"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="qdbpm-cold-")
    local = os.path.join(work, "table")
    paths = build_trades(local, days=args.days)
    for p in paths:
        generate(p)
    os.makedirs(os.path.join(work, "weed"))
    with SeaweedS3(root=os.path.join(work, "weed")) as server, S3Proxy(server.endpoint_url) as proxy:
        fs = server.filesystem()
        bucket = server.make_bucket("bench")
        for d, _, files in os.walk(local):
            for f in files:
                rel = os.path.relpath(os.path.join(d, f), local).replace(os.sep, "/")
                fs.put_file(os.path.join(d, f), f"{bucket}/t/{rel}")
        pred = qdbpm.parse(QUERY)
        rows = {}
        results = {}
        for name in ("qdbpm.read_table", "pyarrow.dataset"):
            times, counts = [], None
            for _ in range(args.repeat):
                proxy.reset()
                cfs = proxy.filesystem(server)
                t0 = time.perf_counter()
                if name == "qdbpm.read_table":
                    out = qdbpm.read_table(f"s3://{bucket}/t", columns=["ts", "sym", "price", "qty"], where=pred,
                                           filesystem=cfs)
                else:
                    handler = pafs.PyFileSystem(pafs.FSSpecHandler(cfs))
                    ds = pads.dataset(f"{bucket}/t", filesystem=handler, format="parquet")
                    out = ds.to_table(columns=["ts", "sym", "price", "qty"], filter=to_arrow(pred, ds.schema))
                times.append(time.perf_counter() - t0)
                counts = (proxy.requests_total(), proxy.bytes_out)
                rows[name] = out.num_rows
            results[name] = (statistics.median(times), *counts)
    total = sum(os.path.getsize(p) for p in paths)
    print(f"table: {len(paths)} partitions, {total / 1e6:.1f} MB; query: {QUERY}")
    print(f"{'reader':<20}{'rows':>7}{'requests':>14}{'bytes fetched':>15}{'median wall':>13}")
    for name, (t, n, b) in results.items():
        print(f"{name:<20}{rows[name]:>7}{n:>14}{b:>15,}{t * 1e3:>11.1f}ms")
    (tq, nq, bq), (tp, np_, bp) = results["qdbpm.read_table"], results["pyarrow.dataset"]
    print(f"ratios pyarrow/qdbpm: requests {np_ / max(nq, 1):.1f}x, bytes {bp / max(bq, 1):.1f}x, "
          f"wall {tp / tq:.1f}x")


if __name__ == "__main__":
    main()
