"""Page decompression (`parquet/codecs.py`): every codec decodes a page to exactly the size its
header says, or raises ParquetFormatError, as pyarrow's reader does ("didn't decompress to expected
size"). Arrow's one-shot gzip and brotli codecs return a buffer of the size asked for whatever the
page decodes to: a header claiming more than its page holds read the bytes they never wrote."""

import numpy as np
import pyarrow as pa
import pytest

from qdbpm.errors import ParquetFormatError
from qdbpm.parquet import codecs
from qdbpm.pm import layout as L

CODECS = {"gzip": L.CODEC_GZIP, "brotli": L.CODEC_BROTLI, "zstd": L.CODEC_ZSTD, "snappy": L.CODEC_SNAPPY,
          "lz4_raw": L.CODEC_LZ4_RAW}


def _page(name, n, seed):
    rng = np.random.default_rng(seed)
    data = (rng.integers(0, 1000, n // 8 + 1) * 7919).astype(np.int64).view(np.uint8)[:n]
    data = np.ascontiguousarray(data)
    return data, np.frombuffer(pa.Codec(name).compress(data, asbytes=True), np.uint8)


@pytest.mark.parametrize("name", sorted(CODECS))
@pytest.mark.parametrize("n", [0, 1, 700, 70000, 400000])
def test_a_page_decodes_to_its_bytes_and_to_no_other_size(name, n):
    data, payload = _page(name, n, n)
    assert codecs.decompress(CODECS[name], payload, n).tobytes() == data.tobytes()
    for size in {max(0, n - 1), n + 1, 2 * n + 8, 2 ** 31 - 1} - {n}:
        with pytest.raises(ParquetFormatError):
            codecs.decompress(CODECS[name], payload, size)


@pytest.mark.parametrize("name", ["gzip", "brotli"])
def test_what_arrow_s_one_shot_codec_lets_pass_is_an_error(name):
    """The reason gzip and brotli pages are read as streams: the one-shot codec hands back the
    size it was asked for from a page that decodes to less."""
    data, payload = _page(name, 8000, 3)
    assert pa.Codec(name).decompress(payload, decompressed_size=8800, asbytes=False).size == 8800
    with pytest.raises(ParquetFormatError, match="decompressed to 8000 bytes, its header says 8800"):
        codecs.decompress(CODECS[name], payload, 8800)


@pytest.mark.parametrize("name", ["gzip", "brotli"])
def test_a_corrupt_stream_is_a_format_error(name):
    data, payload = _page(name, 20000, 5)
    bad = payload.copy()
    bad[len(bad) // 2:] ^= 0x5A
    with pytest.raises(ParquetFormatError):
        codecs.decompress(CODECS[name], bad, 20000)
    with pytest.raises(ParquetFormatError):
        codecs.decompress(CODECS[name], payload[:len(payload) // 2], 20000)
