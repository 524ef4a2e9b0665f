"""ZSTD pages: small ones decoded by zstandard with a per-thread context (codecs._zstd_small), the
rest and every odd frame by Arrow's codec. Whatever the payload, `codecs.decompress` gives what Arrow's
codec gives: the same bytes, or a ParquetFormatError where Arrow fails. Without the GIL, the chunk
walk decodes ZSTD pages through zstandard's libzstd (`_zstd.pyx`): the same answers, or none."""

import random
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

import qdbpm
from qdbpm.errors import ParquetFormatError
from qdbpm.parquet import _zstd, codecs
from qdbpm.pm import layout as L
from support.parquet_oracle import arrow_decompressed

def _arrow(payload, size):
    """Arrow's answer: the bytes, or the exception class ours raises where Arrow fails."""
    got = arrow_decompressed("zstd", payload, size)
    return ParquetFormatError if got is None else got


def _ours(payload, size):
    try:
        return bytes(codecs.decompress(L.CODEC_ZSTD, payload, size))
    except ParquetFormatError:
        return ParquetFormatError


def _raw(rng, n):
    kind = rng.randint(0, 2)
    if kind == 0:
        return np.round(np.random.default_rng(rng.randint(0, 99)).lognormal(4, 1, n // 8 + 1), 2).tobytes()[:n]
    if kind == 1:
        return bytes(rng.getrandbits(8) for _ in range(n))
    return b"abc" * (n // 3) + b"x" * (n % 3)


def _payloads(rng, raw):
    """Well-formed and odd ZSTD payloads of `raw`: (payload, the size a page header would say)."""
    one = zstandard.ZstdCompressor(level=rng.choice([1, 9, 19])).compress(raw)
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(raw)
    checked = zstandard.ZstdCompressor(write_checksum=True).compress(raw)
    cases = [(one, len(raw)), (no_size, len(raw)), (checked, len(raw)), (pa.Codec("zstd").compress(raw, asbytes=True), len(raw)),
             (one + one, 2 * len(raw)),  # two frames: Arrow decodes both
             (one + b"\x00junk", len(raw)),  # trailing bytes
             (one, len(raw) + 1), (one, max(len(raw) - 1, 0)),  # a header that says another size
             (one[: max(1, len(one) // 2)], len(raw))]  # cut short
    bad = bytearray(checked)
    if len(bad) > 12:
        bad[len(bad) // 2] ^= 0x5A  # a flipped byte: the checksum or the frame fails
    cases.append((bytes(bad), len(raw)))
    return cases


@pytest.mark.parametrize("seed", range(3))
def test_every_payload_decodes_as_arrows_codec_decodes_it(seed):
    rng = random.Random(seed)
    for n in [0, 1, 7, 100, 1300, 5000, codecs.ZSTD_SMALL - 1, codecs.ZSTD_SMALL, 3 * codecs.ZSTD_SMALL]:
        raw = _raw(rng, n)
        for payload, size in _payloads(rng, raw):
            want = _arrow(payload, size)
            assert _ours(payload, size) == want, (n, size, len(payload))


def _in_threads(work, k):
    threads = [threading.Thread(target=work) for _ in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _kernel(payload, size):
    out = np.full(size, 0xAB, np.uint8)
    return out.tobytes() if _zstd.decode(np.frombuffer(payload, np.uint8), out) else ParquetFormatError


def test_the_decoder_of_the_python_walk_is_found_here():
    """zstandard's own libzstd (its CFFI extension exports it): the worker's path is taken, not
    skipped, and decodes with the version the Python walk decodes with."""
    assert _zstd.available() and _zstd.version() == _zstd.WANT
    assert _zstd.WANT == int("%d%02d%02d" % zstandard.ZSTD_VERSION)
    assert L.CODEC_ZSTD in codecs.SPLIT_CODECS


def test_a_library_of_another_version_is_not_taken():
    """A libzstd of any other version, the system's included, is passed over: corrupt frames
    may decode otherwise there (1.5.4 against 1.5.7: two bytes of a mutated page)."""
    assert _zstd._load([b"no-such-libzstd.so"], _zstd.WANT) is None
    assert _zstd._load(list(_zstd.SYSTEM_NAMES) + _zstd._candidates(), _zstd.WANT + 1) is None
    assert _zstd._load(_zstd._candidates(), _zstd.WANT) is not None  # ready again, as at import
    assert _zstd.available()


@pytest.mark.parametrize("seed", range(3))
def test_the_kernel_decodes_every_payload_as_arrows_codec(seed):
    rng = random.Random(100 + seed)
    for n in [0, 1, 7, 100, 1300, 5000, 70_000, 300_000]:
        raw = _raw(rng, n)
        for payload, size in _payloads(rng, raw):
            assert _kernel(payload, size) == _arrow(payload, size), (n, size, len(payload))


def test_the_kernel_decodes_from_threads_at_once():
    """Decoding contexts come from a shared free list: threads never share one."""
    rng = random.Random(9)
    raws = [_raw(rng, rng.randint(1, 200_000)) for _ in range(24)]
    payloads = [zstandard.ZstdCompressor(level=rng.choice([1, 3, 19])).compress(r) for r in raws]
    errors = []

    def work():
        for _ in range(20):
            for r, p in zip(raws, payloads):
                if _kernel(p, len(r)) != r:
                    errors.append(len(r))

    _in_threads(work, 6)
    assert not errors


def test_small_pages_take_zstandard_and_odd_frames_fall_back():
    raw = np.arange(100, dtype=np.int64).tobytes()
    one = zstandard.ZstdCompressor().compress(raw)
    assert bytes(codecs._zstd_small(one, len(raw))) == raw
    assert codecs._zstd_small(zstandard.ZstdCompressor(write_content_size=False).compress(raw), len(raw)) is None
    assert codecs._zstd_small(one + one, 2 * len(raw)) is None
    assert codecs._zstd_small(one + b"x", len(raw)) is None
    assert codecs._zstd_small(b"not zstd at all", len(raw)) is None
    assert codecs._zstd_small(one, len(raw) + 8) is None


def test_threads_decode_with_their_own_context():
    rng = random.Random(5)
    raws = [_raw(rng, rng.randint(1, 20_000)) for _ in range(40)]
    payloads = [zstandard.ZstdCompressor(level=3).compress(r) for r in raws]
    errors = []

    def work():
        try:
            for _ in range(30):
                for r, p in zip(raws, payloads):
                    assert bytes(codecs.decompress(L.CODEC_ZSTD, p, len(r))) == r
        except AssertionError as e:  # pragma: no cover - reported below
            errors.append(e)

    _in_threads(work, 4)
    assert not errors


def test_small_zstd_pages_read_as_pyarrow_reads_them(tmp_path):
    # many small pages and dictionaries, every kind of column the direct path builds
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    rng = np.random.default_rng(11)
    n = 6000
    t = pa.table({"i": pa.array(rng.integers(-50, 50, n)),
                  "f": pa.array(rng.random(n), mask=rng.random(n) < 0.1),
                  "s": pa.array([None if i % 7 == 0 else f"v{i % 37}" for i in range(n)]),
                  "u": pa.array(rng.integers(0, 9, n), pa.int8())})
    for level in (1, 9):
        d = tmp_path / f"p{level}"
        d.mkdir()
        pq.write_table(t, d / "data.parquet", row_group_size=500, compression="zstd", compression_level=level,
                       data_page_size=1024)
        qdbpm.generate(str(d / "data.parquet"))
    cols = ["i", "f", "s", "u"]
    f = pc.field
    for where, expr in [("i > 10", f("i") > 10), ("s = 'v3'", f("s") == "v3"),
                        ("f < 0.5 AND u IN (1, 2)", (f("f") < 0.5) & f("u").isin([1, 2])), (None, None)]:
        got = qdbpm.read_table(str(tmp_path), cols, where)
        want = ds.dataset(str(tmp_path), format="parquet").to_table(columns=cols, filter=expr)
        assert got.num_rows and got.equals(want), where
