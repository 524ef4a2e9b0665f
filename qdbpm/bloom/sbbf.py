"""Parquet split-block bloom filters (SBBF): the filter and its batch probes.

Three layers: `qdbpm._sbbf` is a nogil kernel that trusts its inputs; this module validates
dtypes, shapes and buffer bounds, allocates outputs and calls it once per batch;
`SplitBlockBloomFilter` is the small public object on top. Hashing (XXH64 of PLAIN bytes) is
`hashing`; the Thrift header that precedes a filter inside a Parquet file is
`qdbpm.parquet.bloom_header`.
"""

import math

import numpy as np

from . import _sbbf
from .hashing import as_u8, hash_values, hash_with_validity
from ..parquet.bloom_header import check_num_bytes, read_parquet_bloom
from ..pm.layout import SBBF_BLOCK_BYTES, SBBF_MAX_BLOCKS as _MAX_BLOCKS

__all__ = [
    "MAX_BYTES",
    "MIN_BYTES",
    "SplitBlockBloomFilter",
    "expected_fpp",
    "insert_hashes",
    "optimal_num_bytes",
    "probe",
    "probe_many",
]

MIN_BYTES = SBBF_BLOCK_BYTES  # one block
MAX_BYTES = 128 * 1024 * 1024  # Parquet writers' upper bound for a sized filter


# --- buffers and validation -------------------------------------------------------------------


def _as_hashes(hashes):
    arr = np.asarray(hashes)
    if arr.ndim != 1:
        raise ValueError(f"hashes must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind not in "iu" or arr.dtype.itemsize != 8:
        if arr.size == 0:
            return np.zeros(0, np.uint64)
        raise TypeError(f"hashes must be uint64 (from hash_values), got {arr.dtype}")
    return np.ascontiguousarray(arr, arr.dtype.newbyteorder("=")).view(np.uint64)


def _bitset(bitset, writable=False):
    arr = as_u8(bitset, writable)
    check_num_bytes(len(arr))
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
    buf = as_u8(data)
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
    nblocks = check_num_bytes(num_bytes) // SBBF_BLOCK_BYTES
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
        self._bits = np.zeros(check_num_bytes(num_bytes), np.uint8)

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
        hashes, valid = hash_with_validity(values)
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
