"""Parquet column chunks to numpy, page by page, for the shapes read most: flat columns (at most one
definition level), PLAIN or dictionary-encoded values of INT32, INT64, FLOAT, DOUBLE and
BYTE_ARRAY, data pages v1 and v2, any codec pyarrow ships but Hadoop's framed LZ4.

`read_chunk` takes the chunk's bytes and, optionally, the rows to keep: a late reader decodes a
column's every value only when it needs them (dictionary indices, levels) and gathers the kept
rows' values without building the rest. Anything outside those shapes raises `Unsupported`; a
malformed page ParquetFormatError (the kernel `_pages` checks every read). Callers fall back to
pyarrow's reader for both: its verdict on an odd or broken chunk stays the one users get."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import ParquetFormatError
from ..pm import layout as L
from .. import buffers
from . import _pages, _snappy, _thrift
from .codecs import Unsupported, decompress
from .constants import (ENCODING_PLAIN, ENCODING_PLAIN_DICTIONARY, ENCODING_RLE, ENCODING_RLE_DICTIONARY)

PAGE_DATA, PAGE_INDEX, PAGE_DICTIONARY, PAGE_DATA_V2 = 0, 1, 2, 3

# Physical type -> the numpy dtype of its PLAIN values (little-endian, as Parquet stores them).
FIXED_DTYPES = {L.PT_INT32: np.dtype("<i4"), L.PT_INT64: np.dtype("<i8"), L.PT_FLOAT: np.dtype("<f4"),
                L.PT_DOUBLE: np.dtype("<f8")}
SUPPORTED_TYPES = frozenset(FIXED_DTYPES) | {L.PT_BYTE_ARRAY}
DICTIONARY_ENCODINGS = (ENCODING_PLAIN_DICTIONARY, ENCODING_RLE_DICTIONARY)
rle_pick = _pages.rle_pick  # a page's dictionary indexes at picked rows (also table/build.kept_array's)
class Fixed:
    """Fixed-width values: `values` (numpy, one per row; a null's slot holds an arbitrary value)
    and `valid` (bool per row, or None when no row is null)."""

    __slots__ = ("values", "valid")

    def __init__(self, values, valid):
        self.values, self.valid = values, valid


class Binary:
    """BYTE_ARRAY values as Arrow lays them out: `offsets` (int64, rows + 1), `data` (uint8) and
    `valid` (bool per row, or None when no row is null)."""

    __slots__ = ("offsets", "data", "valid")

    def __init__(self, offsets, data, valid):
        self.offsets, self.data, self.valid = offsets, data, valid


class _Page:
    """One data page, decompressed: `n` rows, `levels` (int32 per row, or None: every value present),
    the values' encoding and their bytes buf[pos:end]. `lazy`: a Snappy page whose values are
    decoded only as far as a read asks (`_avail`), None once they all are or when they were at once."""

    __slots__ = ("n", "levels", "encoding", "buf", "pos", "end", "lazy")


def _buffer(codec, payload, size, lazy):
    """(the payload decompressed, None) or, with `lazy` and Snappy, (its buffer, the Block filling it as asked)."""
    if lazy and codec == L.CODEC_SNAPPY:
        buf = buffers.empty(size, np.uint8)
        return buf, _snappy.Block(payload, buf)
    return decompress(codec, payload, size), None


def _avail(pg, want):
    """How many bytes of the page's buffer are decoded, made at least `want` (-1 / past its end: all)."""
    if pg.lazy is None:
        return pg.end
    got = pg.lazy.fill(want)
    if got >= pg.end:
        pg.lazy = None
    return got


def _prefix(pg, share, fn):
    """fn(end) over the page's values decoded up to byte `end`: where the page is lazy, first over
    about `share` (0..1) of them (the share of its values a read takes, from the first one), then,
    where fn finds that cut short (a run or length past `end`), over the whole page."""
    if pg.lazy is None:
        return fn(pg.end)
    end = _avail(pg, pg.pos + int((pg.end - pg.pos) * min(1.0, share * 1.125)) + 256)
    if pg.lazy is not None:
        try:
            return fn(end)
        except ParquetFormatError:
            pass
    return fn(_avail(pg, -1))


def _data_page(h, body, codec, max_def, need=None):
    """The page, decompressed whole or, where only its first `need` rows are read (None: all),
    lazily (`_Page.lazy`)."""
    (_, ptype, usize, csize, n, enc, def_enc, num_nulls, _rows, def_len, rep_len, compressed) = h
    pg = _Page()
    pg.n, pg.encoding, pg.levels = n, enc, None
    if n < 0:
        raise ParquetFormatError(f"data page of {n} values")
    lazy = need is not None and need < n
    if ptype == PAGE_DATA:
        buf, pg.lazy = _buffer(codec, body, usize, lazy)
        return _v1(pg, buf, max_def, def_enc)
    # v2: levels first, never compressed; then the values, compressed when is_compressed says so
    if def_len < 0 or rep_len < 0 or def_len + rep_len > len(body) or def_len + rep_len > usize:
        raise ParquetFormatError(f"data page v2 levels ({rep_len} + {def_len} bytes) overrun the page")
    if rep_len:
        raise Unsupported("repetition levels")
    if max_def:
        pg.levels = _levels(body, 0, def_len, n)
    values = body[def_len:]
    buf, pg.lazy = _buffer(codec, values, usize - def_len, lazy) if compressed else (values, None)
    if not compressed and len(values) != usize - def_len:
        raise ParquetFormatError("data page v2 size does not match its header")
    pg.buf, pg.pos, pg.end = buf, 0, len(buf)
    return pg


def _v1(pg, buf, max_def, def_enc):
    """Data page v1 `pg` over its decompressed bytes `buf`: its definition levels, then its values."""
    pos = 0
    if max_def:
        if def_enc != ENCODING_RLE:
            raise Unsupported(f"definition levels encoded {def_enc}")
        if len(buf) < 4 or pg.lazy is not None and pg.lazy.fill(4) < 4:
            raise ParquetFormatError("data page ends inside its definition levels' length")
        ln = int(np.frombuffer(buf[:4].tobytes(), "<u4")[0])
        if ln > len(buf) - 4:
            raise ParquetFormatError(f"definition levels of {ln} bytes in a page of {len(buf)}")
        if pg.lazy is not None:
            pg.lazy.fill(4 + ln)  # every row's level: the rows' value positions follow from them
        pg.levels = _levels(buf, 4, 4 + ln, pg.n)
        pos = 4 + ln
    pg.buf, pg.pos, pg.end = buf, pos, len(buf)
    return pg


def assemble(ptype, max_def, walked, blob, decoded):
    """`split_chunk`'s Split of chunk `blob` (upto None) from the kernel's walk of it
    (`_split.split_table`'s answer: `walked` page rows, `decoded` bytes), or None where this
    path does not take it: split_chunk then decides, its errors included."""
    if ptype not in SUPPORTED_TYPES or max_def > 1:
        return None
    buf, dec = np.frombuffer(blob, np.uint8), None if decoded is None else np.frombuffer(decoded, np.uint8)
    dictionary, out = None, []
    try:
        for end, t, usize, csize, n, enc, def_enc, *_, at in walked:
            data = buf[end:end + csize] if at < 0 else dec[at:at + usize]
            if t == PAGE_DICTIONARY and enc not in (ENCODING_PLAIN, ENCODING_PLAIN_DICTIONARY):
                return None
            if t == PAGE_DICTIONARY:
                dictionary = (data, n)
                continue
            pg = _Page()
            pg.n, pg.encoding, pg.levels, pg.lazy = n, enc, None, None
            out.append(_v1(pg, data, max_def, def_enc))
    except (ParquetFormatError, Unsupported):
        return None
    return Split(ptype, dictionary, out)


def _levels(buf, pos, end, n):
    """A page's definition levels (int32 per value, 0 / 1) from buf[pos:end], or None when every
    value is present (the common page of a nullable column): no array to fill and test per row."""
    if _pages.rle_all(buf, pos, end, 1, n, 1):
        return None
    levels = buffers.empty(n, np.int32)
    _pages.rle_hybrid(buf, pos, end, 1, n, levels, 2)
    return levels


def _split_pages(blob, codec, max_def, num_values, upto=None):
    """(dictionary page bytes and value count, or None; [_Page]) of a chunk's bytes; pages past
    row `upto` (None: none are) only as far as a read asks (`_data_page`)."""
    buf = np.frombuffer(blob, np.uint8)
    pos, total, dictionary, pages = 0, 0, None, []
    while pos < len(buf) and total < num_values:
        h = _thrift.page_header(buf, pos)
        end, ptype, usize, csize = h[0], h[1], h[2], h[3]
        if usize < 0 or csize < 0 or csize > len(buf) - end:
            raise ParquetFormatError(f"page at byte {pos} of its chunk claims {csize} bytes, {len(buf) - end} left")
        body = buf[end:end + csize]
        if ptype == PAGE_DICTIONARY:
            if dictionary is not None or pages:
                raise ParquetFormatError(f"dictionary page at byte {pos} is not the chunk's first page")
            if h[5] not in (ENCODING_PLAIN, ENCODING_PLAIN_DICTIONARY) or h[4] < 0:
                raise Unsupported(f"dictionary page encoding {h[5]}")
            dictionary = (decompress(codec, body, usize), h[4])
        elif ptype in (PAGE_DATA, PAGE_DATA_V2):
            if h[4] > num_values - total:  # checked before its levels are allocated
                raise ParquetFormatError(f"data page at byte {pos} holds {h[4]} values, its chunk "
                                         f"{num_values - total} more")
            pg = _data_page(h, body, codec, max_def, None if upto is None else max(0, upto - total))
            pages.append(pg)
            total += pg.n
        elif ptype != PAGE_INDEX:
            raise Unsupported(f"page type {ptype}")
        pos = end + csize
    if total != num_values:
        raise ParquetFormatError(f"chunk's pages hold {total} values, its metadata says {num_values}")
    return dictionary, pages


def _byte_index(buf, pos, end, n):
    if n > (end - pos) // 4:  # each value has a 4-byte length: refused before allocating its index
        raise ParquetFormatError(f"{n} PLAIN BYTE_ARRAY values cannot fit in {end - pos} bytes")
    starts, lens = buffers.empty(n, np.int64), buffers.empty(n, np.int32)
    end = _pages.byte_array_index(buf, pos, end, n, starts, lens)
    return starts, lens, end


def _value_picks(pg, local):
    """For the page's rows `local` (None: all), the index of each row's value among the page's
    non-null values (-1 for a null; None when that is the row itself: every row, none null), and
    how many non-null values the page holds."""
    if pg.levels is None:
        return local, pg.n
    valid = pg.levels == 1
    count = int(np.count_nonzero(valid))
    if count == pg.n:
        return local, count
    cum = np.cumsum(valid, dtype=np.int64) - 1
    if local is None:
        return np.where(valid, cum, -1), count
    return np.where(valid[local], cum[local], -1), count


def read_chunk(blob, ptype, codec, max_def, num_values, rows=None):
    """The chunk's values (a `Fixed` or `Binary`) for `rows` (sorted int64 row numbers within the
    chunk; None: every row). Unsupported / ParquetFormatError as the module says."""
    return chunk_values(split_chunk(blob, ptype, codec, max_def, num_values), rows)


class Split:
    """A chunk cut into pages, each decompressed, its levels decoded: the costly half of a read,
    which a late reader can run before it knows the rows it will keep, or after, for the rows
    up to the last one kept only (`split_chunk`'s upto)."""

    __slots__ = ("ptype", "dictionary", "pages")

    def __init__(self, ptype, dictionary, pages):
        self.ptype, self.dictionary, self.pages = ptype, dictionary, pages


def split_chunk(blob, ptype, codec, max_def, num_values, upto=None) -> Split:
    """The first half of `read_chunk`: page headers read, pages decompressed, levels decoded.
    `upto`: rows from it on are never read (`chunk_values` asks for earlier ones only), so Snappy
    pages are decoded only as far as the values a read takes (a time range of sorted data needs
    the share of each page up to its last row)."""
    if ptype not in SUPPORTED_TYPES:
        raise Unsupported(f"physical type {ptype}")
    if max_def > 1:
        raise Unsupported("nested column")
    return Split(ptype, *_split_pages(blob, codec, max_def, num_values, upto))


def _dictionary_values(split):
    """The chunk's dictionary: a fixed-width array, or (bytes, starts, lengths); None: no dictionary."""
    if split.dictionary is None:
        return None
    dbuf, dn = split.dictionary
    if split.ptype == L.PT_BYTE_ARRAY:
        return (dbuf,) + _byte_index(dbuf, 0, len(dbuf), dn)[:2]
    dt = FIXED_DTYPES[split.ptype]
    if dn * dt.itemsize > len(dbuf):
        raise ParquetFormatError(f"dictionary page of {len(dbuf)} bytes cannot hold {dn} values")
    return dbuf[:dn * dt.itemsize].view(dt)


def dictionary_entries(split: Split):
    """The chunk's dictionary as a `Fixed` / `Binary` when every data page of the chunk is
    dictionary-encoded, None otherwise: what a filter can decide once per entry (`lookup_and`)."""
    if split.dictionary is None or any(pg.encoding not in DICTIONARY_ENCODINGS for pg in split.pages):
        return None
    dvals = _dictionary_values(split)
    return _take(*dvals, None, None) if split.ptype == L.PT_BYTE_ARRAY else Fixed(dvals, None)


def lookup_and(split: Split, lut, null, out):
    """out[row] &= lut[the row's dictionary index] over the chunk's rows, `null` (0 / 1) for a
    null row: a filter decided per entry, applied per row (`dictionary_entries` said yes). `lut`
    (uint8) has one entry per dictionary value; every index is checked against that size."""
    size = split.dictionary[1]
    if len(lut) != size or len(out) != sum(pg.n for pg in split.pages):
        raise ParquetFormatError(f"lookup of {len(lut)} entries for a dictionary of {size}")  # never: a guard
    r0 = 0
    for pg in split.pages:
        seg = out[r0:r0 + pg.n]
        r0 += pg.n
        valid = None if pg.levels is None else pg.levels == 1
        count = pg.n if valid is None else int(np.count_nonzero(valid))
        _avail(pg, -1)  # every row is looked up
        if count and pg.pos >= pg.end:
            raise ParquetFormatError("dictionary-encoded page without its bit width")
        if count == pg.n:
            _pages.rle_lookup_and(pg.buf, pg.pos + 1, pg.end, int(pg.buf[pg.pos]), count, lut, seg, size)
            continue
        if count:  # the non-null rows' values, then each row of the page takes its own
            vals = np.ones(count, np.uint8)
            _pages.rle_lookup_and(pg.buf, pg.pos + 1, pg.end, int(pg.buf[pg.pos]), count, lut, vals, size)
            seg[valid] &= vals
        if not null:
            seg[~valid] = 0


def kept_rows(keep) -> np.ndarray:
    """np.flatnonzero of a uint8 keep mask (`lookup_and`'s out) as int64 rows, by the kernel
    (`_pages.mask_rows`): about twice numpy's speed on the sparse masks a selective filter leaves.
    One pass: the rows go to a buffer with room for every row (its pages past the rows kept are never touched)."""
    out = buffers.empty(len(keep) + 8, np.int64)
    return out[:_pages.mask_rows(keep, out)]


def chunk_values(split: Split, rows=None):
    """The second half of `read_chunk`: the values of `rows` (None: all) of a split chunk."""
    ptype, pages = split.ptype, split.pages
    dvals = _dictionary_values(split)
    pieces, r0 = [], 0
    for pg in pages:
        local = None
        if rows is not None and r0 == 0 and (not len(rows) or rows[-1] < pg.n):
            local = rows  # the first page holds every row asked for (most chunks): no search, no shift
        elif rows is not None:
            a, b = np.searchsorted(rows, [r0, r0 + pg.n])
            local = rows[a:b] - r0
        r0 += pg.n
        if local is not None and not local.size:
            continue
        pieces.append(_page_values(pg, local, ptype, dvals))
    return concat(pieces, ptype)


def _page_values(pg, local, ptype, dvals):
    picks, count = _value_picks(pg, local)  # picks None: the values are the rows, in order
    nulls = picks < 0 if count != pg.n else None
    if pg.encoding in DICTIONARY_ENCODINGS:
        if dvals is None:
            raise ParquetFormatError("dictionary-encoded page in a chunk without a dictionary page")
        if pg.pos >= pg.end:
            if count:
                raise ParquetFormatError("dictionary-encoded page without its bit width")
            idx = np.empty(0, np.int32)
        else:
            size = len(dvals[1]) if ptype == L.PT_BYTE_ARRAY else len(dvals)
            if picks is None:
                idx = buffers.empty(count, np.int32)
                end = _avail(pg, -1)
                _pages.rle_hybrid(pg.buf, pg.pos + 1, end, int(pg.buf[pg.pos]), count, idx, size)
            else:  # only the picked values' indexes are read
                at = np.ascontiguousarray(picks if nulls is None else picks[~nulls], np.int64)
                idx = buffers.empty(len(at), np.int32)
                _prefix(pg, (int(at[-1]) + 1) / count if len(at) else 0.0, lambda end: _pages.rle_pick(
                    pg.buf, pg.pos + 1, end, int(pg.buf[pg.pos]), count, at, idx, size))
        if picks is None or nulls is None:
            picks = idx
        else:
            full = np.full(len(picks), -1, np.int32)
            full[~nulls] = idx
            picks = full
        if ptype == L.PT_BYTE_ARRAY:
            return _take(*dvals, picks, nulls)
        # every index is below the dictionary's size (rle_hybrid / rle_pick checked each)
        if nulls is None:
            vals = buffers.take_checked(dvals, picks)
        else:  # a null's slot takes any value: the first, or 0 with an empty dictionary
            vals = buffers.take_checked(dvals, np.maximum(picks, 0)) if len(dvals) else np.zeros(len(picks), dvals.dtype)
        return Fixed(vals, None if nulls is None else ~nulls)
    if pg.encoding != ENCODING_PLAIN:
        raise Unsupported(f"value encoding {pg.encoding}")
    if ptype == L.PT_BYTE_ARRAY:
        # each value's length leads it: the values past the last one picked are not indexed
        span = _span(picks, nulls, count)
        starts, lens, _ = _prefix(pg, span / count if count else 0.0,
                                  lambda end: _byte_index(pg.buf, pg.pos, end, span))
        return _take(pg.buf, starts, lens, picks, nulls)
    dt = FIXED_DTYPES[ptype]
    if count * dt.itemsize > pg.end - pg.pos:
        raise ParquetFormatError(f"PLAIN page of {pg.end - pg.pos} value bytes cannot hold {count} values")
    _avail(pg, pg.pos + _span(picks, nulls, count) * dt.itemsize)  # the values up to the last one picked
    vals = pg.buf[pg.pos:pg.pos + count * dt.itemsize].view(dt)
    if picks is None:
        return Fixed(vals, None)
    if nulls is None:
        return Fixed(vals[picks], None)
    return Fixed(vals[np.maximum(picks, 0)] if count else np.zeros(len(picks), dt), ~nulls)


def _span(picks, nulls, count):
    """How many of a page's `count` values lead up to the last one `picks` reads (value indexes,
    ascending but for the -1 of each null, where `nulls`; None: all)."""
    if picks is None:
        return count
    if nulls is not None:
        picks = picks[~nulls]
    return int(picks[-1]) + 1 if len(picks) else 0


def _take(src, starts, lens, picks, nulls):
    """The values `picks` (-1: null; None: all) of an indexed byte-array run in `src`."""
    offsets, data = _pages.take_bytes(src, starts, lens, picks)
    return Binary(offsets, data, None if nulls is None else ~nulls)


def concat(pieces, ptype):
    """`Fixed` / `Binary` pieces of one physical type (chunk_values' answers) as one."""
    if ptype == L.PT_BYTE_ARRAY:
        if not pieces:
            return Binary(np.zeros(1, np.int64), np.empty(0, np.uint8), None)
        if len(pieces) == 1:
            return pieces[0]
        offs = [pieces[0].offsets]
        base = int(pieces[0].offsets[-1])
        for p in pieces[1:]:
            offs.append(p.offsets[1:] + base)
            base += int(p.offsets[-1])
        return Binary(np.concatenate(offs), np.concatenate([p.data for p in pieces]), _valid(pieces))
    if not pieces:
        return Fixed(np.empty(0, FIXED_DTYPES[ptype]), None)
    if len(pieces) == 1:
        return pieces[0]
    return Fixed(np.concatenate([p.values for p in pieces]), _valid(pieces))


def _valid(pieces):
    if all(p.valid is None for p in pieces):
        return None
    return np.concatenate([np.ones(_rows(p), bool) if p.valid is None else p.valid for p in pieces])


def _rows(p):
    return len(p.offsets) - 1 if isinstance(p, Binary) else len(p.values)
