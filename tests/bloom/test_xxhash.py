"""XXH64 kernels: scalar and batch, against the `xxhash` package and the pure-Python reference."""

import struct

import numpy as np
import pyarrow as pa
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from support import ref_bloom
from qdbpm import bloom
from qdbpm.bloom.hashing import hash_values, hash_values_aligned, xxh64


def xx(b: bytes) -> int:
    return xxhash.xxh64_intdigest(b)


def test_empty_input_vector():
    assert xxh64(b"") == 0xEF46DB3751D8E999
    assert ref_bloom.xxh64(b"") == 0xEF46DB3751D8E999


def test_every_length_0_to_100():
    data = bytes(np.random.default_rng(1).integers(0, 256, 100, dtype=np.uint8))
    for n in range(101):
        assert xxh64(data[:n]) == xx(data[:n]) == ref_bloom.xxh64(data[:n]), n


@pytest.mark.parametrize("size", [31, 32, 33, 4096 + 7, 1 << 20, (8 << 20) + 3])
def test_large_random_buffers_and_unaligned_views(size):
    buf = np.random.default_rng(size).integers(0, 256, size + 8, dtype=np.uint8)
    for shift in (0, 1, 3, 7):  # unaligned starts exercise the little-endian loads
        view = buf[shift:shift + size]
        assert xxh64(view) == xx(view.tobytes())


def test_accepts_buffers_rejects_str():
    assert xxh64(bytearray(b"abc")) == xxh64(memoryview(b"abc")) == xx(b"abc")
    with pytest.raises(TypeError):
        xxh64("abc")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_matches_reference_and_package(data):
    assert xxh64(data) == ref_bloom.xxh64(data) == xx(data)


# --- batch hashing of Parquet PLAIN bytes ----------------------------------------------------------

SPECIAL_F = [0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, 1e-45, 3.4e38]


def _expected(values, physical):
    return [xx(ref_bloom.plain_bytes(v, physical)) for v in values]


@pytest.mark.parametrize("dtype,physical,fmt", [
    (np.int32, "INT32", "<i"), (np.int64, "INT64", "<q"), (np.float32, "FLOAT", "<f"), (np.float64, "DOUBLE", "<d"),
])
def test_fixed_width_batches_equal_per_value_plain_hashes(dtype, physical, fmt):
    rng = np.random.default_rng(7)
    if np.dtype(dtype).kind == "i":
        info = np.iinfo(dtype)
        arr = np.concatenate([rng.integers(info.min, info.max, 500, dtype=dtype, endpoint=True),
                              np.array([0, -1, info.min, info.max], dtype)])
    else:
        arr = np.concatenate([rng.standard_normal(500).astype(dtype) * 1e6, np.array(SPECIAL_F, dtype)])
    got = hash_values(arr)
    assert got.dtype == np.uint64
    assert got.tolist() == _expected(arr.tolist(), physical)
    # The same bytes through struct, independently of ref_bloom.plain_bytes.
    assert int(got[0]) == xx(struct.pack(fmt, arr[0].item()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_negative_zero_hashes_as_positive_zero(dtype):
    h = hash_values(np.array([-0.0, 0.0], dtype))
    assert h[0] == h[1] == xx(np.array([0.0], dtype).tobytes())
    assert xx(np.array([-0.0], dtype).tobytes()) != h[0]  # the raw bytes of -0.0 do differ


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_is_hashed_but_flagged_and_dropped(dtype):
    arr = np.array([1.0, np.nan, 2.0], dtype)
    h, valid = hash_values_aligned(arr)
    assert valid.tolist() == [True, False, True]
    assert h[1] == xx(arr[1:2].tobytes())
    assert hash_values(arr).tolist() == [h[0], h[2]]


def test_byte_order_and_strides_do_not_matter():
    arr = np.arange(-50, 50, dtype=np.int64) * 7919
    want = hash_values(arr)
    assert np.array_equal(hash_values(arr.astype(">i8")), want)
    assert np.array_equal(hash_values(np.repeat(arr, 2)[::2]), want)
    f = np.linspace(-3, 3, 37)
    assert np.array_equal(hash_values(f.astype(">f8")), hash_values(f))


def test_small_and_unsigned_ints_hash_as_parquet_stores_them():
    # Parquet stores 8/16-bit ints as INT32 (sign/zero-extended), UINT_32/UINT_64 with the same bits.
    for dtype in (np.int8, np.int16, np.uint8, np.uint16):
        info = np.iinfo(dtype)
        arr = np.array([info.min, 0, 1, info.max], dtype)
        assert hash_values(arr).tolist() == _expected([int(v) for v in arr], "INT32"), dtype
    u32 = np.array([0, 1, 2**31, 2**32 - 1], np.uint32)
    assert np.array_equal(hash_values(u32), hash_values(u32.view(np.int32)))
    u64 = np.array([0, 2**63, 2**64 - 1], np.uint64)
    assert np.array_equal(hash_values(u64), hash_values(u64.view(np.int64)))


def test_datetime64_hashes_its_int64_and_nat_is_null():
    arr = np.array(["2024-01-01T00:00:00.000001", "NaT", "1970-01-01"], "datetime64[us]")
    h, valid = hash_values_aligned(arr)
    assert valid.tolist() == [True, False, True]
    ints = arr.view(np.int64)
    assert h[0] == xx(struct.pack("<q", int(ints[0]))) and h[2] == xx(struct.pack("<q", 0))


def test_fixed_size_byte_rows():
    rows = np.random.default_rng(3).integers(0, 256, (50, 16), dtype=np.uint8)
    assert hash_values(rows).tolist() == [xx(r.tobytes()) for r in rows]
    assert hash_values(np.asfortranarray(rows)).tolist() == [xx(r.tobytes()) for r in rows]
    assert hash_values(np.zeros((3, 0), np.uint8)).tolist() == [xx(b"")] * 3


def test_rejected_inputs():
    for bad in (np.array([True, False]), np.zeros(3, np.float16), np.zeros((2, 2), np.int32), np.complex64(1)):
        with pytest.raises((TypeError, ValueError)):
            hash_values(bad)
    for single in ("abc", b"abc"):
        with pytest.raises(TypeError, match="single"):
            hash_values(single)
    with pytest.raises(TypeError, match="explicit dtype"):
        hash_values([1, 2, 3])
    with pytest.raises(TypeError):
        hash_values(5)


# --- bytes / str sequences and Arrow arrays --------------------------------------------------------

def test_sequences_of_bytes_and_str_with_nulls():
    seq = ["héllo", b"\x00\xff", None, "", bytearray(b"xy"), np.str_("np")]
    h, valid = hash_values_aligned(seq)
    assert valid.tolist() == [True, True, False, True, True, True]
    assert h[valid].tolist() == [xx("héllo".encode()), xx(b"\x00\xff"), xx(b""), xx(b"xy"), xx(b"np")]
    assert hash_values(iter(["a", "b"])).tolist() == [xx(b"a"), xx(b"b")]  # any iterable
    assert hash_values(np.array(["a", "bc"])).tolist() == [xx(b"a"), xx(b"bc")]
    assert hash_values(np.array([b"a", None], object)).tolist() == [xx(b"a")]
    assert len(hash_values([])) == 0


STR_VALUES = ["", "a", "bb", None, "ccc" * 20, "ünï", None, "x" * 100, "tail"]


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string(), pa.binary(), pa.large_binary(),
                                 pa.string_view(), pa.binary_view()])
@pytest.mark.parametrize("start,stop", [(0, 9), (1, 9), (3, 8), (4, 4)])
def test_arrow_binary_arrays_with_offsets_and_nulls(typ, start, stop):
    values = [v if v is None or pa.types.is_string(typ) or pa.types.is_large_string(typ)
              or pa.types.is_string_view(typ) else v.encode() for v in STR_VALUES]
    arr = pa.array(values, type=typ).slice(start, stop - start)
    h, valid = hash_values_aligned(arr)
    want_valid = [v is not None for v in STR_VALUES[start:stop]]
    assert valid.tolist() == want_valid
    want = [xx(v.encode() if isinstance(v, str) else v) for v in values[start:stop] if v is not None]
    assert h[valid].tolist() == want
    assert (h[~valid] == 0).all()


def test_arrow_chunked_dictionary_and_fixed_size_binary():
    chunked = pa.chunked_array([pa.array(["a", None]), pa.array(["b"]), pa.array([], pa.string())])
    h, valid = hash_values_aligned(chunked)
    assert valid.tolist() == [True, False, True]
    assert h[valid].tolist() == [xx(b"a"), xx(b"b")]
    assert hash_values(pa.chunked_array([], pa.string())).tolist() == []
    dict_arr = pa.array(["x", "y", None, "x"]).dictionary_encode()
    assert hash_values(dict_arr).tolist() == [xx(b"x"), xx(b"y"), xx(b"x")]
    fsb = pa.array([b"abcd", None, b"efgh", b"ijkl"], pa.binary(4)).slice(1)
    h, valid = hash_values_aligned(fsb)
    assert valid.tolist() == [False, True, True]
    assert h[valid].tolist() == [xx(b"efgh"), xx(b"ijkl")]


@pytest.mark.parametrize("typ,physical", [
    (pa.int8(), "INT32"), (pa.int16(), "INT32"), (pa.int32(), "INT32"), (pa.int64(), "INT64"),
    (pa.uint8(), "INT32"), (pa.uint16(), "INT32"), (pa.float32(), "FLOAT"), (pa.float64(), "DOUBLE"),
])
def test_arrow_numeric_arrays_with_offsets_and_nulls(typ, physical):
    raw = [1, None, 2, 100, None, 0, 7, 3]
    arr = pa.array(raw, type=typ).slice(2, 5)
    h, valid = hash_values_aligned(arr)
    assert valid.tolist() == [v is not None for v in raw[2:7]]
    want = _expected([float(v) if physical in ("FLOAT", "DOUBLE") else v for v in raw[2:7] if v is not None],
                     physical)
    assert h[valid].tolist() == want


def test_arrow_temporal_and_unsigned_arrays():
    ts = pa.array([0, None, 1_700_000_000_000_000], pa.timestamp("us"))
    assert hash_values(ts).tolist() == _expected([0, 1_700_000_000_000_000], "INT64")
    d32 = pa.array([0, 19000], pa.date32())
    assert hash_values(d32).tolist() == _expected([0, 19000], "INT32")
    d64 = pa.array([0, 19000 * 86_400_000], pa.date64())  # Parquet writes date64 as INT32 days
    assert hash_values(d64).tolist() == _expected([0, 19000], "INT32")
    u32 = pa.array([2**32 - 1], pa.uint32())
    assert hash_values(u32).tolist() == _expected([-1], "INT32")
    assert hash_values_aligned(pa.nulls(3))[1].tolist() == [False] * 3
    for bad in (pa.array([True, None]), pa.array(np.array([1.5], np.float16))):
        with pytest.raises(TypeError):
            hash_values(bad)
    import decimal
    with pytest.raises(TypeError):
        hash_values(pa.array([decimal.Decimal("1.5")]))


def test_binary_kernel_rejects_offsets_outside_data():
    # pyarrow validates arrays it builds, but buffers imported from elsewhere may not be: the kernel
    # checks every value's offsets against the data buffer instead of reading out of bounds.
    from qdbpm.bloom import _xxhash
    data = np.frombuffer(b"abcd", np.uint8)
    out, valid = np.empty(2, np.uint64), np.empty(2, np.uint8)
    for offsets, bad in (([0, 2, 1000], 1), ([0, 3, 2], 1), ([-1, 2, 3], 0)):
        got = _xxhash.hash_binary(np.array(offsets, np.int32), data, np.zeros(0, np.uint8), 0, out, valid)
        assert got == -1 - bad
    assert _xxhash.hash_binary(np.array([0, 2, 4], np.int64), data, np.zeros(0, np.uint8), 0, out, valid) == 0
    assert out.tolist() == [xx(b"ab"), xx(b"cd")]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=40), st.text(max_size=20)), max_size=30),
       st.integers(0, 5), st.booleans())
def test_arrow_and_sequence_paths_agree_with_reference(values, start, large):
    encoded = [v.encode() if isinstance(v, str) else v for v in values]
    arr = pa.array(encoded, pa.large_binary() if large else pa.binary()).slice(min(start, len(values)))
    want = [ref_bloom.xxh64(v) for v in encoded[min(start, len(values)):] if v is not None]
    assert hash_values(arr).tolist() == want
    assert hash_values(values[min(start, len(values)):]).tolist() == want


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(width=32), max_size=40), st.lists(st.integers(-2**63, 2**63 - 1), max_size=40))
def test_fixed_width_paths_agree_with_reference(floats, ints):
    f32 = np.array(floats, np.float32)
    want = [ref_bloom.xxh64(ref_bloom.plain_bytes(v, "FLOAT")) for v in f32.tolist() if v == v]
    assert hash_values(f32).tolist() == want
    i64 = np.array(ints, np.int64)
    assert hash_values(i64).tolist() == [ref_bloom.xxh64(ref_bloom.plain_bytes(v, "INT64")) for v in ints]


def test_batch_kernel_is_one_call_for_the_whole_batch():
    # hash_values calls the kernel once: a million values hash well under a second.
    import time
    arr = np.arange(1_000_000, dtype=np.int64)
    t = time.perf_counter()
    h = hash_values(arr)
    assert time.perf_counter() - t < 1.0
    assert int(h[123_456]) == xx(struct.pack("<q", 123_456))
    assert bloom.hash_values(pa.array(arr)).tolist()[:3] == h[:3].tolist()


def test_masked_arrays_and_foreign_arrays():
    m = np.ma.array([1, 2, 3], mask=[False, True, False], dtype=np.int64)
    h, valid = hash_values_aligned(m)
    assert valid.tolist() == [True, False, True]
    assert h[valid].tolist() == _expected([1, 3], "INT64")

    class ArrowCarrier:  # anything speaking the Arrow C data interface (polars, nanoarrow, ...)
        def __init__(self, arr):
            self.arr = arr

        def __arrow_c_array__(self, requested_schema=None):
            return self.arr.__arrow_c_array__(requested_schema)

    assert hash_values(ArrowCarrier(pa.array(["a", None, "b"]))).tolist() == [xx(b"a"), xx(b"b")]

    class ArrayLike:
        def __array__(self, dtype=None, copy=None):
            return np.array([5, 6], np.int32)

    assert hash_values(ArrayLike()).tolist() == _expected([5, 6], "INT32")
