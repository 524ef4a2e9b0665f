"""asv: XXH64 batch hashing, SBBF insert/probe (values x row groups), CRC-32. Seeded data."""

import numpy as np

from qdbpm import bloom
from qdbpm.bloom import _sbbf
from qdbpm.pm import crc

SEED = 20240601


def _filters(row_groups, num_bytes, values_per_filter, seed=SEED):
    """`row_groups` filters of one column packed back to back, each holding its own values."""
    rng = np.random.default_rng(seed)
    data = np.zeros(row_groups * num_bytes, np.uint8)
    for r in range(row_groups):
        bloom.insert_hashes(data[r * num_bytes:(r + 1) * num_bytes],
                            rng.integers(0, 2**64, values_per_filter, dtype=np.uint64, endpoint=False))
    offsets = np.arange(row_groups, dtype=np.int64) * num_bytes
    lengths = np.full(row_groups, num_bytes, np.int64)
    return data, offsets, lengths


class XXH64Batch:
    """hash_values over one million values of each Parquet physical type."""

    params = (["int32", "int64", "float64", "string", "flba16"],)
    param_names = ["kind"]

    def setup(self, kind):
        rng = np.random.default_rng(SEED)
        n = 1_000_000
        if kind == "string":
            import pyarrow as pa
            self.values = pa.array([f"user-{i:08d}" for i in rng.integers(0, 10**8, n).tolist()])
        elif kind == "flba16":
            self.values = rng.integers(0, 256, (n, 16), dtype=np.uint8)
        else:
            self.values = rng.integers(-(2**31), 2**31, n).astype(kind)

    def time_hash_values(self, kind):
        bloom.hash_values(self.values)


class SBBFProbe:
    """Pruning's shapes: values x row groups of one column, and the IN-list any-of."""

    params = ([1, 100, 10_000], [16, 256])
    param_names = ["values", "row_groups"]

    def setup(self, values, row_groups):
        # 16 KiB per filter holding 10,000 values: ~0.2 % false positives, like a sized Parquet filter.
        self.data, self.offsets, self.lengths = _filters(row_groups, 16384, 10_000)
        rng = np.random.default_rng(SEED + 1)
        self.hashes = rng.integers(0, 2**64, values, dtype=np.uint64, endpoint=False)
        self.out = np.empty((values, row_groups), np.uint8)
        self.any_out = np.empty(row_groups, np.uint8)

    def time_probe_many(self, values, row_groups):
        bloom.probe_many(self.hashes, self.data, self.offsets, self.lengths)

    def time_probe_any(self, values, row_groups):
        bloom.probe_many(self.hashes, self.data, self.offsets, self.lengths, any_of=True)

    def time_kernel_matrix(self, values, row_groups):
        # The nogil kernel alone, output preallocated: the rate behind the wrapper.
        _sbbf.probe_matrix(self.hashes, self.data, self.offsets, self.lengths, self.out)


class SBBFFilter:
    """One filter: insert a column, contains() on values (hashing included)."""

    def setup(self):
        rng = np.random.default_rng(SEED)
        self.values = rng.integers(0, 2**62, 1_000_000, dtype=np.int64)
        self.filter = bloom.SplitBlockBloomFilter.for_ndv(len(self.values), 0.01)
        self.filter.insert(self.values)
        self.probe_values = rng.integers(0, 2**62, 1_000_000, dtype=np.int64)

    def time_insert(self):
        bloom.SplitBlockBloomFilter(self.filter.num_bytes).insert(self.values)

    def time_contains(self):
        self.filter.contains(self.probe_values)


class CRC32:
    params = ([1, 64],)
    param_names = ["mebibytes"]

    def setup(self, mebibytes):
        self.buf = np.random.default_rng(SEED).integers(0, 256, mebibytes << 20, dtype=np.uint8)

    def time_crc32(self, mebibytes):
        crc.crc32(self.buf, 8, len(self.buf))


# The two-thread probe (GIL released) is bench_threads.ProbeThreads.
