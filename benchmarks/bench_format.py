"""asv: opening, verifying and viewing `_pm` files."""

import os

import qdbpm
from qdbpm.pm.encoder import encode_file

from .datasets import synthetic_description, synthetic_pm


class OpenVerify:
    params = ([100, 10_000], [8, 64])
    param_names = ["row_groups", "columns"]

    def setup(self, row_groups, columns):
        self.path = synthetic_pm(row_groups, columns)

    def time_open_verify(self, row_groups, columns):
        qdbpm.open(self.path).close()

    def time_open_no_crc(self, row_groups, columns):
        qdbpm.open(self.path, verify=False).close()

    def time_chunks_column(self, row_groups, columns):
        with qdbpm.open(self.path, verify=False) as pm:
            pm.chunks["max_stat"][:, 0].max()


class Encode:
    params = ([100, 10_000],)
    param_names = ["row_groups"]

    def setup(self, row_groups):
        self.desc = synthetic_description(row_groups, 8)

    def time_encode_file(self, row_groups):
        encode_file(self.desc)


class GenerateReal:
    """qdbpm.generate (footer parse, encode, write, fsync, rename) of the pyarrow-written R x C
    files, and pq.read_metadata of the same file for the ratio (goal: generate >= 3x faster).
    (benchmarks/bench_generate.py, where present, covers generate in depth.)"""

    params = ([200, 10_000], [8, 1_000])
    param_names = ["row_groups", "columns"]

    def setup_cache(self):
        from .bench_prune import _build_shapes

        _build_shapes()

    def setup(self, row_groups, columns):
        import tempfile

        from .bench_prune import _shape_files

        self.parquet = _shape_files(row_groups, columns)[0]
        self.tmp = tempfile.mkdtemp(prefix="qdbpm-asv-")
        self.out = os.path.join(self.tmp, "_pm")

    def teardown(self, row_groups, columns):
        import shutil

        if hasattr(self, "tmp"):
            shutil.rmtree(self.tmp, ignore_errors=True)

    def time_generate(self, row_groups, columns):
        from qdbpm.sync.generate import generate

        generate(self.parquet, self.out, bloom=None)

    def time_pyarrow_read_metadata(self, row_groups, columns):
        import pyarrow.parquet as pq

        pq.read_metadata(self.parquet)
