"""qdbpm/arrays.py builds the decision's Arrow columns from buffers; each equals what pa.array
makes of the same values (type and values), on seeded random inputs and the edges."""

import numpy as np
import pyarrow as pa
import pytest

from qdbpm import arrays

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
    for pos in ([], [2], [0, 0, 3, 3, 3, 1, 0], list(range(4)) * 3):
        got = arrays.runs(names, np.array(pos, np.int64))
        assert got.equals(pa.array([names[i] for i in pos], pa.string()))
    with pytest.raises(IndexError):  # Arrow's take checks every position
        arrays.taken(arrays.strings(names), np.array([4], np.int64))


def _same(value, t):
    """arrays.scalar equals pa.scalar: the same type and value, or both raise."""
    try:
        want = pa.scalar(value, t)
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as e:
        with pytest.raises(type(e)):
            arrays.scalar(value, t)
        return
    got = arrays.scalar(value, t)
    assert got.type == want.type and got.is_valid == want.is_valid, (value, t, got, want)
    assert got.equals(want) or (want.is_valid and want.as_py() != want.as_py()), (value, t, got, want)  # NaN
    if want.is_valid and isinstance(want.as_py(), float):
        assert np.float64(got.as_py()).tobytes() == np.float64(want.as_py()).tobytes()  # -0.0, NaN bits


INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


@pytest.mark.parametrize("t", INT_TYPES)
def test_scalar_integers_equal_pa_scalar(t):
    dt = np.dtype(t.to_pandas_dtype())
    lo, hi = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
    rng = np.random.default_rng(t.bit_width)
    for v in [lo, lo + 1, -1, 0, 1, hi - 1, hi, lo - 1, hi + 1, *(int(x) for x in rng.integers(lo, hi, 20, dt))]:
        _same(v, t)
    _same(None, t)


def test_scalar_floats_bools_and_nulls_equal_pa_scalar():
    for v in [0.0, -0.0, 1.5, -2.25e-308, 1.7976931348623157e308, float("inf"), float("-inf"), float("nan"),
              *np.random.default_rng(0).normal(0, 1e6, 20).tolist()]:
        _same(v, pa.float64())
    for v in [True, False, None]:
        _same(v, pa.bool_())
    for t in [pa.float64(), pa.string(), pa.binary(), pa.decimal128(10, 2), pa.date32(), pa.timestamp("us")]:
        _same(None, t)


@pytest.mark.parametrize("t", [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()])
def test_scalar_strings_and_bytes_equal_pa_scalar(t):
    text = pa.types.is_string(t) or pa.types.is_large_string(t)
    for v in ["", "a", "déjà vu", "日本語", "\x00", "x" * 1000, "\ud800"]:  # the last: a lone surrogate
        _same(v if text else v.encode("utf-8", "surrogatepass"), t)


@pytest.mark.parametrize("t", [pa.decimal128(1, 0), pa.decimal128(10, 2), pa.decimal128(38, 10), pa.decimal128(38, 0),
                               pa.decimal256(40, 3), pa.decimal256(76, 20)])
def test_scalar_decimals_equal_pa_scalar(t):
    import decimal

    rng = np.random.default_rng(t.precision)
    digits = t.precision
    values = ["0", "-0", "1", "-1", "0.5", "12.34", "-12.345", "1E+5", "1e-30",
              "9" * digits, "-" + "9" * digits, "1" + "0" * digits]  # the last two: at / past precision
    values += [str(int(x)) for x in rng.integers(-10**9, 10**9, 10)]
    for v in values:
        q = decimal.Decimal(v)
        _same(q, t)
        _same(q.scaleb(-t.scale), t)  # the same digits as a scaled value
    _same(decimal.Decimal("NaN"), t)
    # from the unscaled integer (a filter's decimal bound): pa.scalar of that value, or its error
    for k in [0, 1, -1, 10 ** digits - 1, -(10 ** digits - 1), 10 ** digits, -(10 ** digits),
              *(int(x) for x in rng.integers(-10**9, 10**9, 10))]:
        value = decimal.Decimal(k).scaleb(-t.scale, decimal.Context(prec=100))
        try:
            want = pa.scalar(value, t)
        except (pa.ArrowException, ValueError) as e:
            with pytest.raises(type(e)):
                arrays.unscaled(k, t)
            continue
        assert arrays.unscaled(k, t).equals(want) and arrays.unscaled(k, t).type == t


def test_scalar_dates_and_naive_timestamps_equal_pa_scalar():
    import datetime as dt

    rng = np.random.default_rng(11)
    days = [dt.date(1970, 1, 1), dt.date(1969, 12, 31), dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(2024, 2, 29)]
    days += [dt.date(1970, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(-700_000, 2_900_000, 20)]
    for d in days:
        _same(d, pa.date32())
    stamps = [dt.datetime(1970, 1, 1), dt.datetime(1969, 12, 31, 23, 59, 59, 999_999), dt.datetime(1, 1, 1),
              dt.datetime(9999, 12, 31, 23, 59, 59, 999_999), dt.datetime(2024, 2, 29, 12, 0, 0, 1)]
    stamps += [dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(u)) for u in rng.integers(-6 * 10**16, 2 * 10**17, 20)]
    for x in stamps:
        _same(x, pa.timestamp("us"))
    aware = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    _same(aware, pa.timestamp("us"))  # aware: pa.scalar's conversion
    _same(dt.datetime(2024, 1, 2), pa.timestamp("us", "UTC"))
    _same(dt.datetime(2024, 1, 2), pa.timestamp("ms"))
    _same(dt.datetime(2024, 1, 2), pa.date32())  # a datetime is a date, but not one of these


def test_scalar_other_values_go_to_pa_scalar():
    import datetime as dt

    _same(dt.date(2024, 1, 2), pa.date32())
    _same(5, pa.float64())  # an int for a float column: pa.scalar's conversion
    _same(True, pa.int8())  # a bool is not an int here
    _same(1.5, pa.float32())
    _same("5", pa.int32())
