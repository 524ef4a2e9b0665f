"""A filter decided once per dictionary entry, applied per row: each row's dictionary index
looked up in the entries' answers as the index is decoded (`lookup_and`, kernel
`_pages.rle_lookup_and`), the rows kept read off the mask (`kept_rows`, kernel
`_pages.mask_rows`), or both in one pass for the last lookup of a filter pass (`lookup_rows`,
kernel `_pages.rle_lookup_rows`). `direct.distinct_rows` is the caller.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParquetFormatError
from .. import buffers
from . import _pages
from .pages import Split, decoded


def lookup_and(split: Split, lut, null, out):
    """out[row] &= lut[the row's dictionary index] over the chunk's rows, `null` (0 / 1) for a
    null row: a filter decided per entry, applied per row (`dictionary_entries` said yes). `lut`
    (uint8) has one entry per dictionary value; every index is checked against that size."""
    r0 = 0
    for pg, bw, count, valid in _lookup_pages(split, lut, out):
        seg = out[r0:r0 + pg.n]
        r0 += pg.n
        if count == pg.n:
            _pages.rle_lookup_and(pg.buf, pg.pos + 1, pg.end, bw, count, lut, seg, len(lut))
        else:
            _lookup_nulls(pg, bw, count, valid, lut, null, seg)


def lookup_rows(split: Split, lut, null, keep, base, rows, j) -> int:
    """`lookup_and` over a copy of `keep` then `kept_rows`, in one pass where a page has no null
    (`_pages.rle_lookup_rows`): base + each row of the chunk kept by both appended at rows[j:];
    keep stays as it is. The last lookup of a filter pass (`direct.distinct_rows`). `rows` has
    room for len(keep) + 8 values from j. Returns the new j."""
    r0 = 0
    for pg, bw, count, valid in _lookup_pages(split, lut, keep):
        seg = keep[r0:r0 + pg.n]
        if count == pg.n:
            j = _pages.rle_lookup_rows(pg.buf, pg.pos + 1, pg.end, bw, count, lut, seg, len(lut), base + r0, rows, j)
        else:
            seg = seg.copy()
            _lookup_nulls(pg, bw, count, valid, lut, null, seg)
            j = append_kept(seg, base + r0, rows, j)
        r0 += pg.n
    return j


def _lookup_pages(split, lut, out):
    """Each page of a dictionary-encoded chunk with its values' bit width, its non-null count and
    which rows are valid (None: all), its values decoded: what `lookup_and` / `lookup_rows` walk."""
    size = split.dictionary[1]
    if len(lut) != size or len(out) != sum(pg.n for pg in split.pages):
        raise ParquetFormatError(f"lookup of {len(lut)} entries for a dictionary of {size}")  # never: a guard
    for pg in split.pages:
        valid = None if pg.levels is None else pg.levels == 1
        count = pg.n if valid is None else int(np.count_nonzero(valid))
        decoded(pg)  # every row is looked up
        if count and pg.pos >= pg.end:
            raise ParquetFormatError("dictionary-encoded page without its bit width")
        yield pg, int(pg.buf[pg.pos]) if count else 0, count, valid


def _lookup_nulls(pg, bw, count, valid, lut, null, seg):
    """seg &= the page's answers where its rows hold nulls: the non-null rows' values looked up,
    then each row of the page takes its own, `null` (0 / 1) each null row's."""
    if count:
        vals = np.ones(count, np.uint8)
        _pages.rle_lookup_and(pg.buf, pg.pos + 1, pg.end, bw, count, lut, vals, len(lut))
        seg[valid] &= vals
    if not null:
        seg[~valid] = 0


def append_kept(mask, base, rows, j) -> int:
    """base + the rows of `mask` kept (`kept_rows`) appended at rows[j:]; returns the new j."""
    got = kept_rows(mask)
    rows[j:j + len(got)] = got + base
    return j + len(got)


def kept_rows(keep) -> np.ndarray:
    """np.flatnonzero of a uint8 keep mask (`lookup_and`'s out) as int64 rows, by the kernel
    (`_pages.mask_rows`): about twice numpy's speed on the sparse masks a selective filter leaves.
    One pass: the rows go to a buffer with room for every row (its pages past the rows kept are never touched)."""
    out = buffers.empty(len(keep) + 8, np.int64)
    return out[:_pages.mask_rows(keep, out)]
