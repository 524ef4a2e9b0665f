"""The decimal128 widening kernel (table/_decimals.pyx) against its obvious numpy reference: the
layout pyarrow's decimal128 holds (value, then its sign word), and the arrays direct builds."""

from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from qdbpm.table import _decimals
from qdbpm.table.build import array
from qdbpm.table.kinds import DECIMAL
from qdbpm.parquet import pages
from qdbpm.pm import layout as L


def reference(values):
    out = np.empty((len(values), 2), np.int64)
    out[:, 0] = values
    out[:, 1] = values.astype(np.int64) >> 63
    return out.ravel()


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_widen_matches_reference(dtype):
    rng = np.random.default_rng(17)
    info = np.iinfo(dtype)
    edges = np.array([0, 1, -1, info.min, info.max, info.min + 1, info.max - 1], dtype)
    for n in (0, 1, 2, 7, 64, 1001):
        v = np.concatenate([edges, rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)])
        out = np.full(2 * len(v), 0x5A5A, np.int64)
        _decimals.widen(v, out)
        assert np.array_equal(out, reference(v))


def test_widen_refuses_a_wrong_size():
    with pytest.raises(ValueError, match="words"):
        _decimals.widen(np.zeros(3, np.int64), np.zeros(5, np.int64))


@pytest.mark.parametrize("ptype,dtype,t", [(L.PT_INT32, np.int32, pa.decimal128(9, 2)),
                                           (L.PT_INT64, np.int64, pa.decimal128(18, 4))])
def test_array_equals_pyarrow(ptype, dtype, t):
    """build.array's decimal column is the one pyarrow builds from the same unscaled values."""
    rng = np.random.default_rng(5)
    lim = 10 ** t.precision - 1
    v = rng.integers(-lim, lim, 500, endpoint=True).astype(dtype)
    valid = rng.random(500) > 0.2
    got = array(pages.Fixed(v, valid), DECIMAL, t, ptype)
    want = pa.array([Decimal(int(x)).scaleb(-t.scale) if ok else None for x, ok in zip(v, valid)], t)
    assert got.type == t and got.equals(want)
