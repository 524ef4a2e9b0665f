"""The block scatter kernel (qdbpm/pm/_encode.pyx) against the slice assignments it replaces, and
its bounds checks; the encoder's bytes themselves are held by the golden files (test_golden.py)."""

import numpy as np
import pytest

from qdbpm.errors import PmError
from qdbpm.pm import _encode


def reference(out, at, rows):
    for i, a in enumerate(at.tolist()):
        out[a : a + rows.shape[1]] = rows[i]


@pytest.mark.parametrize("seed", range(20))
def test_scatter_equals_slice_assignments(seed):
    rng = np.random.default_rng(seed)
    n, w = int(rng.integers(0, 50)), int(rng.integers(0, 70))
    size = int(rng.integers(w, w * n + 200))
    rows = rng.integers(0, 256, (n, w), dtype=np.uint8)
    at = rng.integers(0, size - w + 1, n).astype(np.int64)
    got, want = np.zeros(size, np.uint8), np.zeros(size, np.uint8)
    _encode.scatter(got, at, rows)
    reference(want, at, rows)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("bad", [-1, 93, 1 << 62, -(1 << 62)])
def test_a_row_that_does_not_fit_is_refused_before_any_write(bad):
    out = np.zeros(100, np.uint8)
    rows = np.ones((2, 8), np.uint8)
    with pytest.raises(PmError, match="does not fit"):
        _encode.scatter(out, np.array([0, bad], np.int64), rows)
    assert not out.any()
    with pytest.raises(PmError, match="offsets for"):
        _encode.scatter(out, np.array([0], np.int64), rows)
