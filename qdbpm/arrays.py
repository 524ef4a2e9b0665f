"""Arrow arrays and scalars built from their buffers: the decision's columns (`Table.prune`,
`Scan.row_groups`, `Scan.byte_ranges`) and the literals of a filter's comparisons
(`prune.arrow.to_arrow`). `pa.array` and `pa.scalar` ask pyarrow's pandas shim about their input
on every call, and the shim imports pandas wherever it is installed: ~0.27 s on a process's first
call, most of a one-shot `qdbpm prune`. Numbers, names and plain literals need none of it; any
other value still goes through `pa.scalar`, whose answer (or error) it then is."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa

_EXACT = decimal.Context(prec=100)  # a decimal256's 76 digits and its scale, never rounded
_EPOCH, _EPOCH_DAY, _MICRO = dt.datetime(1970, 1, 1), dt.date(1970, 1, 1), dt.timedelta(microseconds=1)

_NUMBERS = {pa.int32(): np.int32, pa.int64(): np.int64}


def numbers(values, t) -> pa.Array:
    """An int32 / int64 array of `values` (any sequence of integers, numpy or not)."""
    v = np.ascontiguousarray(np.asarray(values, _NUMBERS[t]).reshape(-1))
    return pa.Array.from_buffers(t, len(v), [None, pa.py_buffer(v)])


def booleans(values) -> pa.Array:
    """A bool array of `values` (truthy / falsy, numpy or not)."""
    v = np.asarray(values, bool).reshape(-1)
    return pa.Array.from_buffers(pa.bool_(), len(v), [None, pa.py_buffer(np.packbits(v, bitorder="little"))])


def strings(items) -> pa.Array:
    """A string array of `items` (Python str)."""
    data = [s.encode() for s in items]
    offsets = np.zeros(len(data) + 1, np.int64)
    np.cumsum([len(b) for b in data], out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:  # never for names: a guard, and large_string would differ
        raise OverflowError("over 2 GiB of names in one string array")
    return pa.Array.from_buffers(pa.string(), len(data), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                          pa.py_buffer(b"".join(data))])


def repeated(items, counts) -> pa.Array:
    """A string array of each of `items` repeated its count of `counts` times, in order."""
    return runs(items, np.repeat(np.arange(len(items), dtype=np.int64), np.asarray(counts, np.int64)))


def runs(items, positions) -> pa.Array:
    """A string array of items[p] for each p of `positions` (int numpy), encoding each run of
    equal positions' item once: a prune's survivors name a few of thousands of partitions."""
    positions = np.asarray(positions, np.int64)
    starts = np.r_[True, positions[1:] != positions[:-1]] if len(positions) else np.zeros(0, bool)
    return taken(strings([items[i] for i in positions[starts].tolist()]), np.cumsum(starts) - 1)


def taken(array, positions) -> pa.Array:
    """array[positions] (int64 numpy positions, each checked by Arrow's take)."""
    return array.take(numbers(positions, pa.int64()))


def scalar(value, t) -> pa.Scalar:
    """pa.scalar(value, t), from a one-value array's buffers where `value` is None, or plainly of
    t's kind: a bool of bool_, an int in an integer type's range, a float of float64, a str of
    string / large_string, bytes of binary / large_binary, a date of date32, a naive datetime of
    timestamp("us"). Anything else: pa.scalar itself (its value, or its error); a decimal from
    its unscaled integer: `unscaled`."""
    if value is None:
        return pa.nulls(1, t)[0]
    kind = type(value)
    if kind is bool and t == pa.bool_():
        return _one(t, bytes([value]))
    if kind is int and pa.types.is_integer(t):
        width = np.dtype(f"{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}")
        if np.iinfo(width).min <= value <= np.iinfo(width).max:
            return _one(t, np.array([value], width))
    elif kind is float and t == pa.float64():
        return _one(t, np.array([value], np.float64))
    elif kind is str and t in (pa.string(), pa.large_string()) or kind is bytes and t in (pa.binary(), pa.large_binary()):
        try:
            data = value.encode() if kind is str else value
        except UnicodeEncodeError:  # a lone surrogate: pyarrow's error
            return pa.scalar(value, t)
        wide = t in (pa.large_string(), pa.large_binary())
        offsets = np.array([0, len(data)], np.int64 if wide else np.int32)
        if wide or len(data) <= np.iinfo(np.int32).max:
            return pa.Array.from_buffers(t, 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])[0]
    elif kind is dt.date and t == pa.date32():
        return _one(t, np.array([(value - _EPOCH_DAY).days], np.int32))
    elif kind is dt.datetime and value.tzinfo is None and t == pa.timestamp("us"):
        return _one(t, np.array([(value - _EPOCH) // _MICRO], np.int64))  # exact: timedelta integers
    return pa.scalar(value, t)


def unscaled(k: int, t) -> pa.Scalar:
    """The decimal128 / 256 scalar of type t whose unscaled value is k (k x 10^-scale); past t's
    precision, pa.scalar's answer or error for that value."""
    if t.bit_width in (128, 256) and abs(k) < 10 ** t.precision:
        return _one(t, k.to_bytes(t.bit_width // 8, "little", signed=True))
    return pa.scalar(decimal.Decimal(k).scaleb(-t.scale, _EXACT), t)


def _one(t, data) -> pa.Scalar:
    """The one value of type t whose bytes (or bit, for bool_) are `data`."""
    return pa.Array.from_buffers(t, 1, [None, pa.py_buffer(data)])[0]
