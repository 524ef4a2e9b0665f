"""table/arrays.py builds the decision's Arrow columns from buffers; each equals what pa.array
makes of the same values (type and values), on seeded random inputs and the edges."""

import numpy as np
import pyarrow as pa
import pytest

from qdbpm.table import arrays

SEEDS = range(20)


@pytest.mark.parametrize("t,dt", [(pa.int32(), np.int32), (pa.int64(), np.int64)])
def test_numbers_equal_pa_array(t, dt):
    info = np.iinfo(dt)
    edges = np.array([info.min, -1, 0, 1, info.max], dt)
    for v in [edges, edges[:0], *(np.random.default_rng(s).integers(info.min, info.max, s * 7, dt) for s in SEEDS)]:
        got = arrays.numbers(v, t)
        assert got.type == t and got.equals(pa.array(v, t)) and got.null_count == 0
        got = arrays.numbers(v.tolist(), t)  # a list of Python ints too
        assert got.equals(pa.array(v, t))
    strided = np.arange(20, dtype=dt)[::3]
    assert arrays.numbers(strided, t).equals(pa.array(strided, t))


def test_booleans_equal_pa_array():
    for s in SEEDS:
        v = np.random.default_rng(s).random(s * 5 + 1) < 0.5  # lengths across byte boundaries
        got = arrays.booleans(v)
        assert got.type == pa.bool_() and got.equals(pa.array(v, pa.bool_()))
    assert arrays.booleans([]).equals(pa.array([], pa.bool_()))


def test_strings_equal_pa_array():
    pool = ["", "a", "2024-01-01", "déjà vu", "日本", "x" * 300, "tab\there", "\u0000nul"]
    for s in SEEDS:
        rng = np.random.default_rng(s)
        items = [pool[i] for i in rng.integers(0, len(pool), s * 3)]
        got = arrays.strings(items)
        assert got.type == pa.string() and got.equals(pa.array(items, pa.string()))
    assert arrays.strings([]).equals(pa.array([], pa.string()))


def test_repeated_and_taken():
    names = ["2024-01-01", "2024-01-02", "", "2024-01-04"]
    counts = [2, 0, 3, 1]
    want = [n for n, c in zip(names, counts) for _ in range(c)]
    assert arrays.repeated(names, counts).equals(pa.array(want, pa.string()))
    assert arrays.repeated([], []).equals(pa.array([], pa.string()))
    pos = np.array([3, 0, 0, 2], np.int64)
    assert arrays.taken(arrays.strings(names), pos).equals(pa.array([names[i] for i in pos], pa.string()))
    with pytest.raises(IndexError):  # Arrow's take checks every position
        arrays.taken(arrays.strings(names), np.array([4], np.int64))
