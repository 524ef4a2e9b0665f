"""Byte ranges from `_pm` alone, and fetching them through fsspec with bounded memory.

Planning reads only the chunk records; the Parquet object's size comes from the pinned snapshot,
never from a listing, and a short read is an error, not a silently shorter result.

A Parquet object replaced after its `_pm` snapshot: through S3Direct (storage/s3.py) every read
states the snapshot's size and the object's first ETag, so another version is refused. Through
another fsspec filesystem only what the bytes show is caught: a range reaching past the new end (a
shorter object) and a footer whose length or magic differ from the snapshot's; a longer object or
one of the same size can give other bytes unnoticed (then decoding fails, or rows may be wrong).
"""

from __future__ import annotations

import bisect
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..pm import layout as L
from ..errors import CorruptFileError, StorageError
from .. import buffers
from . import _coalesce, _pread
from ..parquet.constants import MAGIC
from ..storage.objects import SNAPSHOT_MISMATCH, cat, storage_errors

DEFAULT_MAX_GAP = 64 * 1024  # merge two ranges when fewer bytes than this lie between them
DEFAULT_MAX_WASTE = 0.05  # ... and the bytes fetched for nothing stay under 5% of the useful ones
DEFAULT_MAX_RANGE = 64 * 1024 * 1024  # never merge into a single request larger than this
DEFAULT_MAX_INFLIGHT = 256 * 1024 * 1024  # bytes requested but not yet consumed, per fetch call


@dataclass
class Range:
    """One request: [start, start + length) of the Parquet object, serving several chunks."""

    start: int
    length: int
    chunks: list = field(default_factory=list)  # [(row_group, column, chunk_start, chunk_length)]
    useful: int = 0  # bytes of requested chunks inside the range

    @property
    def end(self) -> int:
        return self.start + self.length


@dataclass
class Plan:
    ranges: list  # [Range] sorted by start
    all_null: list  # [(row_group, column)] answered without any fetch
    chunk_bytes: int  # sum of the chunks that will be fetched

    @property
    def fetch_bytes(self) -> int:
        return sum(r.length for r in self.ranges)


def all_null_mask(chunks, max_def_levels) -> np.ndarray:
    """NULL_COUNT == NUM_VALUES with the null count known, in a column that can hold nulls
    (`max_def_levels` per column of `chunks` > 0): the chunk decodes to nulls only. A column
    without definition levels holds values only, whatever its null count says (QuestDB counts
    the zeros of REQUIRED BYTE / SHORT / CHAR columns as nulls)."""
    known = (chunks["stat_flags"] & L.STAT_NULL_COUNT_PRESENT) != 0
    return known & (chunks["null_count"] == chunks["num_values"]) & (np.asarray(max_def_levels) > 0)


def plan(pm, row_groups=None, columns=None, *, max_gap=DEFAULT_MAX_GAP, max_range=DEFAULT_MAX_RANGE,
         max_waste=DEFAULT_MAX_WASTE, avoid=()) -> Plan:
    """Ranges covering the chosen chunks, coalesced across small holes; all-null chunks skipped.

    Two neighbours merge into one request when the hole between them is at most `max_gap` bytes
    and the range's unrequested bytes stay within `max_waste` of its requested ones: fewer
    requests without paying for much that is thrown away. `avoid`: columns (indexes) whose
    chunks in these row groups are never fetched, not even as filler inside a range."""
    rgs = np.arange(pm.row_group_count) if row_groups is None else np.asarray(row_groups, np.int64)
    cols = np.arange(pm.column_count) if columns is None else np.asarray(
        [pm.column_index(c) if isinstance(c, str) else int(c) for c in columns], np.int64)
    if rgs.size and (rgs.min() < 0 or rgs.max() >= pm.row_group_count):
        raise IndexError(f"row groups {rgs.tolist()} not in [0, {pm.row_group_count})")
    sub = pm.chunks[rgs[:, None], cols[None, :]] if rgs.size and cols.size else np.zeros((0, 0), L.CHUNK_DTYPE)
    nulls = all_null_mask(sub, pm.columns["max_def_level"][cols][None, :] if cols.size else 0)
    return plan_records(pm, rgs, cols, sub, nulls, max_gap=max_gap, max_range=max_range, max_waste=max_waste,
                        avoid=avoid)


def plan_records(pm, rgs, cols, sub, nulls, *, max_gap=DEFAULT_MAX_GAP, max_range=DEFAULT_MAX_RANGE,
                 max_waste=DEFAULT_MAX_WASTE, avoid=()) -> Plan:
    """`plan` of row groups `rgs` x columns `cols` (int64 arrays, valid indexes) from their chunk
    records `sub` (pm.chunks at rgs x cols) and `all_null_mask(sub, ...)`: `plan_many` of one unit."""
    cells = np.broadcast_to(np.asarray(cols, np.int64), sub.shape) if sub.size else np.zeros(sub.shape, np.int64)
    return plan_many([pm], [sub.shape[0]], np.asarray(rgs, np.int64), cells, sub, nulls, [avoid], max_gap=max_gap,
                     max_range=max_range, max_waste=max_waste)[0]


def _limits(pms) -> np.ndarray:
    """Each snapshot's end of Parquet data (its footer's offset) as int64; -1 for an offset past
    int64, which every chunk then fails (`_check_inside`)."""
    return np.array([pm.parquet_footer_offset if pm.parquet_footer_offset < 1 << 63 else -1 for pm in pms], np.int64)


def _check_inside(starts, lengths, limit, nulls, where):
    """CorruptFileError unless every fetched chunk (not in `nulls`) lies inside [4, limit): the
    chunk records' starts and lengths (int64 from u8: a value past int64 is negative here) against
    `limit` (per row, or one). `where(i, j)`: (pm, row group, column) of the first bad one. The
    end is compared as length > limit - start, which cannot overflow once start >= 4."""
    bad = ~nulls & ((starts < 4) | (lengths <= 0) | (limit < 4) | (lengths > limit - starts))
    if bad.any():
        i, j = (int(v[0]) for v in np.nonzero(bad))
        pm, rg, c = where(i, j)
        raise CorruptFileError(f"{pm.path}: row group {rg} column {c} chunk [{int(starts[i, j])}, "
                               f"+{int(lengths[i, j])}) is not inside the Parquet data "
                               f"[4, {pm.parquet_footer_offset}) of snapshot {pm.parquet_size}")


def plan_many(pms, counts, rgs, cols, sub, nulls, avoid, *, max_gap=DEFAULT_MAX_GAP, max_range=DEFAULT_MAX_RANGE,
              max_waste=DEFAULT_MAX_WASTE) -> list:
    """The byte-range plans of many units at once, one Plan per unit, equal to planning each alone
    (tests/table/test_coalesce.py holds it to that): a scan of thousands of partitions plans as
    many units, and per unit the numpy calls cost more than the rule. Unit u is `counts[u]`
    consecutive rows of `sub` / `nulls` (chunk records, 2-D, and their all_null_mask) of
    snapshot pms[u]; `rgs`: each row's row group; `cols`: each cell's column (2-D, like `sub`);
    `avoid[u]`: columns of unit u whose chunks are never fetched (plan's avoid).

    One pass of the coalescing kernel serves every unit: unit u's offsets are moved up by u x a
    stride wider than any unit's Parquet data plus max_gap, so no range spans two units and each
    unit's ranges are those it would get alone; a unit's barriers outside its data are dropped
    (none can lie between two of its chunks). Past int64's room, each unit is planned alone."""
    nseg = len(pms)
    if not nseg:
        return []
    limits = _limits(pms)
    seg = np.repeat(np.arange(nseg, dtype=np.int64), counts)
    bounds = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).tolist()
    starts = sub["byte_range_start"].astype(np.int64)
    lengths = sub["total_compressed"].astype(np.int64)
    _check_inside(starts, lengths, limits[seg][:, None], nulls,
                  lambda i, j: (pms[int(seg[i])], int(rgs[i]), int(cols[i, j])))
    # past every unit's data and its gap (a gap below 0 merges nothing across units either)
    stride = int(max(int(limits.max()), 0)) + max(0, int(min(max_gap, 1 << 62))) + 1
    if nseg > 1 and stride * nseg >= 1 << 62:  # never for real files: then one unit at a time
        return [plan_many([pms[u]], [b - a], rgs[a:b], cols[a:b], sub[a:b], nulls[a:b], [avoid[u]],
                          max_gap=max_gap, max_range=max_range, max_waste=max_waste)[0]
                for u, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]
    all_null = [[] for _ in range(nseg)]
    if nulls.any():
        for i, j in zip(*(a.tolist() for a in np.nonzero(nulls))):
            all_null[int(seg[i])].append((int(rgs[i]), int(cols[i, j])))
    take = np.nonzero(~nulls)
    g = seg[take[0]]
    s, n, r, c = starts[take], lengths[take], rgs[take[0]], cols[take]
    shifted = s + g * stride if nseg > 1 else s  # one unit: nothing to move apart
    order = np.lexsort((c, r, n, shifted))  # by unit and start, then length, row group, column
    # All-null chunks are never fetched, not even as filler inside a coalesced range; nor are
    # the avoided columns' chunks. Each barrier stays within its unit.
    b_at, b_seg = [starts[nulls]], [seg[np.nonzero(nulls)[0]]]
    for u, cols_u in enumerate(avoid):
        a, b = bounds[u], bounds[u + 1]
        if len(cols_u) and b > a:
            got = pms[u].chunks[rgs[a:b, None], np.asarray(cols_u, np.int64)[None, :]]["byte_range_start"]
            b_at.append(got.ravel().astype(np.int64))
            b_seg.append(np.full(got.size, u, np.int64))
    b_at, b_seg = np.concatenate(b_at), np.concatenate(b_seg)
    if nseg > 1:
        inside = (b_at >= 0) & (b_at < stride)
        b_at = b_at[inside] + b_seg[inside] * stride
    barriers = np.sort(b_at)
    shifted, g = shifted[order], g[order]
    s, n, r, c = (a[order].tolist() for a in (s, n, r, c))
    plans = [Plan([], all_null[u], 0) for u in range(nseg)]
    if s:
        first, _, length, useful = (a.tolist() for a in _coalesce.runs(
            shifted, np.asarray(n, np.int64), barriers, float(max_gap), float(max_range), float(max_waste)))
        items = list(zip(r, c, s, n))
        ends = first[1:] + [len(s)]
        gl = g.tolist()
        for i, j, ln, u in zip(first, ends, length, useful):
            plans[gl[i]].ranges.append(Range(s[i], ln, items[i:j], u))
        for u, ln in zip(gl, n):  # Python ints: exact
            plans[u].chunk_bytes += ln
    return plans


def coalesce(spans, *, max_gap=DEFAULT_MAX_GAP, max_range=DEFAULT_MAX_RANGE, max_waste=DEFAULT_MAX_WASTE,
             barriers=()) -> list:
    """The one coalescing rule. spans: [(start, length, item)] sorted by start -> [Range] whose
    `chunks` are the items. A span joins the previous range when the hole between them is at most
    `max_gap` bytes, the merged range stays within `max_range` bytes, its bytes fetched for nothing
    stay within `max_waste` of the requested ones, and no barrier offset (sorted) lies in the hole.
    Decided by the kernel table/_coalesce.runs; `coalesce_reference` is the rule in Python."""
    starts, lengths = [sp[0] for sp in spans], [sp[1] for sp in spans]
    return _ranges(starts, lengths, [sp[2] for sp in spans], np.asarray(barriers, np.int64), max_gap, max_range,
                   max_waste)


def _ranges(starts, lengths, items, barriers, max_gap, max_range, max_waste) -> list:
    """coalesce over lists of starts, lengths and items (sorted by start), barriers an int64 array."""
    if not starts:
        return []
    first, at, length, useful = (a.tolist() for a in _coalesce.runs(
        np.asarray(starts, np.int64), np.asarray(lengths, np.int64), np.ascontiguousarray(barriers, np.int64),
        float(max_gap), float(max_range), float(max_waste)))
    ends = first[1:] + [len(starts)]
    return [Range(a, n, items[i:j], u) for a, n, u, i, j in zip(at, length, useful, first, ends)]


def coalesce_reference(spans, *, max_gap=DEFAULT_MAX_GAP, max_range=DEFAULT_MAX_RANGE, max_waste=DEFAULT_MAX_WASTE,
                       barriers=()) -> list:
    """`coalesce` in Python, one span at a time: the slow, obviously correct rule its kernel is
    tested against (tests/table/test_coalesce.py)."""
    ranges = []
    cur = None
    for s, n, item in spans:
        if cur is not None:
            new_len = max(cur.end, s + n) - cur.start
            useful = cur.useful + n
            k = bisect.bisect_left(barriers, cur.end)
            crosses = k < len(barriers) and barriers[k] < s
            if (s - cur.end <= max_gap and new_len <= max_range and new_len - useful <= max_waste * useful
                    and not crosses):
                cur.length, cur.useful = new_len, useful
                cur.chunks.append(item)
                continue
        cur = Range(s, n, useful=n)
        ranges.append(cur)
        cur.chunks.append(item)
    return ranges


def fetch_footer(fs, path, pm) -> memoryview:
    """The Thrift FileMetaData of the pinned snapshot's Parquet footer, in one request of
    [footer offset, Parquet size) (both from `_pm`): the footer, its length and the PAR1 magic,
    which must say what `_pm` does (else the object was replaced: StorageError)."""
    start, n, end = pm.parquet_footer_offset, pm.parquet_footer_length, pm.parquet_size
    blob = read_range(fs, path, start, end, end)
    if len(blob) != end - start:
        raise StorageError(f"{path}: asked for the footer bytes [{start}, {end}) and got {len(blob)}; the object "
                           "is shorter than its _pm snapshot says (truncated or replaced)")
    tail = bytes(blob[-L.PARQUET_TAIL:])
    if tail[4:] != MAGIC or int.from_bytes(tail[:4], "little") != n:
        raise StorageError(f"{path}: bytes [{end - L.PARQUET_TAIL}, {end}) are {tail!r}, not the footer length {n} "
                           "and PAR1 its _pm snapshot describes (the object was replaced)")
    return memoryview(blob)[:n]


def fetch(fs, path, ranges, *, max_workers=8, max_inflight=DEFAULT_MAX_INFLIGHT, size=None) -> dict:
    """Fetch the ranges concurrently: {(row_group, column): bytes of the chunk}.

    Requests go out in waves of at most `max_inflight` bytes, so memory stays bounded by the
    result plus one wave. A response shorter than asked means the object is not what the `_pm`
    snapshot describes: StorageError.
    """
    out = {}
    waves, cur, inflight = [], [], 0
    for r in ranges:
        if cur and inflight + r.length > max_inflight:
            waves.append(cur)
            cur, inflight = [], 0
        cur.append(r)
        inflight += r.length
    if cur:
        waves.append(cur)
    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        for wave in waves:
            for chunks in pool.map(lambda r: fetch_range(fs, path, r, size), wave):
                out.update(chunks)
    return out


def _read_local(fs, path, start, end):
    """Bytes [start, end) of a local file (what `cat` gives, its errors included) into a pooled
    array (qdbpm/buffers.py): a fresh bytes object would fault in new pages on every read. The
    open, reads and close release the GIL once (`_pread.read_into`): a scan's pool thread reading
    a unit ahead waits once, not three times, for the thread holding it (TPC-H Q6: ~2-3 %)."""
    out = buffers.empty(end - start, np.uint8)
    with storage_errors(f"{path}: cannot read bytes [{start}, {end})", passing=(), why=SNAPSHOT_MISMATCH):
        return out[:_pread.read_into(os.fsencode(fs._strip_protocol(path)), start, out)]


def read_range(fs, path, start, end, size=None):
    """Bytes [start, end) of a Parquet object a `_pm` snapshot describes (a missing object is a
    StorageError): a local file by pread (`_read_local`; fsspec's open, seek and read cost ~10x
    more for a footer), else the filesystem's `cat`; `size` as `cat` takes it."""
    from fsspec.implementations.local import LocalFileSystem  # loaded once reads begin (~50 ms)

    if type(fs) is LocalFileSystem:
        return _read_local(fs, path, start, end)
    return cat(fs, path, start, end, size=size, snapshot=True)


def fetch_range(fs, path, r, size=None) -> dict:
    """One Range in one request: {(row_group, column): bytes of the chunk} (views of one buffer).
    A response shorter than asked means the object is not what the `_pm` snapshot describes;
    `size`: the snapshot's Parquet size, checked where the filesystem tells it for free."""
    blob = read_range(fs, path, r.start, r.end, size)
    if len(blob) != r.length:
        raise StorageError(f"{path}: asked for bytes [{r.start}, {r.end}) and got {len(blob)}; the "
                           "object is shorter than its _pm snapshot says (truncated or replaced)")
    return chunks_in(r, blob)


def chunks_in(r, blob) -> dict:
    """{(row_group, column): read-only view of the chunk} of Range r's bytes `blob`."""
    mv = memoryview(blob).toreadonly()
    return {(rg, c): mv[s - r.start : s - r.start + n] for rg, c, s, n in r.chunks}
