"""asv: opening, verifying and viewing `_pm` files."""

import qdbpm
from qdbpm.writer import encode_file

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
