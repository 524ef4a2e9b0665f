"""Split-block bloom filters: spec vectors, parquet-java / pyarrow / DuckDB filters, the Thrift
header codec, sizing, batch probes, and agreement with the pure-Python reference."""

import importlib
import io
import math
import os
import threading
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import ref_bloom
from qdbpm import bloom
from qdbpm.bloom.hashing import hash_values
from qdbpm.bloom.sbbf import SplitBlockBloomFilter, expected_fpp, optimal_num_bytes, probe_many
from qdbpm.parquet.bloom_header import bloom_header_bytes, parse_bloom_header, read_parquet_bloom
from qdbpm.errors import ParquetFormatError

from conftest import PEER_DATA, read_bytes  # noqa: E402

XXHASH_BIN = os.path.join(PEER_DATA, "bloom_filter.xxhash.bin")

INT64_0_9 = [24, 130, 24, 8, 134, 8, 68, 6, 2, 101, 128, 10, 64, 2, 38, 78,
             114, 1, 64, 38, 1, 192, 194, 152, 64, 70, 0, 36, 56, 121, 64, 0]
A0_A9 = [200, 1, 80, 20, 64, 68, 8, 109, 6, 37, 4, 67, 144, 80, 96, 32,
         8, 132, 43, 33, 0, 5, 99, 65, 2, 0, 224, 44, 64, 78, 96, 4]


def absent_strings(n, prefix="absent-"):
    return [f"{prefix}{i}" for i in range(n)]


def fp_bounds(expected_rate, trials, low=0.5, high=2.0):
    """Accept [low, high] x the design rate, widened by 5 sigma of binomial noise for small counts."""
    mean = expected_rate * trials
    slack = 5 * math.sqrt(mean) + 1
    return max(0.0, low * mean - slack), high * mean + slack


# --- the spec's vectors -----------------------------------------------------------------------------

def test_notes_vector_int64_0_to_9():
    f = SplitBlockBloomFilter(32)
    f.insert(np.arange(10, dtype=np.int64))
    assert list(f.to_bytes()) == INT64_0_9
    ref = bytearray(32)
    for v in range(10):
        ref_bloom.insert(ref, ref_bloom.xxh64(ref_bloom.plain_bytes(v, "INT64")))
    assert list(ref) == INT64_0_9


def test_notes_vector_strings_a0_to_a9():
    f = SplitBlockBloomFilter(32)
    f.insert([f"a{i}" for i in range(10)])
    assert list(f.to_bytes()) == A0_A9
    g = SplitBlockBloomFilter(32)
    g.insert(pa.array([f"a{i}".encode() for i in range(10)]))
    assert g == f
    ref = bytearray(32)
    for i in range(10):
        ref_bloom.insert(ref, ref_bloom.xxh64(f"a{i}".encode()))
    assert list(ref) == A0_A9


def test_parquet_java_filter_file():
    data = read_bytes(XXHASH_BIN)
    num_bytes, hlen = parse_bloom_header(data)
    assert (num_bytes, hlen) == (1024, 16) and len(data) == hlen + num_bytes
    assert bloom_header_bytes(num_bytes) == data[:hlen]
    bits = read_parquet_bloom(XXHASH_BIN, 0)
    assert bits == data[16:]
    words = ["hello", "parquet", "bloom", "filter"]
    f = SplitBlockBloomFilter.from_bytes(bits)
    assert f.contains(words).all()
    # Rebuilding it from the four words gives parquet-java's bitset bit for bit.
    mine = SplitBlockBloomFilter(1024)
    mine.insert(words)
    assert mine.to_bytes() == bits
    # False positives on 100,000 absent strings stay within the design of 4 values in 1 KiB.
    n = 100_000
    fp = int(f.contains(absent_strings(n)).sum())
    design = expected_fpp(1024, 4)
    assert design < 1e-9
    assert fp <= fp_bounds(design, n)[1]  # i.e. 0 or 1; an always-True probe would give 100,000


# --- header codec -----------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [32, 64, 1024, 4096, 1 << 20, 128 << 20, (1 << 31) - 32])
def test_header_roundtrip(n):
    h = bloom_header_bytes(n)
    assert parse_bloom_header(h) == (n, len(h))
    padded = b"\xaa" * 100 + h + b"\xbb" * 5
    assert parse_bloom_header(padded, 100) == (n, len(h))


def test_header_rejects_bad_sizes():
    for n in (0, 16, 33, 1 << 31):
        with pytest.raises((ValueError, TypeError)):
            bloom_header_bytes(n)
    with pytest.raises(TypeError):
        bloom_header_bytes(64.0)


def _header(fields: bytes) -> bytes:
    return fields + b"\x00"


NUM_BYTES_64 = b"\x15\x80\x01"  # field 1 i32 zigzag(64) = 128
BLOCK = b"\x1c\x1c\x00\x00"  # field +1, union member 1 = empty struct


def test_header_skips_unknown_fields_and_reads_long_form_ids():
    # An extra i64 field 5, a binary field 6, a list field 7 and a nested struct 8 after the known ones.
    extra = b"\x16\x02" + b"\x18\x03abc" + b"\x19\x35\x02\x04\x06" + b"\x1c\x15\x02\x00"
    h = _header(NUM_BYTES_64 + BLOCK * 3 + extra)
    assert parse_bloom_header(h) == (64, len(h))
    # Field 1 written in long form (delta 0 + zigzag i16 id), then the rest by delta.
    long_form = b"\x05\x02\x80\x01" + BLOCK * 3
    assert parse_bloom_header(_header(long_form)) == (64, len(long_form) + 1)


@pytest.mark.parametrize("body,message", [
    (b"\x15\x80\x01" + b"\x1c\x2c\x00\x00" + BLOCK * 2, "algorithm"),       # algorithm member 2
    (b"\x15\x80\x01" + BLOCK + b"\x1c\x2c\x00\x00" + BLOCK, "hash"),        # hash member 2
    (b"\x15\x80\x01" + BLOCK * 2 + b"\x1c\x2c\x00\x00", "compression"),     # e.g. a future codec
    (b"\x15\x80\x01" + BLOCK * 2, "compression"),                           # field 4 missing
    (BLOCK.replace(b"\x1c", b"\x2c", 1) + BLOCK * 2, "numBytes"),           # field 1 missing
    (b"\x15\x42" + BLOCK * 3, "multiple of 32"),                             # 33 bytes
    (b"\x15\x00" + BLOCK * 3, "multiple of 32"),                             # 0 bytes
    (b"\x15\x7f" + BLOCK * 3, "multiple of 32"),                             # negative
    (b"\x16\x80\x01" + BLOCK * 3, "i32"),                                   # numBytes as i64
    (b"\x15\x80\x01" + b"\x15\x02" + BLOCK * 2, "union"),                   # algorithm not a struct
    (b"\x15\x80\x01" + b"\x1c\x1c\x00\x1c\x00\x00" + BLOCK * 2, "more than one"),
    (b"\x15\x80\x01" + b"\x1c\x00" + BLOCK * 2, "no member"),
    (b"\x15\xff\xff\xff\xff\xff\xff" + BLOCK * 3, "varint"),
    (b"\x1e" + BLOCK * 3, "compact type 14"),
])
def test_header_errors_name_the_offset(body, message):
    buf = b"\x00" * 40 + _header(body)
    with pytest.raises(ParquetFormatError, match=message) as e:
        parse_bloom_header(buf, 40)
    assert "offset" in str(e.value)


def test_truncated_header_at_every_length():
    h = bloom_header_bytes(1024)
    for cut in range(len(h)):
        with pytest.raises(ParquetFormatError, match="truncated"):
            parse_bloom_header(b"PAR1" + h[:cut], 4)


def test_deep_nesting_is_refused_not_recursed():
    nested = b"\x1c" * 40 + b"\x00" * 40
    with pytest.raises(ParquetFormatError, match="nested"):
        parse_bloom_header(_header(NUM_BYTES_64 + BLOCK * 3 + b"\x1c" + nested))


def test_read_parquet_bloom_sources_and_bounds(tmp_path):
    bits = np.random.default_rng(0).integers(0, 256, 64, dtype=np.uint8).tobytes()
    blob = b"PAR1" + b"\x00" * 96 + bloom_header_bytes(64) + bits + b"tail"
    path = tmp_path / "f.bin"
    path.write_bytes(blob)
    hlen = len(bloom_header_bytes(64))
    for src in (blob, memoryview(blob), bytearray(blob), str(path), path, io.BytesIO(blob),
                np.frombuffer(blob, np.uint8)):
        assert read_parquet_bloom(src, 100) == bits
        assert read_parquet_bloom(src, 100, hlen + 64) == bits
        assert read_parquet_bloom(src, 100, hlen + 80) == bits  # a length with slack is fine
    with open(path, "rb") as fh:
        assert read_parquet_bloom(fh, 100) == bits
    for src in (blob, str(path)):
        with pytest.raises(ParquetFormatError, match="smaller than|truncated"):
            read_parquet_bloom(src, 100, hlen + 63)
        with pytest.raises(ParquetFormatError):
            read_parquet_bloom(src, -1)
        with pytest.raises(ParquetFormatError):
            read_parquet_bloom(src, len(blob) + 10)
    cut = blob[:100 + hlen + 40]
    cut_path = tmp_path / "cut.bin"
    cut_path.write_bytes(cut)
    for src in (cut, str(cut_path)):
        with pytest.raises(ParquetFormatError, match="past the end"):
            read_parquet_bloom(src, 100)


def test_read_parquet_bloom_long_header_from_file(tmp_path):
    # A header longer than the first read (a big unknown binary field) is still read from a file.
    # Field 5 (delta 1, binary) holding 1984 bytes: varint 1984 = 0xC0 0x0F.
    h = NUM_BYTES_64 + BLOCK * 3 + b"\x18\xc0\x0f" + b"z" * 1984 + b"\x00"
    bits = bytes(range(64))
    path = tmp_path / "long.bin"
    path.write_bytes(b"x" * 7 + h + bits)
    assert parse_bloom_header(h) == (64, len(h))
    assert read_parquet_bloom(str(path), 7) == bits


# --- sizing -----------------------------------------------------------------------------------------

def test_optimal_num_bytes_matches_parquet_formula():
    def formula(ndv, fpp):
        bits = int(-8 * ndv / math.log(1 - fpp ** (1 / 8)))
        bits = min(max(bits, 256), 128 * 1024 * 1024 * 8)
        return 1 << (bits - 1).bit_length() >> 3
    for ndv in (0, 1, 10, 100, 1000, 4096, 100_000, 10**6, 10**9):
        for fpp in (0.001, 0.01, 0.05, 0.1, 0.5):
            n = optimal_num_bytes(ndv, fpp)
            assert n == formula(ndv, fpp)
            assert n & (n - 1) == 0 and 32 <= n <= 128 << 20
    assert optimal_num_bytes(0) == 32
    assert optimal_num_bytes(1000, 0.01) == 2048  # 9585 bits -> 16384 bits
    assert optimal_num_bytes(10**12, 0.01) == 128 << 20
    assert SplitBlockBloomFilter.for_ndv(1000).num_bytes == 2048
    assert SplitBlockBloomFilter.for_ndv(3000, fpp=0.05).num_bytes == optimal_num_bytes(3000, 0.05)
    for bad in ((-1, 0.01), (10, 0.0), (10, 1.0), (10, -0.5), (1.5, 0.01)):
        with pytest.raises(ValueError):
            optimal_num_bytes(*bad)


def test_sized_filter_meets_its_fpp_and_expected_fpp_predicts_it():
    rng = np.random.default_rng(11)
    for ndv, fpp in ((2000, 0.01), (5000, 0.05), (300, 0.1)):
        f = SplitBlockBloomFilter.for_ndv(ndv, fpp)
        f.insert_hashes(rng.integers(0, 2**64, ndv, dtype=np.uint64, endpoint=False))
        trials = 200_000
        fp = int(f.contains_hashes(rng.integers(0, 2**64, trials, dtype=np.uint64, endpoint=False)).sum())
        design = expected_fpp(f.num_bytes, ndv)
        assert design <= fpp
        lo, hi = fp_bounds(design, trials, 0.8, 1.25)
        assert lo <= fp <= hi, (ndv, fpp, fp, design * trials)


def test_expected_fpp_edges():
    assert expected_fpp(32, 0) == 0.0
    assert expected_fpp(32, 1) == pytest.approx((1 / 32) ** 8)
    assert expected_fpp(32, 10_000) == pytest.approx(1.0)
    assert expected_fpp(1 << 20, 1) < expected_fpp(1 << 20, 1000) < expected_fpp(1 << 10, 1000)


# --- the filter object ---------------------------------------------------------------------------

def test_filter_construction_and_validation():
    f = SplitBlockBloomFilter(64)
    assert f.num_bytes == 64 and f.to_bytes() == bytes(64)
    for bad in (0, 16, 31, 33, -32):
        with pytest.raises(ValueError):
            SplitBlockBloomFilter(bad)
    for bad in (64.0, True, "64"):
        with pytest.raises(TypeError):
            SplitBlockBloomFilter(bad)
    for bad in (b"", bytes(31), bytes(48)):
        with pytest.raises(ValueError):
            SplitBlockBloomFilter.from_bytes(bad)
    src = bytearray(32)
    g = SplitBlockBloomFilter.from_bytes(src)
    g.insert([b"x"])
    assert src == bytearray(32)  # from_bytes copies
    assert SplitBlockBloomFilter.from_bytes(g.to_bytes()) == g != f
    with pytest.raises(ValueError):
        g.bitset[0] = 1  # read-only view
    assert repr(g) == "SplitBlockBloomFilter(num_bytes=32)"


def test_nan_and_null_are_never_inserted_nor_contained():
    f = SplitBlockBloomFilter(64)
    f.insert(np.array([np.nan, np.nan], np.float64))
    f.insert(["", None])
    f.insert(pa.array([None, None], pa.int64()))
    empty_string_only = SplitBlockBloomFilter(64)
    empty_string_only.insert([b""])
    assert f == empty_string_only
    assert f.contains(np.array([np.nan])).tolist() == [False]
    assert f.contains([None, ""]).tolist() == [False, True]
    # Even a full filter answers False for them: the filter cannot speak for NaN or null.
    full = SplitBlockBloomFilter.from_bytes(b"\xff" * 32)
    assert full.contains(np.array([np.nan, 1.0])).tolist() == [False, True]
    assert full.contains(pa.array([None, "a"])).tolist() == [False, True]


def test_negative_zero_equals_zero_in_a_filter():
    for dtype in (np.float32, np.float64):
        f = SplitBlockBloomFilter(1024)
        f.insert(np.array([-0.0], dtype))
        g = SplitBlockBloomFilter(1024)
        g.insert(np.array([0.0], dtype))
        assert f == g and f.contains(np.array([0.0, -0.0], dtype)).all()


def test_in_operator():
    f = SplitBlockBloomFilter(1024)
    f.insert(["hello"])
    f.insert(np.array([7], np.int32))
    assert "hello" in f and b"hello" in f and np.int32(7) in f
    assert "absent" not in f and None not in f and np.int64(7) not in f  # INT64 7 hashes differently
    with pytest.raises(TypeError):
        _ = 7 in f  # a Python int does not say INT32 or INT64


def test_types_hash_as_their_physical_type():
    f = SplitBlockBloomFilter(4096)
    f.insert(np.array([1, 2, 3], np.int32))
    assert f.contains(np.array([1, 2, 3], np.int32)).all()
    assert f.contains(pa.array([1, 2, 3], pa.int32())).all()
    assert f.contains(np.array([1, 2, 3], np.int16)).all()  # widened to INT32 like Parquet does
    assert not f.contains(np.array([1, 2, 3], np.int64)).any()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_no_false_negatives_for_any_type(data):
    kind = data.draw(st.sampled_from(["i4", "i8", "f4", "f8", "str", "bytes", "flba"]))
    n = data.draw(st.integers(0, 200))
    num_bytes = 32 * data.draw(st.integers(1, 40))
    if kind == "str":
        values = data.draw(st.lists(st.text(max_size=12), min_size=n, max_size=n))
    elif kind == "bytes":
        values = data.draw(st.lists(st.binary(max_size=12), min_size=n, max_size=n))
    elif kind == "flba":
        values = np.frombuffer(data.draw(st.binary(min_size=5 * n, max_size=5 * n)), np.uint8).reshape(n, 5)
    else:
        raw = data.draw(st.binary(min_size=n * int(kind[1]), max_size=n * int(kind[1])))
        values = np.frombuffer(raw, kind)
    f = SplitBlockBloomFilter(num_bytes)
    f.insert(values)
    got = f.contains(values)
    want = np.ones(len(values), bool)
    if kind in ("f4", "f8"):
        want = ~np.isnan(values)
    assert np.array_equal(got, want)


# --- kernels against the pure-Python reference --------------------------------------------------

hashes_st = st.lists(st.integers(0, 2**64 - 1), max_size=60)


@settings(max_examples=200, deadline=None)
@given(hashes_st, hashes_st, st.integers(1, 64))
def test_insert_and_probe_equal_reference(inserted, probed, nblocks):
    f = SplitBlockBloomFilter(32 * nblocks)
    f.insert_hashes(np.array(inserted, np.uint64))
    ref = bytearray(32 * nblocks)
    for h in inserted:
        ref_bloom.insert(ref, h)
    assert f.to_bytes() == bytes(ref)
    assert f.contains_hashes(np.array(probed, np.uint64)).tolist() == [ref_bloom.check(ref, h) for h in probed]
    assert f.contains_hashes(np.array(inserted, np.uint64)).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 8), hashes_st), max_size=8), hashes_st, st.integers(0, 5))
def test_probe_many_equals_reference(filters, probed, gap):
    # Filters (nblocks, inserted hashes) packed into one buffer with gaps; nblocks -1: absent.
    buf = bytearray(b"\x5a" * gap)
    offsets, lengths, refs = [], [], []
    for nblocks, inserted in filters:
        if nblocks <= 0:
            offsets.append(0 if nblocks < 0 else len(buf))
            lengths.append(-1)
            refs.append(None)
            continue
        bits = bytearray(32 * nblocks)
        for h in inserted:
            ref_bloom.insert(bits, h)
        offsets.append(len(buf))
        lengths.append(len(bits))
        refs.append(bytes(bits))
        buf += bits + b"\xa5" * gap
    hashes = np.array(probed, np.uint64)
    got = probe_many(hashes, bytes(buf), np.array(offsets, np.int64), np.array(lengths, np.int64))
    assert got.shape == (len(probed), len(filters)) and got.dtype == np.bool_
    want = [[True if r is None else ref_bloom.check(r, h) for r in refs] for h in probed]
    assert got.tolist() == [list(row) for row in want] if probed else got.size == 0
    anyof = probe_many(hashes, bytes(buf), offsets, lengths, any_of=True)
    assert anyof.tolist() == [any(row[r] for row in want) for r in range(len(filters))]


def test_probe_many_single_value_and_absent_filters():
    f = SplitBlockBloomFilter(64)
    f.insert(["x"])
    data = f.to_bytes() * 2
    h = hash_values(["x"])
    out = probe_many(h, data, [0, 64, 0], [64, 64, -1])
    assert out.tolist() == [[True, True, True]]
    assert probe_many(hash_values(["nope"]), data, [0, 0], [64, -1]).tolist() == [[False, True]]
    assert probe_many(np.zeros(0, np.uint64), data, [0, 0], [64, -1], any_of=True).tolist() == [False, False]
    assert probe_many(h, b"", np.zeros(0, np.int64), np.zeros(0, np.int64)).shape == (1, 0)
    assert probe_many(h, b"", [0], [-1], any_of=True).tolist() == [True]


@pytest.mark.parametrize("offsets,lengths,match", [
    ([0], [31], "filter 0"), ([0], [48], "filter 0"), ([0], [0], "filter 0"), ([0], [-2], "filter 0"),
    ([0, 40], [64, 32], "filter 1"), ([-32], [32], "filter 0"), ([64], [64], "filter 0"),
    ([0, 0], [32], "shape"),
])
def test_probe_many_validates_before_the_kernel(offsets, lengths, match):
    with pytest.raises(ValueError, match=match):
        probe_many(np.ones(3, np.uint64), bytes(64), np.array(offsets), np.array(lengths))


def test_probe_many_rejects_bad_dtypes():
    with pytest.raises(TypeError):
        probe_many(np.ones(3, np.float64), bytes(64), [0], [64])
    with pytest.raises(TypeError):
        probe_many(np.ones(3, np.uint64), bytes(64), [0.0], [64])
    with pytest.raises(ValueError):
        probe_many(np.ones((3, 1), np.uint64), bytes(64), [0], [64])
    with pytest.raises(ValueError):
        bloom.insert_hashes(b"\x00" * 32, np.ones(1, np.uint64))  # bytes are read-only


def test_module_level_insert_and_probe_share_a_buffer():
    buf = np.zeros(128, np.uint8)
    h = hash_values(np.array([1, 2, 3], np.int64))
    bloom.insert_hashes(buf, h)
    assert bloom.probe(buf, h).all()
    assert bloom.probe(buf.tobytes(), hash_values(np.array([4], np.int64))).tolist() == [False]
    f = SplitBlockBloomFilter(128)
    f.insert(np.array([1, 2, 3], np.int64))
    assert f.to_bytes() == buf.tobytes()


def test_probe_kernel_runs_in_parallel_threads_with_the_same_answers():
    rng = np.random.default_rng(5)
    R, size = 16, 4096
    data = np.zeros(R * size, np.uint8)
    for r in range(R):
        bloom.insert_hashes(data[r * size:(r + 1) * size], rng.integers(0, 2**63, 500, dtype=np.uint64))
    offsets, lengths = np.arange(R) * size, np.full(R, size)
    hashes = rng.integers(0, 2**63, 20_000, dtype=np.uint64)
    want = probe_many(hashes, data, offsets, lengths)
    results = [None, None]

    def work(i):
        results[i] = probe_many(hashes, data, offsets, lengths)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(r, want) for r in results)


# --- filters written by other Parquet writers -----------------------------------------------------

def _chunk_filters(path):
    """{(row group, column name): (offset, length)} from pyarrow's view of the footer."""
    md = pq.ParquetFile(path).metadata
    out = {}
    for r in range(md.num_row_groups):
        for c in range(md.num_columns):
            cc = md.row_group(r).column(c)
            if cc.bloom_filter_offset:
                out[(r, cc.path_in_schema)] = (cc.bloom_filter_offset, cc.bloom_filter_length)
    return out


def _check_filters(path, absent_by_column, *, skip=()):
    """Every value of every chunk probes True in its filter; absent values hit at the design rate."""
    pf = pq.ParquetFile(path)
    filters = _chunk_filters(path)
    assert filters
    blob = read_bytes(path)
    checked = 0
    for (r, name), (offset, length) in filters.items():
        if name in skip:
            continue
        bits = read_parquet_bloom(path, offset, length)
        assert bits == read_parquet_bloom(blob, offset, length)
        num_bytes, hlen = parse_bloom_header(blob, offset)
        assert hlen + num_bytes == length and len(bits) == num_bytes
        f = SplitBlockBloomFilter.from_bytes(bits)
        column = pf.read_row_group(r, columns=[name]).column(0)
        present = column.drop_null()
        assert f.contains(column).sum() == len(present)  # every value True, every null False
        assert f.contains(present).all()
        storage = pa.chunked_array([c.storage if isinstance(c, pa.ExtensionArray) else c for c in present.chunks])
        distinct = len(pa.compute.unique(storage))
        absent = absent_by_column[name]
        fp = int(f.contains(absent).sum())
        design = expected_fpp(num_bytes, distinct)
        lo, hi = fp_bounds(design, len(absent))
        assert lo <= fp <= hi, (name, r, fp, design * len(absent), num_bytes, distinct)
        checked += 1
    return checked


def test_pyarrow_written_filters(tmp_path):
    n = 30_000
    rng = np.random.default_rng(21)
    i64 = rng.permutation(n).astype(np.int64) * 3  # absent: values = 1 mod 3
    i32 = (rng.permutation(n) * 3).astype(np.int32)
    f64 = i64.astype(np.float64) / 4  # absent: x/4 + 1/8
    f32 = (i32.astype(np.float32) / 4).astype(np.float32)
    strs = pa.array([f"user-{v}" for v in i64.tolist()])
    fsb = pa.array([int(v).to_bytes(16, "big") for v in i64.tolist()], pa.binary(16))
    mask = rng.random(n) < 0.05
    table = pa.table({
        "i64": pa.array(i64, mask=mask), "i32": i32, "f64": f64, "f32": f32, "s": strs, "fsb": fsb,
    })
    path = str(tmp_path / "pa.parquet")
    opts = {name: {"ndv": n // 2, "fpp": 0.05} for name in table.column_names}
    pq.write_table(table, path, row_group_size=n // 2, bloom_filter_options=opts)
    absent = 100_000
    base = np.arange(absent, dtype=np.int64) + 10 * n
    absent_by_column = {
        "i64": base * 3 + 1, "i32": (base * 3 + 1).astype(np.int32),
        "f64": (base * 3).astype(np.float64) / 4 + 0.125, "f32": ((base * 3).astype(np.float32) / 4 + 0.125),
        "s": absent_strings(absent, "user-x"), "fsb": np.array([list(int(v).to_bytes(16, "big"))
                                                                for v in (base * 3 + 1).tolist()], np.uint8),
    }
    checked = _check_filters(path, absent_by_column)
    assert checked == 2 * len(table.column_names)
    # pyarrow sizes each filter with Parquet's formula (for ndv or the row count, whichever is less).
    for (_, name), (offset, length) in _chunk_filters(path).items():
        num_bytes = parse_bloom_header(read_bytes(path), offset)[0]
        assert num_bytes in (optimal_num_bytes(n // 2, 0.05), optimal_num_bytes(n // 2, 0.05) // 2)


def test_duckdb_written_filters(tmp_path):
    import duckdb  # a test dependency: a missing one must fail, not skip
    path = str(tmp_path / "duck.parquet")
    # Dictionary-encoded columns (3,000 distinct values over 60,000 rows) get bloom filters by default.
    duckdb.sql(f"""
        COPY (
            SELECT CASE WHEN k % 97 = 0 THEN NULL ELSE k::INTEGER END AS i32,
                   (k * 1000003)::BIGINT AS i64, (k / 8.0)::DOUBLE AS f64, (k / 4.0)::FLOAT AS f32,
                   'val-' || k AS s, ('b' || k)::BLOB AS b,
                   ('00000000-0000-4000-8000-' || lpad(k::VARCHAR, 12, '0'))::UUID AS u
            FROM (SELECT range % 3000 AS k FROM range(60000))
        ) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 30000)""")
    absent = 100_000
    k = np.arange(absent, dtype=np.int64) + 5000
    absent_by_column = {
        "i32": k.astype(np.int32), "i64": k * 1000003, "f64": k / 8.0 + 0.0625, "f32": (k / 4.0).astype(np.float32),
        "s": [f"val-{v}" for v in k.tolist()], "b": [f"b{v}".encode() for v in k.tolist()],
        "u": np.array([list(uuid.UUID(f"00000000-0000-4000-8000-{v:012d}").bytes) for v in k.tolist()], np.uint8),
    }
    filters = _chunk_filters(path)
    checked = _check_filters(path, absent_by_column)
    assert checked == len(filters) >= 2 * 6
    # DuckDB's own probe agrees with ours, value by value (its answer is "the filter excludes it").
    blob = read_bytes(path)
    for column, values, literal in (("s", ["val-5", "val-2999", "val-3001", "nope"], "'{}'"),
                                    ("i64", [5 * 1000003, 42, 2999 * 1000003], "{}")):
        for v in values:
            rows = duckdb.sql(f"SELECT row_group_id, bloom_filter_excludes FROM "
                              f"parquet_bloom_probe('{path}', '{column}', {literal.format(v)})").fetchall()
            assert rows
            for r, excludes in rows:
                offset, length = filters[(r, column)]
                f = SplitBlockBloomFilter.from_parquet(blob, offset, length)
                probe_value = [v] if column == "s" else np.array([v], np.int64)
                assert bool(f.contains(probe_value)[0]) == (not excludes), (column, v, r)


# --- through qdbpm.parquet.read_footer -------------------------------------------------------

_qparquet = importlib.import_module("qdbpm.parquet.footer")


def _footer_arrays(path):
    ft = _qparquet.read_footer(path)
    get = (lambda k: ft[k]) if isinstance(ft, dict) else (lambda k: getattr(ft, k))
    return np.asarray(get("bloom_offset")), np.asarray(get("bloom_length"))


def test_read_footer_bloom_offsets_probe_all_row_groups_at_once(tmp_path):
    path = str(tmp_path / "rg.parquet")
    n, rgs = 4000, 8
    table = pa.table({"id": np.arange(n, dtype=np.int64), "s": [f"k{v % 500}" for v in range(n)]})
    pq.write_table(table, path, row_group_size=n // rgs, bloom_filter_options={"id": {"ndv": n // rgs}})
    offs, lens = _footer_arrays(path)
    assert offs.shape == lens.shape == (rgs, 2)
    md = pq.ParquetFile(path).metadata
    for r in range(rgs):
        cc = md.row_group(r).column(0)
        assert (int(offs[r, 0]), int(lens[r, 0])) == (cc.bloom_filter_offset, cc.bloom_filter_length)
    assert (lens[:, 1] == -1).all()  # no filter for "s"
    blob = read_bytes(path)
    # Raw bitset positions for probe_many: skip each filter's Thrift header.
    bit_offs = np.empty(rgs, np.int64)
    bit_lens = np.empty(rgs, np.int64)
    for r in range(rgs):
        num_bytes, hlen = parse_bloom_header(blob, int(offs[r, 0]))
        bit_offs[r], bit_lens[r] = offs[r, 0] + hlen, num_bytes
    values = np.array([0, 1999, 3999, -5, 10**9], np.int64)
    got = probe_many(hash_values(values), blob, bit_offs, bit_lens)
    home = values // (n // rgs)
    for v in range(3):
        assert got[v, home[v]]
    assert probe_many(hash_values(values[:3]), blob, bit_offs, bit_lens, any_of=True)[home[:3]].all()
