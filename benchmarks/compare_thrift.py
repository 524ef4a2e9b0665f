"""Standalone comparison, one core: qdbpm's footer reader vs pyarrow's read_metadata.

    python benchmarks/compare_thrift.py [--row-groups 10000] [--repeat 15]

On a pyarrow-written file of R row groups x 8 columns (int64 / double / timestamp / string,
100 rows each; cached, see bench_thrift.py) prints the median wall time of:
  * pq.read_metadata(path)                    parquet-cpp: FileMetaData objects
  * qdbpm.parquet.read_footer(path)           tail read + parse + checks -> ParquetFooter
  * qdbpm.parquet.parse_footer(footer bytes)  the same without the I/O
  * _thrift.parse_file_metadata(bytes)        the kernel alone
  * splice.append_footer(..., 1 row group)    re-emitting the footer with one more row group
  * ParquetFooter.append_footer               the same from a parsed footer (no walk over it)
and the ratios. Goal: read_footer <= 1/5 of read_metadata (generate as a whole >= 3x faster).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_thrift import footer_bytes, parquet_dataset  # noqa: E402
from datasets import median_seconds  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--row-groups", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)

    import pyarrow.parquet as pq

    from qdbpm.parquet import _thrift, compact as thrift
    from qdbpm.parquet.splice import append_footer
    from qdbpm.parquet.footer import parse_footer, read_footer

    path = parquet_dataset(args.row_groups)
    _, offset, meta = footer_bytes(path)
    small = footer_bytes(parquet_dataset(100))[2]
    one_rg = thrift.decode_struct(small)[0]
    one_rg.get(4).values = one_rg.get(4).values[:1]
    one_rg_meta = thrift.encode_struct(one_rg)
    footer = read_footer(path)
    print(f"{path}: {footer.row_group_count} row groups x {footer.column_count} columns, "
          f"footer {len(meta):,} bytes")

    rows = [
        ("pq.read_metadata(path)", median_seconds(lambda: pq.read_metadata(path), args.repeat)),
        ("read_footer(path)", median_seconds(lambda: read_footer(path), args.repeat)),
        ("parse_footer(bytes)", median_seconds(lambda: parse_footer(meta, footer_offset=offset), args.repeat)),
        ("kernel only", median_seconds(lambda: _thrift.parse_file_metadata(meta, offset), args.repeat)),
        ("append_footer(+1 row group)",
         median_seconds(lambda: append_footer(meta, one_rg_meta, offset_delta=10 ** 9), args.repeat)),
        ("ParquetFooter.append_footer",
         median_seconds(lambda: footer.append_footer(one_rg_meta, 10 ** 9), args.repeat)),
    ]
    base = rows[0][1]
    for name, t in rows:
        print(f"  {name:30s} {t * 1e3:9.2f} ms   {base / t:6.1f}x vs read_metadata")
    ratio = base / rows[1][1]
    print(f"read_metadata / read_footer = {ratio:.1f} (goal >= 5)")
    return 0 if ratio >= 5 else 1


if __name__ == "__main__":
    sys.exit(main())
