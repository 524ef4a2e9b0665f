"""asv: `_pm` generation from a Parquet footer, against pyarrow reading the same footer.

Dataset: bench_thrift.parquet_dataset, a pyarrow-written file of R row groups x 8 columns (int64,
double, timestamp, string; two each), 100 rows per row group, cached in $QDBPM_BENCH_CACHE (default
~/.cache/qdbpm-bench). For R = 10,000 the footer is 8.4 MB and the `_pm` 5.3 MB.

  time_generate           generate(path, tmp_pm, bloom=None): read + parse the footer, encode,
                          write a temp file, fsync, rename over the previous _pm, fsync the dir
  time_generate_fresh     the same into a path with no _pm yet (the migration case: no old file
                          to unlink at the rename); every call writes a new path, all removed
                          in teardown
  time_encode             parse + encode in memory only (no file I/O)
  time_read_metadata      pq.read_metadata(path): what the ratio is taken against
  peakmem_generate

benchmarks/compare_generate.py prints the ratios (goal: generate >= 3x faster than
read_metadata).
"""

import itertools
import os
import shutil
import tempfile

from .bench_thrift import parquet_dataset


class Generate:
    params = ([100, 10_000],)
    param_names = ["row_groups"]
    # One call per sample, so every time_generate_fresh call gets a path of its own.
    number = 1
    repeat = (7, 15, 20.0)

    def setup(self, row_groups):
        self.path = parquet_dataset(row_groups)
        self.tmp = tempfile.mkdtemp(prefix="qdbpm-asv-gen-", dir=os.path.dirname(self.path))
        self.pm = os.path.join(self.tmp, "_pm")
        self.fresh = (os.path.join(self.tmp, f"_pm.{i}") for i in itertools.count())
        from qdbpm.sync.generate import generate

        generate(self.path, self.pm, bloom=None)  # warm the page cache and imports

    def teardown(self, row_groups):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def time_generate(self, row_groups):
        from qdbpm.sync.generate import generate

        generate(self.path, self.pm, bloom=None)

    def time_generate_fresh(self, row_groups):
        from qdbpm.sync.generate import generate

        generate(self.path, next(self.fresh), bloom=None)

    def time_encode(self, row_groups):
        from qdbpm.sync.generate import describe_footer
        from qdbpm.parquet.footer import read_footer
        from qdbpm.pm.encoder import encode_file

        encode_file(describe_footer(read_footer(self.path)))

    def time_read_metadata(self, row_groups):
        import pyarrow.parquet as pq

        pq.read_metadata(self.path)

    def peakmem_generate(self, row_groups):
        from qdbpm.sync.generate import generate

        generate(self.path, self.pm, bloom=None)
