"""Arrow arrays from decoded page values (`direct`'s builds): `array` from `pages.Fixed` /
`Binary` values, the general path; `kept_array`, the kept rows of a chunk of one page without
nulls gathered into one array in one call, the path for the chunk a selective scan meets most
(TPC-H: one page per chunk), where the general path (`pages.chunk_values`, then `array`) walks
five layers of Python per chunk and passes over the rows twice for a DECIMAL (a take, then a
widen). Anything else (several pages, nulls, a page decoded lazily, rows past the page, a short
dictionary) `kept_array` leaves to the general path, which stays its reference
(tests/table/test_build.py) and raises what is wrong.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import buffers
from ..parquet import pages
from ..parquet.constants import ENCODING_PLAIN
from . import _decimals, kinds as K


def validity(valid):
    if valid is None:
        return None, 0
    n = len(valid)
    nulls = n - int(np.count_nonzero(valid))
    return (pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None), nulls


def array(v, kind, t, ptype):
    """One Arrow array of type `t` from decoded values `v` (pages.Fixed / Binary)."""
    if kind == K.BINARY:
        n = len(v.offsets) - 1
        bitmap, nulls = validity(v.valid)
        large = t in (pa.large_string(), pa.large_binary())
        if not large and v.offsets[-1] > np.iinfo(np.int32).max:
            raise pages.Unsupported("over 2 GiB of strings in one array")
        offsets = v.offsets if large else narrow(v.offsets)
        # No UTF-8 check: pyarrow's reader gives a string column's bytes as stored, valid or not
        # (tests/table/test_direct.py), and so does this.
        return pa.Array.from_buffers(t, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(v.data)], nulls)
    n = len(v.values)
    bitmap, nulls = validity(v.valid)
    if kind == K.UNSCALED:
        return pa.Array.from_buffers(pa.int64(), n, [bitmap, pa.py_buffer(aligned(v.values.astype(np.int64, copy=False)))],
                                     nulls)
    if kind == K.DECIMAL:
        wide = buffers.empty(2 * n, np.int64)
        _decimals.widen(np.ascontiguousarray(v.values), wide)
        return pa.Array.from_buffers(t, n, [bitmap, pa.py_buffer(wide)], nulls)
    return pa.Array.from_buffers(t, n, [bitmap, pa.py_buffer(aligned(np.ascontiguousarray(v.values)))], nulls)


ALIGNMENT = 8  # bytes: Arrow's least (its allocations are 64-byte aligned)


def aligned(values):
    """`values` when its data starts on an ALIGNMENT boundary, else an aligned copy. A PLAIN page's
    values are a view of the page from where its levels end (any byte), and a misaligned Arrow
    buffer makes Acero print a warning per batch (the filter pass's tables go through it) and may
    be refused by a consumer that requires alignment."""
    if values.__array_interface__["data"][0] % ALIGNMENT == 0:
        return values
    out = buffers.empty(len(values), values.dtype)
    np.copyto(out, values)
    return out


def narrow(offsets):
    """int64 offsets (the last at most int32's max, checked by the caller) as int32."""
    out = buffers.empty(len(offsets), np.int32)
    np.copyto(out, offsets, casting="unsafe")
    return out


def kept_array(split, rows, kind, t):
    """The values at `rows` (sorted int64, at least one) of a split chunk as an array of type `t`
    (`kind` K.DECIMAL or K.VIEW), as `array(pages.chunk_values(split, rows))` builds it;
    None where the chunk is not this path's."""
    if kind not in (K.DECIMAL, K.VIEW) or len(split.pages) != 1 or not len(rows):
        return None
    pg, dt = split.pages[0], pages.FIXED_DTYPES.get(split.ptype)
    if dt is None or pg.levels is not None or pg.lazy is not None or rows[-1] >= pg.n or rows[0] < 0:
        return None
    if pg.encoding in pages.DICTIONARY_ENCODINGS:
        if split.dictionary is None or pg.pos >= pg.end:
            return None
        dbuf, dn = split.dictionary
        if dn * dt.itemsize > len(dbuf):
            return None
        values = dbuf[:dn * dt.itemsize].view(dt)
        picks = buffers.empty(len(rows), np.int32)  # each checked against the dictionary's size
        pages.rle_pick(pg.buf, pg.pos + 1, pg.end, int(pg.buf[pg.pos]), pg.n, rows, picks, dn)
    elif pg.encoding == ENCODING_PLAIN and pg.n * dt.itemsize <= pg.end - pg.pos:
        values, picks = pg.buf[pg.pos:pg.pos + pg.n * dt.itemsize].view(dt), rows
    else:
        return None
    n = len(rows)
    if kind == K.DECIMAL:
        if dt.kind != "i":
            return None
        wide = buffers.empty(2 * n, np.int64)
        _decimals.take_widen(values, picks, wide)
        return pa.Array.from_buffers(t, n, [None, pa.py_buffer(wide)], 0)
    return pa.Array.from_buffers(t, n, [None, pa.py_buffer(buffers.take_checked(values, picks))], 0)
