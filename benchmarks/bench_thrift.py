"""asv: Parquet footer parsing (the `_thrift` kernel), appending row groups, footer synthesis.

The datasets are pyarrow-written files cached in $QDBPM_BENCH_CACHE (default
~/.cache/qdbpm-bench), built on first use: R row groups x 8 columns (int64, double, timestamp,
string; two each), 100 rows per row group.
"""

import io
import os

import numpy as np

CACHE = os.environ.get("QDBPM_BENCH_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "qdbpm-bench"))


def parquet_dataset(row_groups: int, rows: int = 100) -> str:
    """Path of the cached R x 8 file, written once (atomically) by pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.path.join(CACHE, "parquet", f"rg{row_groups}x8_{rows}.parquet")
    if os.path.exists(path):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    n = row_groups * rows
    rng = np.random.default_rng(0)
    table = pa.table({
        "i1": np.arange(n, dtype=np.int64),
        "i2": rng.integers(0, 1000, n),
        "d1": rng.random(n),
        "d2": rng.normal(size=n),
        "ts1": pa.array(np.arange(n, dtype=np.int64) * 1_000_000, pa.timestamp("us")),
        "ts2": pa.array(np.arange(n, dtype=np.int64) * 1_000, pa.timestamp("ns", "UTC")),
        "s1": pa.array([f"s{i % 97}" for i in range(n)]),
        "s2": pa.array([f"str{i % 1013}" for i in range(n)]),
    })
    tmp = f"{path}.{os.getpid()}.tmp"
    pq.write_table(table, tmp, row_group_size=rows)
    os.replace(tmp, path)
    return path


def footer_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[-8:-4], "little")
    return data, len(data) - 8 - n, data[-8 - n : -8]


class ParseFooter:
    params = ([100, 10_000],)
    param_names = ["row_groups"]

    def setup(self, row_groups):
        self.path = parquet_dataset(row_groups)
        _, self.offset, self.meta = footer_bytes(self.path)

    def time_read_footer(self, row_groups):
        from qdbpm.parquet.footer import read_footer

        read_footer(self.path)

    def time_parse_footer(self, row_groups):
        from qdbpm.parquet.footer import parse_footer

        parse_footer(self.meta, footer_offset=self.offset)

    def time_kernel(self, row_groups):
        from qdbpm.parquet import _thrift

        _thrift.parse_file_metadata(self.meta, self.offset)

    def time_pyarrow_read_metadata(self, row_groups):
        import pyarrow.parquet as pq

        pq.read_metadata(self.path)

    def peakmem_read_footer(self, row_groups):
        from qdbpm.parquet.footer import read_footer

        read_footer(self.path)


class LazyArrays:
    """The deprecated min/max are read on first use, in a second kernel pass."""

    params = ([10_000],)
    param_names = ["row_groups"]

    def setup(self, row_groups):
        from qdbpm.parquet.footer import read_footer

        self.path = parquet_dataset(row_groups)
        self.footer = read_footer(self.path)

    def time_stat_legacy(self, row_groups):
        self.footer.__dict__.pop("stat_legacy", None)
        self.footer.stat_legacy

    def time_sorting_columns(self, row_groups):
        self.footer.__dict__.pop("sorting_columns", None)
        self.footer.sorting_columns


class AppendFooter:
    """Old row groups are spliced as raw bytes: the cost must not grow with their number."""

    params = ([100, 10_000],)
    param_names = ["row_groups"]

    def setup(self, row_groups):
        import pyarrow.parquet as pq

        from qdbpm.parquet.footer import read_footer

        _, _, self.meta = footer_bytes(parquet_dataset(row_groups))
        self.footer = read_footer(parquet_dataset(row_groups))
        b = io.BytesIO()
        pq.write_table(pq.read_table(parquet_dataset(100)).slice(0, 100), b)
        data = b.getvalue()
        n = int.from_bytes(data[-8:-4], "little")
        self.new_meta = data[-8 - n : -8]
        self.delta = 10 ** 9

    def time_append_one_row_group(self, row_groups):
        from qdbpm.parquet.splice import append_footer

        append_footer(self.meta, self.new_meta, offset_delta=self.delta)

    def time_append_from_parsed_footer(self, row_groups):
        self.footer.append_footer(self.new_meta, self.delta)


class Synthesize:
    params = ([1, 100],)
    param_names = ["row_groups_fetched"]

    def setup(self, fetched):
        from qdbpm.parquet.footer import read_footer

        self.footer = read_footer(parquet_dataset(10_000))
        self.rgs = list(range(0, 10_000, 10_000 // fetched))[:fetched]
        self.cols = [0, 3, 6]
        self.starts = np.arange(len(self.rgs) * len(self.cols), dtype=np.int64).reshape(len(self.rgs), -1) * 1000 + 4

    def time_synthesize(self, fetched):
        self.footer.synthesize(self.rgs, self.cols, self.starts)
