"""asv: nogil kernels on two threads vs the same work run twice in one thread.

time_parallel well below time_loop shows the kernel releases the GIL and scales: up to 2x on two
free physical cores. On a shared 2-vCPU VM expect less: ALU-bound kernels (CRC, Thrift parse)
gain little when the two vCPUs are SMT siblings or the other one is busy; the latency-bound SBBF
probe gains most (bench_bloom.ProbeThreads). A GIL-holding kernel would make time_parallel
>= time_loop. Compare the pair within one run, never across machines.
"""

import threading

import numpy as np

from qdbpm.bloom import _sbbf
from qdbpm.pm import crc

from .bench_bloom import SEED, _filters
from .bench_thrift import footer_bytes, parquet_dataset


def _run_pair(fn):
    threads = [threading.Thread(target=fn, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class CRCThreads:
    """CRC-32 of two 8 MiB buffers (one per thread), 4 passes each."""

    def setup(self):
        rng = np.random.default_rng(SEED)
        self.bufs = [rng.integers(0, 256, 8 << 20, dtype=np.uint8) for _ in range(2)]

    def _work(self, i):
        b = self.bufs[i]
        for _ in range(4):
            crc.crc32(b, 0, len(b))

    def time_loop(self):
        self._work(0)
        self._work(1)

    def time_parallel(self):
        _run_pair(self._work)


class ThriftThreads:
    """The Thrift FileMetaData kernel on the 10,000-row-group footer, once per thread."""

    def setup_cache(self):
        parquet_dataset(10_000)

    def setup(self):
        _, self.offset, self.meta = footer_bytes(parquet_dataset(10_000))

    def _work(self, i):
        from qdbpm.parquet import _thrift

        _thrift.parse_file_metadata(self.meta, self.offset)

    def time_loop(self):
        self._work(0)
        self._work(1)

    def time_parallel(self):
        _run_pair(self._work)


class ProbeThreads:
    """SBBF probe matrix: 50,000 hashes x 64 filters of 16 KiB, half the filters per thread."""

    def setup(self):
        self.data, offsets, lengths = _filters(64, 16384, 10_000)
        self.hashes = np.random.default_rng(SEED + 2).integers(0, 2**64, 50_000, dtype=np.uint64, endpoint=False)
        half = len(offsets) // 2
        self.parts = [(offsets[:half].copy(), lengths[:half].copy()), (offsets[half:].copy(), lengths[half:].copy())]
        self.outs = [np.empty((len(self.hashes), half), np.uint8) for _ in range(2)]

    def _work(self, i):
        offsets, lengths = self.parts[i]
        _sbbf.probe_matrix(self.hashes, self.data, offsets, lengths, self.outs[i])

    def time_loop(self):
        self._work(0)
        self._work(1)

    def time_parallel(self):
        _run_pair(self._work)
