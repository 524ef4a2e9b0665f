"""asv: the Snappy page kernel (qdbpm/parquet/_snappy.pyx) side by side with Arrow's codec, whole
pages and a prefix (a read that keeps rows up to a tenth of the page: `pages.split_chunk`'s upto);
and small ZSTD pages through `codecs.decompress` (zstandard, a context per thread) against
Arrow's codec, which makes a context per call.

Pages of 1 MiB built in memory, three shapes: int64 prices as TPC-H's l_extendedprice holds them
(short literals and copies), English-like text (l_comment), random bytes (one literal per 64 KiB).
"""

import numpy as np
import pyarrow as pa

from qdbpm.parquet import _snappy, codecs
from qdbpm.pm import layout as L

SIZE = 1 << 20


def _page(shape):
    rng = np.random.default_rng(0)
    if shape == "prices":
        return rng.integers(90_000, 10_000_000, SIZE // 8).astype(np.int64).tobytes()
    if shape == "text":
        words = [b"furiously", b"quickly", b"regular", b"deposits", b"sleep", b"the", b"among", b"ironic", b" "]
        return b"".join(words[k] for k in rng.integers(0, len(words), SIZE))[:SIZE]
    return rng.integers(0, 256, SIZE, dtype=np.uint8).tobytes()


class SnappyPage:
    params = ["prices", "text", "random"]
    param_names = ["shape"]

    def setup(self, shape):
        self.codec = pa.Codec("snappy")
        self.block = np.frombuffer(self.codec.compress(_page(shape), asbytes=True), np.uint8)
        self.out = np.empty(SIZE, np.uint8)

    def time_qdbpm_whole(self, shape):
        _snappy.decode(self.block, self.out)

    def time_qdbpm_tenth(self, shape):
        _snappy.decode(self.block, self.out, SIZE // 10)

    def time_arrow_whole(self, shape):
        self.codec.decompress(self.block, decompressed_size=SIZE, asbytes=False)


class ZstdSmallPage:
    """One page of rounded prices (doubles, as a trades table holds them) at ZSTD level 9 (QuestDB's
    default codec and level), 1,280 B and 16,000 B decoded."""

    params = [1_280, 16_000]
    param_names = ["bytes"]

    def setup(self, n):
        self.codec = pa.Codec("zstd", 9)
        raw = np.round(np.random.default_rng(0).lognormal(4.5, 0.4, n // 8), 2).tobytes()
        self.size, self.payload = len(raw), self.codec.compress(raw, asbytes=True)

    def time_qdbpm(self, n):
        codecs.decompress(L.CODEC_ZSTD, self.payload, self.size)

    def time_arrow(self, n):
        self.codec.decompress(self.payload, decompressed_size=self.size, asbytes=False)
