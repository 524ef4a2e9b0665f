"""Parquet's bloom filter hashing: XXH64 (seed 0) of each value's PLAIN bytes.

No length prefix: 4 LE bytes for INT32/FLOAT, 8 for INT64/DOUBLE, raw bytes for BYTE_ARRAY and
FIXED_LEN_BYTE_ARRAY. -0.0 hashes as +0.0. Nulls and NaN are never hashed into a filter (the filter
cannot speak for them; pruning uses null counts instead). `qdbpm._xxhash` is the nogil kernel that
trusts its inputs; this module validates dtypes, shapes and buffer bounds and calls it once per batch.
"""

import sys

import numpy as np

from . import _xxhash

__all__ = ["xxh64", "hash_values", "hash_values_aligned", "hash_with_validity", "as_u8"]

_EMPTY_BITS = np.zeros(0, np.uint8)


def xxh64(data) -> int:
    """XXH64 with seed 0 of a bytes-like object (any C-contiguous buffer, read as raw bytes)."""
    if isinstance(data, str):
        raise TypeError("xxh64 hashes bytes; encode the str first (Parquet hashes str as UTF-8)")
    return _xxhash.xxh64_buffer(as_u8(data))


def hash_values(values) -> np.ndarray:
    """XXH64 of each value's Parquet PLAIN bytes, nulls and NaN dropped: exactly the hashes that
    `SplitBlockBloomFilter.insert` would insert. See `SplitBlockBloomFilter` for accepted `values`."""
    hashes, valid = hash_with_validity(values)
    return hashes if valid is None else hashes[valid]


def hash_values_aligned(values) -> tuple[np.ndarray, np.ndarray]:
    """(hashes uint64[n], valid bool[n]) aligned with `values`; valid is False for nulls and NaN
    (their hash is meaningless: NaN's is computed, a null's is 0)."""
    hashes, valid = hash_with_validity(values)
    if valid is None:
        valid = np.ones(len(hashes), np.bool_)
    return hashes, valid


def hash_with_validity(values):
    """(uint64 hashes, bool valid mask or None when every value is valid), aligned with `values`."""
    if isinstance(values, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"values must be a collection of values, not a single {type(values).__name__}: "
                        "wrap it in a list")
    pa = sys.modules.get("pyarrow")  # Arrow inputs imply pyarrow is imported: no import cost otherwise
    if pa is not None:
        if isinstance(values, pa.ChunkedArray):
            parts = [_hash_arrow(pa, c) for c in values.chunks]
            if not parts:
                return np.zeros(0, np.uint64), None
            hashes = np.concatenate([h for h, _ in parts])
            if all(v is None for _, v in parts):
                return hashes, None
            return hashes, np.concatenate([np.ones(len(h), np.bool_) if v is None else v for h, v in parts])
        if isinstance(values, pa.Array):
            return _hash_arrow(pa, values)
    if isinstance(values, np.ma.MaskedArray):  # masked entries are nulls
        hashes, valid = hash_with_validity(values.data)
        mask = np.ma.getmaskarray(values)
        if mask.ndim > 1:
            mask = mask.any(axis=tuple(range(1, mask.ndim)))
        if mask.any():
            hashes = hashes.copy()
            hashes[mask] = 0
            valid = ~mask if valid is None else valid & ~mask
        return hashes, valid
    if isinstance(values, np.ndarray):
        if values.dtype.kind in "OUS":
            return _hash_sequence(values.tolist())
        return _hash_numpy(values)
    if hasattr(values, "__arrow_c_array__") or hasattr(values, "__arrow_c_stream__"):
        import pyarrow as pa  # e.g. a polars Series: import through the Arrow C interface, no copy

        arr = pa.array(values) if hasattr(values, "__arrow_c_array__") else pa.chunked_array(values)
        return hash_with_validity(arr)
    if hasattr(values, "__array__") and not isinstance(values, (list, tuple)):
        return hash_with_validity(np.asarray(values))  # e.g. a pandas Series
    if np.isscalar(values) or not hasattr(values, "__iter__"):
        raise TypeError(f"values must be a numpy array, an Arrow array or a sequence of bytes/str, "
                        f"not {type(values).__name__}")
    return _hash_sequence(values)


def _finish(hashes, valid, bad):
    """Turn a kernel's uint8 valid buffer into the (hashes, mask-or-None) pair."""
    return hashes, (valid.view(np.bool_) if bad else None)


def _hash_fixed(arr, validity=_EMPTY_BITS, bit_offset=0):
    """int32/int64/float32/float64 1-D contiguous array -> kernel."""
    n = len(arr)
    hashes = np.empty(n, np.uint64)
    valid = np.empty(n, np.uint8)
    bad = _xxhash.hash_fixed_width(arr, validity, bit_offset, hashes, valid)
    return _finish(hashes, valid, bad)


def _hash_numpy(arr):
    if arr.ndim == 2 and arr.dtype == np.uint8:  # FIXED_LEN_BYTE_ARRAY rows
        rows = np.ascontiguousarray(arr)
        n, width = rows.shape
        hashes = np.empty(n, np.uint64)
        valid = np.empty(n, np.uint8)
        _xxhash.hash_fixed_bytes(rows.reshape(-1), width, _EMPTY_BITS, 0, hashes, valid)
        return hashes, None
    if arr.ndim != 1:
        raise ValueError(f"values must be 1-D (or 2-D uint8 for fixed-size byte rows), got shape {arr.shape}")
    kind, size = arr.dtype.kind, arr.dtype.itemsize
    if kind == "f" and size in (4, 8):
        return _hash_fixed(np.ascontiguousarray(arr, arr.dtype.newbyteorder("=")))
    if kind in "iu":
        # Parquet stores 8/16-bit integers as INT32 (sign- or zero-extended) and unsigned 32/64-bit
        # ones as INT32/INT64 with the same bits.
        if size <= 2:
            return _hash_fixed(arr.astype(np.int32))
        native = np.ascontiguousarray(arr, arr.dtype.newbyteorder("="))
        return _hash_fixed(native.view(np.int32 if size == 4 else np.int64))
    if kind in "mM":
        # The stored int64 in the array's own unit; NaT is a null.
        ints = np.ascontiguousarray(arr, arr.dtype.newbyteorder("=")).view(np.int64)
        hashes, valid = _hash_fixed(ints)
        nat = ints == np.iinfo(np.int64).min
        if nat.any():
            valid = ~nat if valid is None else valid & ~nat
            hashes[nat] = 0
        return hashes, valid
    raise TypeError(f"cannot hash numpy dtype {arr.dtype}: use int32/int64/float32/float64, "
                    "2-D uint8 for fixed-size bytes, or a sequence of bytes/str")


def _hash_sequence(seq):
    import pyarrow as pa

    try:
        # str becomes UTF-8; None becomes null. One C pass instead of a Python loop.
        arr = pa.array(seq if isinstance(seq, (list, tuple)) else list(seq), type=pa.large_binary())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
        raise TypeError("a sequence of values must hold bytes or str (or None); pass numbers as a "
                        f"numpy array with an explicit dtype such as int64 or float64 ({e})") from None
    return _hash_arrow(pa, arr)


def _arrow_validity(arr):
    buf = arr.buffers()[0]
    if buf is None or arr.null_count == 0:
        return _EMPTY_BITS
    bits = np.frombuffer(buf, np.uint8)
    if len(bits) * 8 < arr.offset + len(arr):
        raise ValueError(f"Arrow validity bitmap of {len(bits)} bytes is too short for offset "
                         f"{arr.offset} + length {len(arr)}")
    return bits


def _arrow_values(arr, dtype, count, first):
    """numpy view of an Arrow values buffer: `count` items starting at item `first`."""
    buf = arr.buffers()[1]
    itemsize = np.dtype(dtype).itemsize
    have = 0 if buf is None else buf.size // itemsize
    if first + count > have:
        raise ValueError(f"Arrow buffer holds {have} items of {np.dtype(dtype)}, need {first + count}")
    if count == 0 or buf is None:
        return np.zeros(count, dtype)
    return np.frombuffer(buf, dtype, count=count, offset=first * itemsize)


_ARROW_INT32 = ("int32", "uint32", "date32", "time32")
_ARROW_INT64 = ("int64", "uint64", "timestamp", "time64", "duration")


def _hash_arrow(pa, arr):
    t = arr.type
    if isinstance(arr, pa.ExtensionArray):
        return _hash_arrow(pa, arr.storage)
    if pa.types.is_dictionary(t):
        return _hash_arrow(pa, arr.dictionary_decode())
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return _hash_arrow(pa, arr.cast(pa.large_binary()))
    if pa.types.is_date64(t):  # Parquet writers store date64 as INT32 days
        return _hash_arrow(pa, arr.cast(pa.date32()))
    n, off = len(arr), arr.offset
    if pa.types.is_null(t):
        return np.zeros(n, np.uint64), np.zeros(n, np.bool_)
    validity = _arrow_validity(arr)
    hashes = np.empty(n, np.uint64)
    valid = np.empty(n, np.uint8)
    if t in (pa.binary(), pa.string(), pa.large_binary(), pa.large_string()):
        large = t in (pa.large_binary(), pa.large_string())
        offsets = _arrow_values(arr, np.int64 if large else np.int32, n + 1, off)
        data_buf = arr.buffers()[2]
        data = _EMPTY_BITS if data_buf is None else np.frombuffer(data_buf, np.uint8)
        bad = _xxhash.hash_binary(offsets, data, validity, off, hashes, valid)
        if bad < 0:
            i = -1 - bad
            raise ValueError(f"Arrow array value {i}: offsets [{int(offsets[i])}, {int(offsets[i + 1])}) "
                             f"fall outside its {len(data)}-byte data buffer")
        return _finish(hashes, valid, bad)
    if pa.types.is_fixed_size_binary(t) and not pa.types.is_decimal(t):
        width = t.byte_width
        data_buf = arr.buffers()[1]
        data = _EMPTY_BITS if data_buf is None else np.frombuffer(data_buf, np.uint8)
        if (off + n) * width > len(data):
            raise ValueError(f"Arrow fixed_size_binary({width}) buffer of {len(data)} bytes is too short "
                             f"for offset {off} + length {n}")
        bad = _xxhash.hash_fixed_bytes(data[off * width:], width, validity, off, hashes, valid)
        return _finish(hashes, valid, bad)
    if pa.types.is_integer(t) and t.bit_width <= 16:
        widened = _arrow_values(arr, t.to_pandas_dtype(), n, off).astype(np.int32)
        return _hash_fixed(widened, validity, off)
    name = str(t).split("[")[0]
    if name in _ARROW_INT32:
        return _hash_fixed(_arrow_values(arr, np.int32, n, off), validity, off)
    if name in _ARROW_INT64:
        return _hash_fixed(_arrow_values(arr, np.int64, n, off), validity, off)
    if t == pa.float32():
        return _hash_fixed(_arrow_values(arr, np.float32, n, off), validity, off)
    if t == pa.float64():
        return _hash_fixed(_arrow_values(arr, np.float64, n, off), validity, off)
    raise TypeError(f"cannot hash Arrow type {t}: use an integer, float32/float64, temporal, "
                    "binary/string or fixed_size_binary array")


def as_u8(buf, writable=False):
    """Zero-copy 1-D uint8 view of a C-contiguous buffer (bytes, memoryview, mmap, numpy)."""
    if isinstance(buf, np.ndarray):
        if not buf.flags.c_contiguous:
            raise ValueError("buffer must be C-contiguous")
        arr = buf.reshape(-1).view(np.uint8)
    else:
        with memoryview(buf) as mv:
            if not mv.c_contiguous:
                raise ValueError("buffer must be C-contiguous")
            arr = np.frombuffer(buf, np.uint8) if mv.nbytes else np.zeros(0, np.uint8)
    if writable and not arr.flags.writeable:
        raise ValueError("bitset buffer must be writable")
    return arr
