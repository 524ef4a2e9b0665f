"""Filtering a DECIMAL column held as its unscaled int64 values (prune.rows.unscaled_field, the
direct reader's filter pass) keeps exactly the rows the decimal128 column keeps, for every
comparison, BETWEEN and IN with literals that fit the scale and literals that do not; columns a
residual reads are never held unscaled; matching_rows gives the rows Table.filter keeps."""

import decimal

import numpy as np
import pyarrow as pa
import pytest

from qdbpm.errors import PredicateError
from qdbpm.prune import arrow as A
from qdbpm.prune import rows as Rw
from qdbpm.prune.filters import where_text

OPS = ["=", "!=", "<", "<=", ">", ">="]


def tables(seed):
    rng = np.random.default_rng(seed)
    scale = int(rng.integers(0, 6))
    precision = int(rng.integers(scale + 1, 19))
    top = 10 ** precision - 1
    n = 400
    u = rng.integers(-top, top + 1, n, dtype=np.int64)
    u[: n // 4] = rng.integers(-min(20, top), min(20, top) + 1, n // 4)  # many values near the literals below
    mask = rng.random(n) < 0.1
    t = pa.decimal128(precision, scale)
    dec = pa.array([None if m else decimal.Decimal(int(v)).scaleb(-scale) for v, m in zip(u, mask)], t)
    held = pa.array(u, pa.int64(), mask=mask)
    plain = pa.table({"x": dec, "k": np.arange(n)})
    unscaled = pa.Table.from_arrays([held, pa.array(np.arange(n))],
                                    schema=pa.schema([Rw.unscaled_field("x", t), pa.field("k", pa.int64())]))
    return rng, scale, plain, unscaled


def literal(rng, scale):
    kind = int(rng.integers(0, 4))
    base = decimal.Decimal(int(rng.integers(-20, 21))).scaleb(-scale)
    if kind == 0:
        return base  # fits the scale
    if kind == 1:
        return base + decimal.Decimal(1).scaleb(-scale - 1) * int(rng.integers(1, 10))  # between two values
    if kind == 2:
        return int(rng.integers(-3, 4))
    return float(base) if scale == 0 else float(base) + 0.5 * 10.0 ** -scale


@pytest.mark.parametrize("seed", range(60))
def test_unscaled_filters_keep_the_decimal_rows(seed):
    rng, scale, plain, unscaled = tables(seed)
    for _ in range(6):
        op = OPS[int(rng.integers(0, len(OPS)))]
        a, b = literal(rng, scale), literal(rng, scale)
        for e in (where_text(f"x {op} {a}"),
                  where_text(f"x BETWEEN {a} AND {b}"), where_text(f"x IN ({a}, {b})"),
                  where_text(f"x {op} {a} OR k = 3"), where_text(f"NOT (x {op} {b}) AND x IS NOT NULL")):
            assert "x" in Rw.unscaled_ok(e, unscaled.schema)
            want = plain.filter(A.to_arrow(e, plain.schema)).column("k")
            got = unscaled.filter(A.to_arrow(e, unscaled.schema)).column("k")
            assert got.equals(want), (e, scale)
            rows = Rw.matching_rows(plain, A.to_arrow(e, plain.schema))
            assert rows.tolist() == want.to_pylist()


def test_a_residual_reader_keeps_the_decimal_type():
    _, _, plain, unscaled = tables(1)
    e = where_text("x * 2 > 1 AND x < 5")
    assert "x" not in Rw.unscaled_ok(e, unscaled.schema)
    with pytest.raises(PredicateError, match="unscaled"):
        A.to_arrow(e, unscaled.schema)


@pytest.mark.parametrize("seed", range(40))
def test_true_rows_reads_the_bitmaps_as_fill_null_does(seed):
    # the slow, obvious reference: fill nulls with False, one byte per row, flatnonzero
    rng = np.random.default_rng(seed)
    chunks = []
    for _ in range(int(rng.integers(0, 4))):
        n = int(rng.integers(0, 300))
        vals = rng.random(n) < rng.random()
        nulls = rng.random(n) < (0 if rng.random() < 0.3 else rng.random())
        # a null's value bit is set or not at random (Arrow leaves it undefined): it must not count
        bits = [pa.py_buffer(np.packbits(x, bitorder="little")) for x in (~nulls, vals)]
        a = pa.Array.from_buffers(pa.bool_(), n, bits, int(nulls.sum()))
        lo = int(rng.integers(0, n + 1))
        chunks.append(a.slice(lo, int(rng.integers(0, n - lo + 1))))  # offsets not a multiple of 8
    m = pa.chunked_array(chunks, pa.bool_())
    want = np.flatnonzero(m.fill_null(False).to_numpy(zero_copy_only=False)) if len(m) else np.zeros(0, np.int64)
    got = Rw.true_rows(m)
    assert got.dtype == np.int64 and got.tolist() == want.tolist()
    if chunks:
        assert Rw.true_rows(chunks[0]).tolist() == np.flatnonzero(
            chunks[0].fill_null(False).to_numpy(zero_copy_only=False)).tolist()
