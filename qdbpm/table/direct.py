"""Fetched chunks straight to Arrow, without pyarrow's reader, for the column shapes whose values
qdbpm gives bit for bit; and late materialisation on top: a filtered unit decodes its predicate's
columns, filters, and gathers only the kept rows of the others.

A column is read here when the type pyarrow would give it (`ColumnSchemas.fields`, from the file's
own footer) is a plain view of its physical values (`kinds`): int32/int64/uint32/uint64, float32/64,
date32, timestamps in the Parquet unit, decimal128 of INT32/INT64 (widened), and string/binary
(large too) of BYTE_ARRAY, bytes as stored (pyarrow does not check UTF-8 either). Everything else, and any chunk whose pages
`parquet.pages` does not take, stays with pyarrow's reader (`decode.decode_partition`), whose
output this must equal (tests/table/test_direct.py holds it to that over writers and shapes).
"""

from __future__ import annotations

import threading
from functools import partial

import numpy as np
import pyarrow as pa

from ..errors import ParquetFormatError
from .. import buffers
from ..parquet import pages
from ..pm import layout as L
from ..prune.rows import unscaled_field
from . import build, kinds as K, offload, pool
from .decider import memo_key
from .decode import decoded_estimate

Unsupported = pages.Unsupported

LANES = pool.LANES  # columns decoded concurrently (this thread + the pool)
PARALLEL_BYTES = 256 * 1024  # below this many compressed bytes a unit decodes in this thread alone
# A filter pass reading at most this share of the other columns' bytes runs before they are
# decompressed, so they are decompressed only up to their last kept row (`_splits`' picks): a
# time range ending inside a row group of sorted data. The pool's threads idle meanwhile: with
# rows kept all over the unit, at most about this share / 2 of its time is lost.
CHEAP_FILTER = 1 / 4
# The predicate's columns of a unit whose other columns the pool splits ahead go to the pool too
# from this many compressed bytes (`presplit`); smaller, this thread splits them itself.
FILTER_AHEAD_BYTES = PARALLEL_BYTES
FILTER = "filter"  # presplit's key of the predicate's columns (columns are numbers)


def _splits(pm, rgs, c, blobs, all_null, picks=None):
    """Per row group, the chunk of column c split (`pages.split_chunk`), or None when all null;
    with `picks` (per row group, the rows a read keeps), only up to the last row kept."""
    ptype = int(pm.columns[c]["physical_type"])
    max_def = int(pm.columns[c]["max_def_level"])
    out = []
    for i, r in enumerate(rgs):
        if (r, c) in all_null:
            out.append(None)
            continue
        ch = pm.chunks[r, c]
        kept = None if picks is None else picks[i]
        upto = None if kept is None else int(kept[-1]) + 1 if len(kept) else 0
        out.append(pages.split_chunk(blobs[(r, c)], ptype, int(ch["codec"]), max_def, int(ch["num_values"]), upto))
    return out


def _column(pm, rgs, c, f, k, splits, picks):
    """Column c of row groups `rgs` at `picks` (per row group, its kept rows; None: all) as a
    chunked array of `f`'s type. The kept rows of consecutive row groups are joined into one
    array (one build; a broad filter keeps a few rows of each of many small row groups) while
    they number no more than the fewest rows among those row groups: a chunk, and so a batch of
    Scan.to_reader, never holds more rows than a row group. A lone row group's chunk of one page
    is gathered in one call (`build.kept_array`) where it can be."""
    if len(rgs) == 1 and splits[0] is not None and picks[0] is not None and len(picks[0]):
        got = build.kept_array(splits[0], np.ascontiguousarray(picks[0], np.int64), k, f.type)
        if got is not None:
            return pa.chunked_array([got], f.type)
    ptype = int(pm.columns[c]["physical_type"])
    chunks, group, kept, cap = [], [], 0, 0
    for i, r in enumerate(rgs):
        n = int(pm.num_rows[r]) if picks[i] is None else len(picks[i])
        if splits[i] is None:
            chunks += _joined(group, k, f.type, ptype)
            group, kept = [], 0
            chunks.append(pa.nulls(n, f.type))
            continue
        if picks[i] is not None and not n:
            continue
        cap = min(cap, int(pm.num_rows[r])) if group else int(pm.num_rows[r])
        if group and kept + n > cap:
            chunks += _joined(group, k, f.type, ptype)
            group, kept, cap = [], 0, int(pm.num_rows[r])
        group.append(pages.chunk_values(splits[i], picks[i]))
        kept += n
    chunks += _joined(group, k, f.type, ptype)
    return pa.chunked_array(chunks, f.type)


def _joined(group, k, t, ptype) -> list:
    """The arrays of `group` (chunk_values' answers): one, joined, unless its strings pass int32
    offsets, then one per piece."""
    if len(group) < 2:
        return [build.array(v, k, t, ptype) for v in group]
    got = pages.concat(group, ptype)
    if isinstance(got, pages.Binary) and got.offsets[-1] > np.iinfo(np.int32).max:
        return [build.array(v, k, t, ptype) for v in group]
    return [build.array(got, k, t, ptype)]


def _picks(pm, rgs, rows):
    """Per row group of the unit, the kept rows within it (None: all of them)."""
    if rows is None:
        return [None] * len(rgs)
    if len(rgs) == 1:  # rows lie in [0, its rows) (decode_filtered): all of them, as they are
        return [rows]
    starts = np.zeros(len(rgs) + 1, np.int64)
    np.cumsum([int(pm.num_rows[r]) for r in rgs], out=starts[1:])
    picks = []
    for i in range(len(rgs)):
        a, b = np.searchsorted(rows, starts[i:i + 2])
        picks.append(rows[a:b] - starts[i])
    return picks


def _sizes(rgs, cols, blobs, lengths=None):
    """Compressed bytes per column of `cols` over `rgs`: of `blobs`' chunks, or as `lengths` says."""
    if lengths is not None:
        return [sum(lengths.get((r, c), 0) for r in rgs) for c in cols]
    return [sum(len(blobs.get((r, c), b"")) for r in rgs) for c in cols]


def decode(pm, rgs, cols, blobs, fields, ks, all_null=(), rows=None, parallel=True) -> list:
    """Columns `cols` of row groups `rgs` as chunked arrays of `fields`' types, built as `ks` say;
    `rows`: sorted row numbers within the unit (the row groups' rows in order) to keep, None for
    all. Unsupported / ParquetFormatError: the caller hands the unit to pyarrow.

    Columns are dealt largest first to this thread and up to LANES - 1 of the shared pool's
    (`pool.run`): decompression, the kernels and numpy run without the GIL."""
    all_null = set(all_null)
    picks = _picks(pm, rgs, rows)

    def task(i):
        return lambda: _column(pm, rgs, cols[i], fields[i], ks[i], _splits(pm, rgs, cols[i], blobs, all_null), picks)

    sizes = _sizes(rgs, cols, blobs)
    n = LANES if parallel and sum(sizes) >= PARALLEL_BYTES else 1
    return pool.run([task(i) for i in range(len(cols))], sizes, n)


def _held(kind, field, unscaled):
    return kind == K.DECIMAL and field.name in unscaled


def predicate_table(pm, rgs, cols, blobs, fields, ks, all_null, unscaled=(), parallel=True) -> pa.Table:
    """A filter pass's table: columns `cols` decoded, the DECIMAL ones named in `unscaled` held as
    their unscaled int64 values (prune.rows.unscaled_field); no column: the rows' count only."""
    if not cols:
        return pa.table({"_": pa.nulls(int(sum(int(pm.num_rows[r]) for r in rgs)))}).select([])
    f1, k1 = _held_fields(fields, ks, unscaled)
    return pa.Table.from_arrays(decode(pm, rgs, cols, blobs, f1, k1, all_null, parallel=parallel), schema=pa.schema(f1))


def _length(v):
    return len(v.offsets) - 1 if isinstance(v, pages.Binary) else len(v.values)


def distinct_rows(pm, rgs, cols, blobs, fields, ks, all_null, decide, parallel=True, split=None, kept=None):
    """The filter pass decided per distinct value: (rows kept, per column its row groups' splits).

    `decide` (a `decider.Decider`): a column whose chunks are all dictionary pages is decided on its
    dictionaries (once per entry, a null once; entries decided before are looked up in its memo),
    then each row looks its index up as it is decoded (`pages.lookup_and`); any other column on
    its rows' values. The columns evaluated are padded with nulls to one length; the rows kept
    are those every column keeps. The chunks are split (decompressed) as `decode` splits
    them, when `parallel`; `split()`, when given, returns them (`presplit`'s FILTER), and
    `kept()` the rows its filter job kept with the Decider's memos (`offload.kept`), or None."""
    rows = None if kept is None else kept()
    if rows is not None:
        return rows, split()
    starts = [0]  # each row group's first row in the unit (Python ints: numpy's cumsum costs ~8 us a unit)
    for r in rgs:
        starts.append(starts[-1] + int(pm.num_rows[r]))
    n = starts[-1]
    all_null, todo, luts = set(all_null), [], {}  # todo: (field, Arrow values, (memo key, values) or None)
    if split is not None:
        splits = split()
    else:
        sizes = _sizes(rgs, cols, blobs)
        splits = pool.run([lambda c=c: _splits(pm, rgs, c, blobs, all_null) for c in cols], sizes,
                           LANES if parallel and sum(sizes) >= PARALLEL_BYTES else 1)
    index = {}
    for c, f, k, sp in zip(cols, fields, ks, splits):
        got = [None if x is None else pages.dictionary_entries(x) for x in sp]
        if any(x is not None and g is None for x, g in zip(sp, got)):  # plain pages: each row's value
            todo.append((f, _column(pm, rgs, c, f, k, sp, [None] * len(rgs)).combine_chunks(), None))
            continue
        index[f.name] = [0 if g is None else _length(g) for g in got]  # entries per row group
        key, values = decide.key(f, k, got)
        hit = None if key is None else decide.lookup(key, values)
        if hit is not None:
            luts[f.name] = hit
            continue
        ptype = int(pm.columns[c]["physical_type"])
        built = [build.array(g, k, f.type, ptype) for g in got if g is not None]
        todo.append((f, pa.concat_arrays(built) if built else pa.array([], f.type), (key, values)))
    if todo:
        # + the dictionaries' null entry
        width = max(len(d) + (f.name in index) for f, d, _ in todo)
        padded = [d if len(d) == width else pa.concat_arrays([d, pa.nulls(width - len(d), d.type)]) for _, d, _ in todo]
        truth = decide.decide(pa.Table.from_arrays(padded, schema=pa.schema([f for f, _, _ in todo])))
        if not set(truth) <= {f.name for f, _, _ in todo}:
            raise Unsupported("the filter's columns are not the decoded ones")  # never: a guard
        for f, d, key in todo:
            lut = truth.get(f.name)
            if lut is None:
                continue
            lut = lut.view(np.uint8)
            if f.name in index:  # the concatenated dictionaries, then one null entry
                lut = lut[:len(d) + 1].copy()
                if key[0] is not None:
                    decide.remember(*key, lut)
            luts[f.name] = lut
    keep = buffers.empty(n, np.uint8)  # Arrow's pool: a block the last unit freed, in cache (np.ones: 4 -> 40 us)
    keep.fill(1)
    for f, sp in zip(fields, splits):
        lut = luts.get(f.name)
        if lut is None:
            continue
        entries = index.get(f.name)
        if entries is None:
            keep &= lut[:n]
            continue
        null, base = lut[-1], 0
        for i, x in enumerate(sp):
            seg = keep[starts[i]:starts[i + 1]]
            if x is None:  # an all-null chunk
                seg &= null
            else:
                pages.lookup_and(x, lut[base:base + entries[i]], null, seg)
                base += entries[i]
    return pages.kept_rows(keep), splits


def _held_fields(fields, ks, unscaled):
    """Fields and kinds of a filter pass: DECIMAL columns in `unscaled` as their unscaled int64s."""
    return ([unscaled_field(f.name, f.type) if _held(k, f, unscaled) else f for f, k in zip(fields, ks)],
            [K.UNSCALED if _held(k, f, unscaled) else k for f, k in zip(fields, ks)])


def per_value_pass(pm, rgs, cols, blobs, fields, ks, all_null, unscaled, decide, parallel=True, split=None,
                   kept=None):
    """`distinct_rows` over predicate columns `cols` (the DECIMALs in `unscaled` held as their
    unscaled int64s), or None where it cannot evaluate a column's values (an unused dictionary
    entry the filter fails on): then the whole filter decides over the rows."""
    f1, k1 = _held_fields(fields, ks, unscaled)
    try:
        return distinct_rows(pm, rgs, cols, blobs, f1, k1, all_null, decide, parallel, split, kept)
    except (pa.ArrowException, Unsupported):
        return None


def count_filtered(pm, rgs, cols, blobs, fields, ks, all_null, unscaled, decide):
    """The rows of predicate columns `cols` that `decide` keeps (`per_value_pass`), or None."""
    got = per_value_pass(pm, rgs, cols, blobs, fields, ks, all_null, unscaled, decide)
    return None if got is None else len(got[0])


def _pool_share(sizes):
    """The columns of a filtered unit split ahead on the pool (indexes into `sizes`, the compressed
    sizes of its columns other than its predicate's): all but this thread's share of a balance
    over LANES, a single column included (this thread filters that unit meanwhile); none below
    PARALLEL_BYTES."""
    if sum(sizes) < PARALLEL_BYTES or LANES < 2:
        return []
    if len(sizes) == 1:
        return [0]
    return [j for lane in pool.balance(sizes, LANES)[1:] for j in lane]


def filter_memos(pm, cols, first, fields, ks, unscaled, decide, cache):
    """Per predicate column `first` of `cols` (`fields`, `ks`: theirs), `decide`'s memo of it (keyed
    as `distinct_rows` keys it), or None unless each has one; `cache` (a scan's) keeps the keys."""
    got = cache.get((id(fields), tuple(first), id(unscaled)))
    if got is None:
        at = [cols.index(c) for c in first]
        f1, k1 = _held_fields([fields[i] for i in at], [ks[i] for i in at], unscaled)
        dts = [pages.FIXED_DTYPES.get(int(pm.columns[c]["physical_type"])) for c in first]
        keys = None if None in dts else [memo_key(f, k, dt) for f, k, dt in zip(f1, k1, dts)]
        got = cache[id(fields), tuple(first), id(unscaled)] = (fields, unscaled, keys)  # holds what the ids name
    memos = None if not first or got[2] is None else [decide.memo_at(k) for k in got[2]]
    return memos if memos and None not in memos else None


def early_splits(items, cap) -> dict:
    """The worker's share of a scan's first units, queued before the scan plans its units
    (`Scan._batches`): per item (pm, Parquet path, row groups, columns other than the predicate's;
    an iterable, taken one at a time), in unit order, the columns `presplit` would hand the worker
    (`_pool_share`, by their chunks' sizes): the first row group's at once (the stream admits a
    first unit whatever its size), the next ones' while every chunk started, its bytes read and
    decoded (`decoded_estimate`), stays within `cap` in all. `offload.early`'s entries, for
    presplit's `early`."""
    out, used, first = {}, 0, True
    for pm, path, rgs, later in items:
        recs = [[pm.chunks[r, c] for c in later] for r in rgs]
        at = _pool_share([sum(int(row[j]["total_compressed"]) for row in recs) for j in range(len(later))])
        if not at:
            continue
        cols = [later[j] for j in at]
        chunks = np.array([row[j] for row in recs for j in at], L.CHUNK_DTYPE)
        est = decoded_estimate(chunks[:, None], np.array([pm.columns[c] for _ in rgs for c in cols],
                                                         L.COLUMN_DTYPE)[:, None])
        take, cost = [], (est + chunks["total_compressed"].astype(np.int64)).reshape(len(rgs), -1).sum(axis=1)
        for r, n in zip(rgs, cost.tolist()):
            used += n
            if not first and used > cap:
                break
            take.append(r)
            first = False
        if take:
            out.update(offload.early(pm, path, take, cols))
        if len(take) < len(rgs):
            break
    return out


def presplit(pm, rgs, first, later, blobs, all_null, lengths=None, found=None, memos=None, room=None,
             early=None) -> dict:
    """The pool's share of a filtered unit's columns, decompressed on the pool from now, for that
    unit's decode_filtered (`ready`), which then gathers every column in its own thread:
    {column: pool.Split} for the share of `later` (those not its predicate's), and under FILTER
    one Split of the predicate's columns `first` (in their order; [] when the unit's filter pass
    does not split them itself, `distinct_rows`) where they are FILTER_AHEAD_BYTES or more, or
    the pool has no share. A scan starts the next units' before decoding the current one: the pool
    decompresses while this thread filters and gathers (TPC-H Q6: the next months' price pages),
    and this thread, waiting for the pool, splits a later unit's column the pool has not
    started. Smaller predicate columns beside a share this thread splits itself (the pool still
    on the unit before, it took most of them anyway; Q6 A/B 1.025-1.037; a large float predicate
    column stays on the pool: 0.84 when it did not).
    `blobs`: the unit's chunks, or a callable reading them (`pipeline.ahead_chunks`; `lengths`,
    their sizes): the tasks read them first. `found`: the chunks' sources for the worker that
    never takes the GIL (`offload.sources`): the columns it takes are split there instead of on
    the pool, the predicate's too whatever their size (Q6 A/B: 1.108 for the share, 1.054 more for
    the predicate's columns); None: the pool alone. `memos` (`filter_memos`): the filter pass
    itself then runs on the worker too, queued right behind the predicate's columns
    (`offload.kept`; `room`: the unit's charge against the budget)."""
    all_null = set(all_null)
    sizes = _sizes(rgs, later, blobs, lengths)
    share = _pool_share(sizes)
    out = {}
    own = sum(_sizes(rgs, first, blobs, lengths)) if first and LANES > 1 else 0  # the predicate's bytes
    python = partial(_splits_all, pm, rgs, first, blobs, all_null)
    # on the worker, which costs this thread nothing; else on the pool where they are worth a lane,
    # or where the pool would otherwise idle on this unit
    ahead = own and found is not None and offload.split(pm, rgs, first, found, all_null, python, early=early)
    if ahead and memos:
        offload.kept(ahead, pm, rgs, memos, room)
    if ahead or own >= FILTER_AHEAD_BYTES or (own and not share and sum(sizes) + own >= PARALLEL_BYTES):
        out[FILTER] = ahead or pool.Split(python)
    for j in share:
        c = later[j]
        python = partial(_splits_all, pm, rgs, [c], blobs, all_null, True)
        out[c] = (found is not None and offload.split(pm, rgs, [c], found, all_null, python, True, early)) or \
            pool.Split(python)
    return out


def _splits_all(pm, rgs, cols, blobs, all_null, one=False):
    """_splits of each of `cols` (`one`: of the single one), `blobs` read first when a callable."""
    blobs = blobs() if callable(blobs) else blobs
    got = [_splits(pm, rgs, c, blobs, all_null) for c in cols]
    return got[0] if one else got


def decode_filtered(pm, rgs, cols, blobs, fields, ks, all_null, pred_cols, matching, unscaled=(),
                    decide=None, returned=None, ready=None, idle=None) -> pa.Table:
    """Late materialisation: the predicate's columns (`pred_cols` of `cols`) first; `matching(table)`
    gives the row numbers of that table that match (ascending); then the other columns at those
    rows only. The result has `cols` in order (matching rows only). `unscaled`: names of DECIMAL
    predicate columns the filter may read as their unscaled int64 values (prune.rows.unscaled_ok);
    they are widened to their type for the kept rows only. `decide`: the filter pass per
    distinct value (`distinct_rows`) where the residual is an AND of one-column conjuncts.
    `returned`: the columns of `cols` the caller keeps (None: all); a predicate column not among
    them is read for the filter only: never gathered, left out of the result. `ready`: what
    `presplit` started for this unit ({column: Split}, its predicate's columns under FILTER); with
    it every column is gathered in this thread, the pool being busy with the next units, and
    `idle()` runs while it waits (`Split`).

    Where the pool's threads help (a unit of PARALLEL_BYTES or more, nothing split ahead), the
    other columns are dealt one at a time, largest first (`pool.Deal`): the pool's threads start
    splitting them at once, while this thread decodes and filters the predicate's, and gather each
    one's kept rows as soon as the filter has named them (its pages still in cache); this thread
    then takes the columns left. A single other column so goes to the pool during the filter pass.
    Otherwise nothing runs beside this thread, so nothing is dealt: the filter pass, then each
    column at its kept rows, split here (only up to its last kept row) unless split ahead."""
    first = [i for i, c in enumerate(cols) if c in pred_cols]
    rest = [i for i, c in enumerate(cols) if c not in pred_cols]
    held = {i for i in first if _held(ks[i], fields[i], unscaled)}
    shown = {i for i, c in enumerate(cols) if returned is None or c in returned or i in rest}
    all_null = set(all_null)
    later = [cols[i] for i in rest]
    sizes = _sizes(rgs, later, blobs)
    # presplit: the pool decompresses the next units meanwhile; this thread gathers every column
    helpers = 0 if ready is not None or sum(sizes) < PARALLEL_BYTES else LANES - 1
    ready = ready or {}
    pf, pk, pnames = [fields[i] for i in first], [ks[i] for i in first], [cols[i] for i in first]
    pre = ready.get(FILTER)

    def filter_pass():  # (picks, the predicate's splits or None, the filter's table or None, rows)
        got = None if decide is None or not first else \
            per_value_pass(pm, rgs, pnames, blobs, pf, pk, all_null, unscaled, decide, not helpers,
                           None if pre is None else lambda: pre.result(idle),
                           None if pre is None else lambda: pre.kept(idle))
        if got is not None:
            return _picks(pm, rgs, got[0]), got[1], None, got[0]
        t = predicate_table(pm, rgs, pnames, blobs, pf, pk, all_null, unscaled, parallel=not helpers)
        rows = np.asarray(matching(t), np.int64)
        n = int(sum(int(pm.num_rows[r]) for r in rgs))
        # never: a guard (distinct_rows' rows are a flatnonzero, ascending and in range)
        if len(rows) and (rows[0] < 0 or rows[-1] >= n or (len(rows) > 1 and not (np.diff(rows) > 0).all())):
            raise ParquetFormatError("filter pass gave rows out of order or range")
        return _picks(pm, rgs, rows), None, t, rows

    def predicate_columns(picks, psplits, t, rows):  # the shown ones' kept rows
        by = {}
        if psplits is not None:
            for j, i in enumerate(first):
                if i in shown:
                    by[i] = _column(pm, rgs, cols[i], fields[i], ks[i], psplits[j], picks)
        elif any(i in shown for i in first):
            kept = t.take(pa.array(rows))
            for j, i in enumerate(first):
                if i in shown:
                    col = kept.column(j)
                    by[i] = _widen(col, fields[i].type) if i in held else col
        return by

    if helpers:  # nothing split ahead; a cheap filter first: each column then splits up to its last kept row
        after = sum(_sizes(rgs, pnames, blobs)) <= CHEAP_FILTER * sum(sizes)
        by, others = _gather_dealt(pm, rgs, later, [fields[i] for i in rest], [ks[i] for i in rest], blobs,
                                   all_null, sizes, helpers, after, ready, idle, filter_pass, predicate_columns)
        by.update((rest[j], col) for j, col in others.items())
    else:  # nothing runs beside this thread: the filter pass, then each column at its kept rows
        got = filter_pass()
        by = predicate_columns(*got)
        picks = got[0]
        for j, c in enumerate(later):
            sp = ready[c].result(idle) if c in ready else _splits(pm, rgs, c, blobs, all_null, picks)
            by[rest[j]] = _column(pm, rgs, c, fields[rest[j]], ks[rest[j]], sp, picks)
    out = [i for i in range(len(cols)) if i in shown]
    return pa.Table.from_arrays([by[i] for i in out], schema=pa.schema([fields[i] for i in out]))


def _gather_dealt(pm, rgs, later, lfields, lks, blobs, all_null, sizes, helpers, after, ready, idle, filter_pass,
                  predicate_columns):
    """decode_filtered with pool threads beside this one: the other columns `later` are dealt
    largest first (`pool.Deal`), the pool's threads splitting them during the filter pass (or,
    `after`, once it has named the rows), each gathered as soon as the rows are named. Returns
    ({predicate column index: array}, {index into later: array})."""
    named, box = threading.Event(), {}

    def column(j):  # split (before the filter names the rows, or `after` them), then gather
        sp = ready[later[j]].result(idle) if later[j] in ready else \
            None if after else _splits(pm, rgs, later[j], blobs, all_null)
        named.wait()
        picks = box.get("picks")
        if picks is None:  # the filter pass failed: its error is the one raised
            return None
        if sp is None:  # only up to each row group's last kept row
            sp = _splits(pm, rgs, later[j], blobs, all_null, picks)
        return _column(pm, rgs, later[j], lfields[j], lks[j], sp, picks)

    # the pool's threads start on the largest columns now, during the filter pass
    deal = pool.Deal(column, sorted(range(len(later)), key=lambda j: -sizes[j]), helpers)
    try:
        got = filter_pass()
        box["picks"] = got[0]
        named.set()
        by = predicate_columns(*got)  # first: the pool is still decompressing
        others = dict(zip(deal.items, deal.finish()))  # this thread takes the columns left
    finally:
        named.set()  # a column never waits for a filter pass that ended
        deal.close()  # every column taken ends before this returns, also when one raised
    return by, others


def _widen(col, t):
    """An int64 column of unscaled values as DECIMAL type t (the same values)."""
    a = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    valid = None if a.null_count == 0 else a.is_valid().to_numpy(zero_copy_only=False)
    values = a.fill_null(0).to_numpy() if a.null_count else a.to_numpy()
    return pa.chunked_array([build.array(pages.Fixed(values, valid), K.DECIMAL, t, L.PT_INT64)], t)
