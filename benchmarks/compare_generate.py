"""Standalone comparison, one core: qdbpm.generate vs pyarrow's read_metadata on the same file.

    python benchmarks/compare_generate.py [--row-groups 10000] [--repeat 15]

On a pyarrow-written file of R row groups x 8 columns (int64 / double / timestamp / string,
100 rows each; cached, see bench_thrift.py) prints the median wall time (rounds interleaved, so
drift on a shared machine hits every contender alike; garbage collected before each sample) of:
  * pq.read_metadata(path)                 parquet-cpp: FileMetaData objects
  * generate(path, new path, bloom=None)   fresh `_pm` (the migration case): read + parse the
                                           footer, encode, temp file, fsync, rename, fsync dir
  * generate(path, same path, bloom=None)  rebuild: as above, the rename also unlinks the old _pm
  * parse + encode in memory               read_footer + describe_footer + encode_file, no I/O
  * read_footer(path)                      the footer parse alone
and the ratios. Goal: generate >= 3x faster than read_metadata; the exit status is 0 when the
fresh generation meets it (rebuilds are shown too; they pay for freeing the old file's blocks).
"""

import argparse
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_thrift import parquet_dataset  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--row-groups", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=15, help="samples per contender (at least 7)")
    args = ap.parse_args(argv)
    repeat = max(7, args.repeat)

    import pyarrow.parquet as pq

    from qdbpm.sync.generate import describe_footer, generate
    from qdbpm.parquet.footer import read_footer
    from qdbpm.pm.encoder import encode_file

    path = parquet_dataset(args.row_groups)
    tmp = tempfile.mkdtemp(prefix="qdbpm-cmp-gen-", dir=os.path.dirname(path))
    same = os.path.join(tmp, "_pm")
    fresh = os.path.join(tmp, "_pm.fresh")
    try:
        size = generate(path, same, bloom=None)

        def fresh_prepare():
            if os.path.exists(fresh):
                os.unlink(fresh)  # not timed: a migration writes where no _pm exists yet

        contenders = [
            ("pq.read_metadata(path)", None, lambda: pq.read_metadata(path)),
            ("generate -> new _pm (fresh)", fresh_prepare, lambda: generate(path, fresh, bloom=None)),
            ("generate -> same _pm (rebuild)", None, lambda: generate(path, same, bloom=None)),
            ("parse + encode, no I/O", None, lambda: encode_file(describe_footer(read_footer(path)))),
            ("read_footer(path)", None, lambda: read_footer(path)),
        ]
        times = {name: [] for name, _, _ in contenders}
        for _, prep, fn in contenders:  # warm up
            if prep:
                prep()
            fn()
        for _ in range(repeat):
            for name, prep, fn in contenders:
                if prep:
                    prep()
                gc.collect()
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    med = {name: statistics.median(v) for name, v in times.items()}
    base = med["pq.read_metadata(path)"]
    print(f"{path}: {args.row_groups} row groups x 8 columns, _pm {size:,} bytes; medians of {repeat} runs")
    for name, t in med.items():
        print(f"  {name:34s} {t * 1e3:9.2f} ms   {base / t:5.2f}x vs read_metadata")
    fresh_ratio = base / med["generate -> new _pm (fresh)"]
    rebuild_ratio = base / med["generate -> same _pm (rebuild)"]
    print(f"read_metadata / generate = {fresh_ratio:.2f} fresh, {rebuild_ratio:.2f} rebuild (goal >= 3)")
    return 0 if fresh_ratio >= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
