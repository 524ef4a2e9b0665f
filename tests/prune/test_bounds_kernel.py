"""The bounds kernel (prune/_bounds.pyx, via stats.chunk_stats_at) against its reference, the
numpy chunk_stats: every output array bit for bit, on random chunk records (any flags, size
nibbles and slot bits, NaN and -0.0 payloads, equal and disordered bounds) read in place at
scattered addresses of one buffer, for every physical type and kind the kernel reads."""

from types import SimpleNamespace

import numpy as np
import pytest

from qdbpm.errors import CorruptFileError
from qdbpm.pm import layout as L
from qdbpm.pm.qdb_types import KIND_ANYSIGN, KIND_BYTES, KIND_FLOAT, KIND_INT, KIND_NONE, KIND_UINT
from qdbpm.prune import _bounds
from qdbpm.prune.stats import chunk_stats, chunk_stats_at

READ = [(L.PT_BOOLEAN, KIND_INT), (L.PT_INT32, KIND_INT), (L.PT_INT64, KIND_INT), (L.PT_INT32, KIND_UINT),
        (L.PT_INT64, KIND_UINT), (L.PT_FLOAT, KIND_FLOAT), (L.PT_DOUBLE, KIND_FLOAT), (L.PT_INT32, KIND_ANYSIGN),
        (L.PT_INT64, KIND_ANYSIGN)]
SPECIAL = np.array([0, 1, 0xFFFFFFFF, 0x80000000, 0x7FF8000000000001, 0xFFF0000000000000, 0x8000000000000000,
                    0x7FC00001, 0xFF800000, 0x80000000FFFFFFFF, 0xFFFFFFFFFFFFFFFF, 5], np.uint64)


def ctype(pt, kind, nullable):
    return SimpleNamespace(name="c", physical_type=pt, kind=kind, nullable=nullable)


def records(rng, n):
    recs = np.frombuffer(rng.integers(0, 256, n * L.CHUNK_SIZE, dtype=np.uint8).tobytes(), L.CHUNK_DTYPE).copy()
    for slot in ("min_stat", "max_stat"):
        pick = rng.random(n)
        recs[slot] = np.where(pick < 0.3, SPECIAL[rng.integers(0, len(SPECIAL), n)], recs[slot])
        recs[slot] = np.where((pick >= 0.3) & (pick < 0.6), rng.integers(-50, 50, n).astype(np.uint64), recs[slot])
    same = rng.random(n) < 0.2
    recs["max_stat"] = np.where(same, recs["min_stat"], recs["max_stat"])  # min == max: exact_eq cases
    # flags and nibbles that mostly say "present, inlined, this width", often not
    flags = recs["stat_flags"]
    flags[rng.random(n) < 0.6] |= L.STAT_MIN_PRESENT | L.STAT_MIN_INLINED | L.STAT_MAX_PRESENT | L.STAT_MAX_INLINED
    nib = rng.choice(np.array([0, 1, 4, 8, 3, 15], np.uint8), size=(n, 2))
    recs["stat_sizes"] = np.where(rng.random(n) < 0.7, nib[:, 0] | (nib[:, 1] << 4), recs["stat_sizes"])
    return recs


def scatter(rng, recs):
    """(buffer, addresses): the records at 8-aligned random gaps in one buffer."""
    gaps = rng.integers(0, 4, len(recs)) * 8
    at = np.cumsum(gaps + L.CHUNK_SIZE) - L.CHUNK_SIZE + 16
    buf = rng.integers(0, 256, int(at[-1]) + L.CHUNK_SIZE + 24 if len(recs) else 40, dtype=np.uint8)
    for i, a in enumerate(at.tolist()):
        buf[a:a + L.CHUNK_SIZE] = np.frombuffer(recs[i:i + 1].tobytes(), np.uint8)
    return buf, at.astype(np.int64)


FIELDS = ["lo", "hi", "has_lo", "has_hi", "exact_eq", "nulls_known", "nulls", "num_values", "ulo", "uhi"]


@pytest.mark.parametrize("seed", range(30))
def test_kernel_equals_chunk_stats(seed):
    rng = np.random.default_rng(seed)
    recs = records(rng, int(rng.integers(0, 400)))
    buf, at = scatter(rng, recs)
    for pt, kind in READ:
        for nullable in (True, False):
            ct = ctype(pt, kind, nullable)
            with np.errstate(invalid="ignore"):  # numpy warns casting a signalling NaN; the kernel is quiet
                want = chunk_stats(recs, ct)
            got = chunk_stats_at(buf, at, ct)
            assert got is not None and got.kind == want.kind
            for f in FIELDS:
                w, g = getattr(want, f), getattr(got, f)
                if w is None:
                    assert g is None, (f, pt, kind)
                    continue
                assert g.dtype == w.dtype and g.shape == w.shape, (f, pt, kind, g.dtype, w.dtype)
                assert g.tobytes() == w.tobytes(), (seed, f, pt, kind, nullable)


def test_kernel_outputs_bite():
    # the comparison above sees a wrong rule: a record with min > max (both present, inlined)
    recs = np.zeros(1, L.CHUNK_DTYPE)
    recs["stat_flags"] = L.STAT_MIN_PRESENT | L.STAT_MIN_INLINED | L.STAT_MAX_PRESENT | L.STAT_MAX_INLINED
    recs["min_stat"], recs["max_stat"] = 9, 3
    buf, at = scatter(np.random.default_rng(0), recs)
    st = chunk_stats_at(buf, at, ctype(L.PT_INT64, KIND_INT, True))
    assert st.lo.tolist() == [9] and st.hi.tolist() == [3] and not st.has_lo[0] and not st.has_hi[0]
    recs["max_stat"] = 12
    buf, at = scatter(np.random.default_rng(0), recs)
    st = chunk_stats_at(buf, at, ctype(L.PT_INT64, KIND_INT, True))
    assert st.has_lo[0] and st.has_hi[0] and not st.exact_eq[0]


def test_types_the_kernel_does_not_read_fall_back():
    buf, at = np.zeros(64, np.uint8), np.zeros(1, np.int64)
    for pt, kind in [(L.PT_BYTE_ARRAY, KIND_BYTES), (L.PT_INT96, KIND_NONE), (L.PT_FLOAT, KIND_INT),
                     (L.PT_INT32, KIND_FLOAT), (L.PT_BOOLEAN, KIND_ANYSIGN)]:
        assert chunk_stats_at(buf, at, ctype(pt, kind, True)) is None


def test_addresses_outside_the_buffer_are_refused():
    buf = np.zeros(200, np.uint8)
    for bad in ([-8], [200 - 63], [10**12]):
        with pytest.raises(CorruptFileError, match="outside the read buffer"):
            chunk_stats_at(buf, np.array(bad, np.int64), ctype(L.PT_INT64, KIND_INT, True))
    assert chunk_stats_at(buf, np.array([200 - 64], np.int64), ctype(L.PT_INT64, KIND_INT, True)) is not None


def test_constants_match_layout():
    c = _bounds.CONSTANTS
    assert c["CHUNK_SIZE"] == L.CHUNK_SIZE
    for name in ("stat_flags", "stat_sizes", "num_values", "null_count", "min_stat", "max_stat"):
        assert c[name] == L.CHUNK_AT[name], name
    assert c["flags"] == (L.STAT_MIN_PRESENT, L.STAT_MIN_INLINED, L.STAT_MIN_EXACT, L.STAT_MAX_PRESENT,
                          L.STAT_MAX_INLINED, L.STAT_MAX_EXACT, L.STAT_NULL_COUNT_PRESENT)
    assert c["types"] == (L.PT_BOOLEAN, L.PT_INT32, L.PT_INT64, L.PT_FLOAT, L.PT_DOUBLE)
    assert L.STAT_SIZES_MAX_SHIFT == 4
