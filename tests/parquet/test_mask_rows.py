"""The keep-mask kernel (`_pages.mask_rows`, wrapped by `pages.kept_rows`) against its reference,
np.flatnonzero: every length around a word's 8 bytes, every density, any nonzero byte value."""

import numpy as np
import pytest

from qdbpm.errors import ParquetFormatError
from qdbpm.parquet import _pages, pages

SENTINEL = -7


def _reference(mask):
    return np.flatnonzero(mask).astype(np.int64)


@pytest.mark.parametrize("seed", range(60))
def test_mask_rows_equals_flatnonzero_and_writes_nothing_past_its_room(seed):
    rng = np.random.default_rng(3100 + seed)
    n = int(rng.integers(0, 40)) if seed % 3 else int(rng.integers(40, 5000))
    density = [0.0, 0.02, 0.125, 0.5, 0.97, 1.0][seed % 6]
    mask = np.where(rng.random(n) < density, rng.integers(1, 256, n), 0).astype(np.uint8)
    want = _reference(mask)
    k = len(want)
    room = np.full(k + 8 + 16, SENTINEL, np.int64)  # the kernel gets k + 8; the rest must stay
    assert _pages.mask_rows(mask, room[:k + 8]) == k
    assert room[:k].tolist() == want.tolist()
    assert (room[k + 8:] == SENTINEL).all()
    assert pages.kept_rows(mask).tolist() == want.tolist()
    assert pages.kept_rows(mask).dtype == np.int64


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 64, 1000])
def test_kept_rows_all_and_none(n):
    assert pages.kept_rows(np.zeros(n, np.uint8)).tolist() == []
    assert pages.kept_rows(np.ones(n, np.uint8)).tolist() == list(range(n))


def test_mask_rows_refuses_an_output_too_small():
    """More nonzero bytes than the output holds (less its 8 values of room) raise, in bounds."""
    mask = np.ones(100, np.uint8)
    for size in (0, 5, 8, 50, 107):
        room = np.full(size + 16, SENTINEL, np.int64)
        with pytest.raises(ParquetFormatError):
            _pages.mask_rows(mask, room[:size])
        assert (room[size:] == SENTINEL).all()
    assert _pages.mask_rows(mask, np.empty(108, np.int64)) == 100
