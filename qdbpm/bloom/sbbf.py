"""Parquet split-block bloom filters (SBBF).

Three layers: `qdbpm._xxhash` and `qdbpm._sbbf` are nogil kernels that trust their inputs; this
module validates dtypes, shapes and buffer bounds, allocates outputs and calls them once per batch;
`SplitBlockBloomFilter` is the small public object on top.

Hashing follows Parquet: XXH64 (seed 0) of a value's PLAIN bytes, no length prefix (4 LE bytes for
INT32/FLOAT, 8 for INT64/DOUBLE, raw bytes for BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY). -0.0 hashes as
+0.0. Nulls and NaN are never inserted, and `contains` answers False for them: the filter cannot
speak for them (pruning uses null counts instead).

Filters inside Parquet files are preceded by a Thrift compact `BloomFilterHeader`; a small bounded
codec for it lives here (`parse_bloom_header`, `bloom_header_bytes`, `read_parquet_bloom`).
"""

import math
import os
import sys

import numpy as np

from . import _sbbf, _xxhash
from ..errors import ParquetFormatError
from ..pm.layout import SBBF_BLOCK_BYTES

__all__ = [
    "MAX_BYTES",
    "MIN_BYTES",
    "SplitBlockBloomFilter",
    "bloom_header_bytes",
    "expected_fpp",
    "hash_values",
    "hash_values_aligned",
    "insert_hashes",
    "optimal_num_bytes",
    "parse_bloom_header",
    "probe",
    "probe_many",
    "read_parquet_bloom",
    "xxh64",
]

MIN_BYTES = SBBF_BLOCK_BYTES  # one block
MAX_BYTES = 128 * 1024 * 1024  # Parquet writers' upper bound for a sized filter
# The kernels compute the block as ((h >> 32) * nblocks) >> 32, which needs nblocks <= 2**32.
_MAX_BLOCKS = 1 << 32

_EMPTY_BITS = np.zeros(0, np.uint8)


# --- hashing ----------------------------------------------------------------------------------


def xxh64(data) -> int:
    """XXH64 with seed 0 of a bytes-like object (any C-contiguous buffer, read as raw bytes)."""
    if isinstance(data, str):
        raise TypeError("xxh64 hashes bytes; encode the str first (Parquet hashes str as UTF-8)")
    return _xxhash.xxh64_buffer(_as_u8(data))


def hash_values(values) -> np.ndarray:
    """XXH64 of each value's Parquet PLAIN bytes, nulls and NaN dropped: exactly the hashes that
    `SplitBlockBloomFilter.insert` would insert. See `SplitBlockBloomFilter` for accepted `values`."""
    hashes, valid = _hash(values)
    return hashes if valid is None else hashes[valid]


def hash_values_aligned(values) -> tuple[np.ndarray, np.ndarray]:
    """(hashes uint64[n], valid bool[n]) aligned with `values`; valid is False for nulls and NaN
    (their hash is meaningless: NaN's is computed, a null's is 0)."""
    hashes, valid = _hash(values)
    if valid is None:
        valid = np.ones(len(hashes), np.bool_)
    return hashes, valid


def _hash(values):
    """(uint64 hashes, bool valid mask or None when every value is valid)."""
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
        hashes, valid = _hash(values.data)
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
        return _hash(arr)
    if hasattr(values, "__array__") and not isinstance(values, (list, tuple)):
        return _hash(np.asarray(values))  # e.g. a pandas Series
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


# --- buffers and validation -------------------------------------------------------------------


def _as_u8(buf, writable=False):
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


def _as_hashes(hashes):
    arr = np.asarray(hashes)
    if arr.ndim != 1:
        raise ValueError(f"hashes must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind not in "iu" or arr.dtype.itemsize != 8:
        if arr.size == 0:
            return np.zeros(0, np.uint64)
        raise TypeError(f"hashes must be uint64 (from hash_values), got {arr.dtype}")
    return np.ascontiguousarray(arr, arr.dtype.newbyteorder("=")).view(np.uint64)


def _check_num_bytes(num_bytes, what="bitset"):
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, (int, np.integer)):
        raise TypeError(f"{what} size must be an int, got {type(num_bytes).__name__}")
    num_bytes = int(num_bytes)
    if num_bytes < MIN_BYTES or num_bytes % SBBF_BLOCK_BYTES:
        raise ValueError(f"{what} size {num_bytes} must be a positive multiple of {SBBF_BLOCK_BYTES}")
    if num_bytes // SBBF_BLOCK_BYTES > _MAX_BLOCKS:
        raise ValueError(f"{what} size {num_bytes} exceeds {_MAX_BLOCKS} blocks")
    return num_bytes


def _bitset(bitset, writable=False):
    arr = _as_u8(bitset, writable)
    _check_num_bytes(len(arr))
    return arr


# --- low-level batch API (pruning) --------------------------------------------------------------


def insert_hashes(bitset, hashes) -> None:
    """Insert uint64 hashes into a writable raw bitset (bytearray, numpy uint8, writable mmap)."""
    _sbbf.insert(_bitset(bitset, writable=True), _as_hashes(hashes))


def probe(bitset, hashes) -> np.ndarray:
    """bool[len(hashes)]: True where the hash may be in the raw bitset."""
    bits = _bitset(bitset)
    h = _as_hashes(hashes)
    out = np.empty(len(h), np.bool_)
    _sbbf.probe(bits, h, out.view(np.uint8))
    return out


def probe_many(hashes, data, offsets, lengths, *, any_of=False) -> np.ndarray:
    """Probe hashes against R filters stored in one buffer.

    Filter r is `data[offsets[r] : offsets[r] + lengths[r]]` (a raw bitset); `lengths[r] == -1`
    means there is no filter, so every value may be present. Returns bool `(len(hashes), R)`:
    True where value v may be in row group r; with `any_of=True`, bool `(R,)`: True where some
    value may be present (an empty `hashes` gives all False)."""
    h = _as_hashes(hashes)
    buf = _as_u8(data)
    offs, lens = _as_index(offsets, "offsets"), _as_index(lengths, "lengths")
    if offs.shape != lens.shape:
        raise ValueError(f"offsets {offs.shape} and lengths {lens.shape} differ in shape")
    present = lens != -1
    if present.any():
        po, pl = offs[present], lens[present]
        bad = (pl < MIN_BYTES) | (pl % SBBF_BLOCK_BYTES != 0) | (pl // SBBF_BLOCK_BYTES > _MAX_BLOCKS)
        bad |= (po < 0) | (po > len(buf) - pl)
        if bad.any():
            r = int(np.flatnonzero(present)[np.argmax(bad)])
            raise ValueError(f"filter {r}: (offset {int(offs[r])}, length {int(lens[r])}) is not a positive "
                             f"multiple of {SBBF_BLOCK_BYTES} bytes inside the {len(buf)}-byte buffer "
                             "(length -1 marks a missing filter)")
    if any_of:
        out = np.empty(len(offs), np.bool_)
        _sbbf.probe_any(h, buf, offs, lens, out.view(np.uint8))
    else:
        out = np.empty((len(h), len(offs)), np.bool_)
        _sbbf.probe_matrix(h, buf, offs, lens, out.view(np.uint8))
    return out


def _as_index(a, what):
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"{what} must be integers, got {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{what} value {int(arr.max())} does not fit int64")
    return np.ascontiguousarray(arr, np.int64)


# --- sizing -----------------------------------------------------------------------------------


def optimal_num_bytes(ndv: int, fpp: float = 0.01) -> int:
    """Bitset size for `ndv` distinct values at false-positive probability `fpp`, as Parquet writers
    size it: bits = -8*ndv / ln(1 - fpp**(1/8)), truncated, clamped to [32 B, 128 MiB], then rounded
    up to a power of two (the same arithmetic as Arrow C++, so sizes match pyarrow's)."""
    if isinstance(ndv, bool) or not isinstance(ndv, (int, np.integer)) or ndv < 0:
        raise ValueError(f"ndv must be a non-negative int, got {ndv!r}")
    fpp = float(fpp)
    if not 0.0 < fpp < 1.0:
        raise ValueError(f"fpp must be in (0, 1), got {fpp}")
    m = -8.0 * int(ndv) / math.log(1.0 - fpp ** (1.0 / 8))
    bits = MAX_BYTES * 8 if m > MAX_BYTES * 8 else int(m)
    bits = max(bits, MIN_BYTES * 8)
    bits = 1 << (bits - 1).bit_length()  # next power of two (bits is already >= 256)
    return bits // 8


def expected_fpp(num_bytes: int, ndv: int) -> float:
    """False-positive probability of a `num_bytes` filter holding `ndv` distinct values.

    A block receiving j values has, in each of its 8 words, a given bit set with probability
    1 - (31/32)**j; j is Binomial(ndv, 1/nblocks). Sum over j of P(j) * (1 - (31/32)**j) ** 8."""
    nblocks = _check_num_bytes(num_bytes) // SBBF_BLOCK_BYTES
    if ndv < 0:
        raise ValueError(f"ndv must be >= 0, got {ndv}")
    ndv = int(ndv)
    if ndv == 0:
        return 0.0
    if nblocks == 1:
        return (1.0 - (31 / 32) ** ndv) ** 8
    p = 1.0 / nblocks
    lam = ndv * p
    jmax = min(ndv, int(lam + 12 * math.sqrt(lam) + 40))  # the tail beyond is < 1e-30
    total = 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    lg_n = math.lgamma(ndv + 1)
    for j in range(1, jmax + 1):
        log_pmf = lg_n - math.lgamma(j + 1) - math.lgamma(ndv - j + 1) + j * log_p + (ndv - j) * log_q
        total += math.exp(log_pmf) * (1.0 - (31 / 32) ** j) ** 8
    return total


# --- the public filter --------------------------------------------------------------------------


class SplitBlockBloomFilter:
    """A Parquet split-block bloom filter over a raw bitset (no Thrift header).

    `values` for `insert`/`contains`: a numpy array of int32 / int64 / float32 / float64 (hashed as
    that Parquet physical type; smaller ints widen to INT32, unsigned ints keep their bits,
    datetime64 hashes its int64), a 2-D uint8 array of fixed-size byte rows, or a sequence or Arrow
    array of bytes / str (str as UTF-8). Nulls and NaN are never inserted and never contained.
    Not safe for concurrent `insert` from several threads (probes are)."""

    __slots__ = ("_bits",)

    def __init__(self, num_bytes: int):
        self._bits = np.zeros(_check_num_bytes(num_bytes), np.uint8)

    @classmethod
    def for_ndv(cls, ndv: int, fpp: float = 0.01) -> "SplitBlockBloomFilter":
        """An empty filter sized for `ndv` distinct values at false-positive rate `fpp`."""
        return cls(optimal_num_bytes(ndv, fpp))

    @classmethod
    def from_bytes(cls, bitset) -> "SplitBlockBloomFilter":
        """A filter over a copy of a raw bitset (length a positive multiple of 32)."""
        bits = _bitset(bitset)
        self = cls.__new__(cls)
        self._bits = bits.copy()
        return self

    @classmethod
    def from_parquet(cls, f_or_bytes, offset: int, length: int | None = None) -> "SplitBlockBloomFilter":
        """The filter stored in a Parquet file at `offset` (ColumnMetaData.bloom_filter_offset)."""
        return cls.from_bytes(read_parquet_bloom(f_or_bytes, offset, length))

    @property
    def num_bytes(self) -> int:
        return len(self._bits)

    @property
    def bitset(self) -> np.ndarray:
        """Read-only uint8 view of the raw bitset (no copy)."""
        view = self._bits.view()
        view.flags.writeable = False
        return view

    def insert(self, values) -> None:
        _sbbf.insert(self._bits, hash_values(values))

    def insert_hashes(self, hashes) -> None:
        _sbbf.insert(self._bits, _as_hashes(hashes))

    def contains(self, values) -> np.ndarray:
        """bool[len(values)]: True where the value may have been inserted (False: certainly not)."""
        hashes, valid = _hash(values)
        out = np.empty(len(hashes), np.bool_)
        _sbbf.probe(self._bits, hashes, out.view(np.uint8))
        if valid is not None:
            out &= valid
        return out

    def contains_hashes(self, hashes) -> np.ndarray:
        h = _as_hashes(hashes)
        out = np.empty(len(h), np.bool_)
        _sbbf.probe(self._bits, h, out.view(np.uint8))
        return out

    def __contains__(self, value) -> bool:
        if isinstance(value, (bytes, bytearray, memoryview, str)) or value is None:
            return bool(self.contains([value])[0])
        if isinstance(value, np.generic):
            return bool(self.contains(np.array([value]))[0])
        raise TypeError(f"`in` needs bytes, str or a numpy scalar (whose dtype picks the Parquet type), "
                        f"not {type(value).__name__}")

    def to_bytes(self) -> bytes:
        return self._bits.tobytes()

    def __eq__(self, other):
        if not isinstance(other, SplitBlockBloomFilter):
            return NotImplemented
        return np.array_equal(self._bits, other._bits)

    __hash__ = None  # mutable

    def __repr__(self):
        return f"SplitBlockBloomFilter(num_bytes={self.num_bytes})"


# --- Parquet BloomFilterHeader (Thrift compact protocol) ------------------------------------------

# Compact protocol type ids.
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT, _UUID = range(14)
_FIXED_SIZE = {_BYTE: 1, _DOUBLE: 8, _UUID: 16}
_MAX_DEPTH = 16  # nesting a bloom header never needs; stops hostile recursion
_HEADER_PROBE = 256  # bytes read first when the header length is unknown


class _Truncated(ParquetFormatError):
    """The header runs past the bytes given (read_parquet_bloom reads more and retries)."""


class _Compact:
    """Bounded reader of Thrift compact bytes; `base` is the file offset of buf[0] for messages."""

    __slots__ = ("buf", "pos", "base")

    def __init__(self, buf, pos, base):
        self.buf, self.pos, self.base = buf, pos, base

    def fail(self, what, pos=None):
        return ParquetFormatError(f"bloom filter header at offset {self.base + (self.pos if pos is None else pos)}: "
                                  f"{what}")

    def byte(self):
        if self.pos >= len(self.buf):
            raise _Truncated(f"bloom filter header at offset {self.base + self.pos}: truncated")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self, max_bytes=10):
        start, shift, value = self.pos, 0, 0
        for _ in range(max_bytes):
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
        raise self.fail(f"varint longer than {max_bytes} bytes", start)

    def zigzag(self, max_bytes):
        v = self.varint(max_bytes)
        return (v >> 1) ^ -(v & 1)

    def field(self, last_id):
        """(type, id) of the next field, (_STOP, 0) at the end of a struct."""
        at = self.pos
        b = self.byte()
        ftype, delta = b & 0x0F, b >> 4
        if ftype == _STOP:
            return _STOP, 0
        if ftype > _UUID:
            raise self.fail(f"unknown compact type {ftype}", at)
        fid = last_id + delta if delta else self.zigzag(3)
        return ftype, fid

    def skip(self, ftype, depth):
        if depth > _MAX_DEPTH:
            raise self.fail("nested deeper than a bloom filter header can be")
        if ftype in (_TRUE, _FALSE):
            return
        if ftype in (_I16, _I32, _I64):
            self.varint()
        elif ftype in _FIXED_SIZE:
            self.take(_FIXED_SIZE[ftype])
        elif ftype == _BINARY:
            self.take(self.varint(5))
        elif ftype in (_LIST, _SET):
            b = self.byte()
            size, etype = b >> 4, b & 0x0F
            if size == 15:
                size = self.varint(5)
            for _ in range(size):
                self.skip(_BYTE if etype in (_TRUE, _FALSE) else etype, depth + 1)
        elif ftype == _MAP:
            size = self.varint(5)
            if size:
                kv = self.byte()
                for _ in range(size):
                    self.skip(kv >> 4, depth + 1)
                    self.skip(kv & 0x0F, depth + 1)
        elif ftype == _STRUCT:
            last = 0
            while True:
                t, last = self.field(last)
                if t == _STOP:
                    return
                self.skip(t, depth + 1)
        else:
            raise self.fail(f"unknown compact type {ftype}")

    def take(self, n):
        if self.pos + n > len(self.buf):
            raise _Truncated(f"bloom filter header at offset {self.base + self.pos}: truncated "
                             f"({n} bytes wanted)")
        self.pos += n

    def union(self, name):
        """Id of the one member set in a union whose members are all structs (their content skipped).
        A member of another wire type cannot be one of them: skipped, as Thrift skips a mistyped field."""
        at = self.pos
        chosen, last = None, 0
        while True:
            t, fid = self.field(last)
            if t == _STOP:
                break
            last = fid
            if t != _STRUCT:
                self.skip(t, 1)
                continue
            if chosen is not None:
                raise self.fail(f"{name} union has more than one member set", at)
            self.skip(_STRUCT, 1)
            chosen = fid
        if chosen is None:
            raise self.fail(f"{name} union has no member set", at)
        return chosen


# BloomFilterHeader field ids and the only union members Parquet defines.
_F_NUM_BYTES, _F_ALGORITHM, _F_HASH, _F_COMPRESSION = 1, 2, 3, 4
_BLOCK, _XXHASH, _UNCOMPRESSED = 1, 1, 1
# Each field's wire type (parquet.thrift): one of another type is skipped and counts as absent.
_WANT = {_F_NUM_BYTES: _I32, _F_ALGORITHM: _STRUCT, _F_HASH: _STRUCT, _F_COMPRESSION: _STRUCT}
_TYPE_NAMES = ("stop", "bool", "bool", "byte", "i16", "i32", "i64", "double", "binary", "list", "set", "map",
               "a union", "uuid")


def _parse_header(buf, offset, base):
    """(num_bytes, header_length) of the header at buf[offset:]; messages add `base` to positions."""
    r = _Compact(buf, offset, base)
    fields, mistyped = {}, {}
    last = 0
    names = {_F_ALGORITHM: "algorithm", _F_HASH: "hash", _F_COMPRESSION: "compression"}
    while True:
        at = r.pos
        t, fid = r.field(last)
        if t == _STOP:
            break
        last = fid
        if fid in _WANT and t != _WANT[fid]:
            mistyped[fid] = t
            r.skip(t, 1)
        elif fid == _F_NUM_BYTES:
            fields[fid] = r.zigzag(5)
        elif fid in names:
            fields[fid] = (r.union(names[fid]), at)
        else:
            r.skip(t, 1)  # a field added after this reader was written
    for fid, name in ((_F_NUM_BYTES, "numBytes"), *names.items()):
        if fid not in fields:
            why = ""
            if fid in mistyped:
                t = mistyped[fid]
                why = (f": field {fid} has compact type {_TYPE_NAMES[t]}, "  # field() allows t <= _UUID only
                       f"expected {_TYPE_NAMES[_WANT[fid]]}, and is skipped")
            raise r.fail(f"required field {fid} ({name}) missing{why}", offset)
    for fid, want, what in ((_F_ALGORITHM, _BLOCK, "BLOCK"), (_F_HASH, _XXHASH, "XXHASH"),
                            (_F_COMPRESSION, _UNCOMPRESSED, "UNCOMPRESSED")):
        member, at = fields[fid]
        if member != want:
            raise r.fail(f"unsupported {names[fid]} (union member {member}); only {what} is supported", at)
    num_bytes = fields[_F_NUM_BYTES]
    if num_bytes < MIN_BYTES or num_bytes % SBBF_BLOCK_BYTES:
        raise r.fail(f"numBytes {num_bytes} is not a positive multiple of {SBBF_BLOCK_BYTES}", offset)
    return num_bytes, r.pos - offset


def _offset_arg(offset):
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"offset must be an int, got {type(offset).__name__}")
    if offset < 0:
        raise ParquetFormatError(f"bloom filter offset {int(offset)} is negative")
    return int(offset)


def parse_bloom_header(buf, offset: int = 0) -> tuple[int, int]:
    """(num_bytes, header_length) of the Thrift compact BloomFilterHeader at buf[offset:].

    Raises ParquetFormatError (with the offset) on malformed or truncated bytes, or unless the
    filter is BLOCK / XXHASH / UNCOMPRESSED with num_bytes a positive multiple of 32."""
    offset = _offset_arg(offset)
    with memoryview(buf) as mv, mv.cast("B") as flat:
        return _parse_header(flat, offset, 0)


def bloom_header_bytes(num_bytes: int) -> bytes:
    """The Thrift compact BloomFilterHeader for a BLOCK / XXHASH / UNCOMPRESSED bitset."""
    num_bytes = _check_num_bytes(num_bytes)
    if num_bytes > 0x7FFFFFFF:
        raise ValueError(f"numBytes {num_bytes} does not fit the header's i32")
    z = (num_bytes << 1) & 0xFFFFFFFF  # zigzag of a non-negative i32
    out = bytearray([(1 << 4) | _I32])
    while True:
        b = z & 0x7F
        z >>= 7
        out.append(b | 0x80 if z else b)
        if not z:
            break
    # Fields 2, 3, 4 (delta 1, struct), each a union holding member 1 = empty struct; then STOP.
    member = bytes([(1 << 4) | _STRUCT, (1 << 4) | _STRUCT, _STOP, _STOP])
    return bytes(out) + member * 3 + bytes([_STOP])


def read_parquet_bloom(f_or_bytes, offset: int, length: int | None = None) -> bytes:
    """The raw bitset of the bloom filter at `offset` of a Parquet file (header skipped).

    `f_or_bytes`: a path, a binary file object (seek/read) or a buffer holding the whole file.
    `length` (ColumnMetaData.bloom_filter_length, header + bitset) is checked when given and lets
    a file be read with one call."""
    offset = _offset_arg(offset)
    if length is not None:
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
            raise TypeError(f"length must be an int or None, got {type(length).__name__}")
        length = int(length)
        if length <= 0:
            raise ParquetFormatError(f"bloom filter at offset {offset}: length {length} is not positive")
    if isinstance(f_or_bytes, (str, os.PathLike)):
        with open(f_or_bytes, "rb") as fh:
            return _read_from_file(fh, offset, length)
    if hasattr(f_or_bytes, "read") and hasattr(f_or_bytes, "seek"):
        return _read_from_file(f_or_bytes, offset, length)
    with memoryview(f_or_bytes) as mv, mv.cast("B") as flat:
        end = len(flat) if length is None else min(len(flat), offset + length)
        if offset >= len(flat):
            raise ParquetFormatError(f"bloom filter offset {offset} is past the end ({len(flat)} bytes)")
        with flat[:end] as window:
            num_bytes, hlen = _parse_header(window, offset, 0)
        _check_extent(offset, length, num_bytes, hlen, len(flat))
        return bytes(flat[offset + hlen:offset + hlen + num_bytes])


def _check_extent(offset, length, num_bytes, hlen, size):
    if length is not None and hlen + num_bytes > length:
        raise ParquetFormatError(f"bloom filter at offset {offset}: length {length} is smaller than its "
                                 f"header ({hlen}) + bitset ({num_bytes}) bytes")
    if offset + hlen + num_bytes > size:
        raise ParquetFormatError(f"bloom filter at offset {offset}: bitset of {num_bytes} bytes after a "
                                 f"{hlen}-byte header runs past the end ({size} bytes)")


def _read_from_file(fh, offset, length):
    want = length if length is not None else _HEADER_PROBE
    while True:
        fh.seek(offset)
        head = fh.read(want)
        try:
            num_bytes, hlen = _parse_header(memoryview(head), 0, offset)
            break
        except _Truncated:
            # The header is longer than what was read: read more unless the file (or length) ended.
            if len(head) < want or length is not None or want >= (1 << 20):
                raise
            want *= 4
    if length is not None and hlen + num_bytes > length:
        _check_extent(offset, length, num_bytes, hlen, offset + len(head))
    bits = head[hlen:hlen + num_bytes]
    if len(bits) < num_bytes:
        bits += fh.read(num_bytes - len(bits))
    if len(bits) < num_bytes:
        raise ParquetFormatError(f"bloom filter at offset {offset}: bitset of {num_bytes} bytes after a "
                                 f"{hlen}-byte header runs past the end of the file")
    return bytes(bits)
