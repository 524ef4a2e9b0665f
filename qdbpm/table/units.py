"""A scan's units: each partition's surviving row groups cut into runs that are fetched and decoded
together, each with its fetch plan (`ranges.plan_many`: the one coalescing rule, over many units at once).

The size rule needs every survivor's chunk records: which chunks are all null, the bytes they
fetch and an estimate of their decoded size (`decode.decoded_estimate`). Those records are
selected once per partition and sized together, in one set of numpy calls per scan rather than
one per partition: a scan of many partitions with a row group or two surviving in each (a year of
month partitions, TPC-H Q6) otherwise spent more on these small calls than on pruning."""

from __future__ import annotations

import numpy as np

from ..pm import layout as L
from . import kinds
from .decode import decoded_estimate
from .pipeline import Unit
from .ranges import all_null_mask, plan, plan_many


BATCH_CELLS = 1 << 16  # chunk records planned together at most (4 MiB of them), a partition's all at once
_CHUNK_RAW = np.dtype((np.void, L.CHUNK_DTYPE.itemsize))
_COLUMN_RAW = np.dtype((np.void, L.COLUMN_DTYPE.itemsize))


class Job:
    """What one call of `plan_units` cuts: row groups `rgs` (int64, ascending) of partition `name`,
    at positions `idx` among its survivors (a run never spans a gap there), columns `cols`."""

    __slots__ = ("name", "pm", "path", "rgs", "idx", "cols", "full", "avoid")

    def __init__(self, name, pm, path, rgs, idx, cols, full, avoid=()):
        self.name, self.pm, self.path, self.rgs, self.idx = name, pm, path, rgs, idx
        self.cols, self.full, self.avoid = list(cols), full, avoid


def plan_units(jobs, cap, max_gap) -> list:
    """Per job, its Units in row-group order: runs of consecutive survivors, each within `cap`
    estimated bytes (fetched + decoded; a lone larger row group alone), planned by
    `ranges.plan_many` in batches of at most BATCH_CELLS chunk records (a scan of 100,000
    partitions holds a few MB of records at a time, not all of them). `avoid`: columns whose
    chunks are never fetched, not even as filler inside a range (ranges.plan)."""
    out = [[] for _ in jobs]
    by_width = {}  # column count -> jobs: their records concatenate into one 2-D array
    for k, j in enumerate(jobs):
        if len(j.rgs):
            by_width.setdefault(len(j.cols), []).append(k)
    for width, ks in by_width.items():
        if not width:  # no column (a count of full row groups): nothing fetched
            for k in ks:
                j = jobs[k]
                zero = [0] * len(j.rgs)
                out[k] = [Unit(j.name, j.pm, j.path, j.rgs[a:b].tolist(), [], j.full, plan(j.pm, j.rgs[a:b], []), 0)
                          for a, b in _cuts(j, zero, cap)]
            continue
        batch, cells = [], 0
        for k in ks:
            batch.append(k)
            cells += len(jobs[k].rgs) * width
            if cells >= BATCH_CELLS:
                _plan_batch(jobs, batch, width, cap, max_gap, out)
                batch, cells = [], 0
        if batch:
            _plan_batch(jobs, batch, width, cap, max_gap, out)
    return out


def _plan_batch(jobs, ks, width, cap, max_gap, out):
    """plan_units of jobs `ks` (each with `width` columns) into `out`."""
    # selected and joined as raw records (void): numpy indexes and joins structured arrays
    # field by field, ~9x slower over a thousand small selections
    subs, metas, ats = [], [], []
    for k in ks:
        j = jobs[k]
        at = np.asarray(j.cols, np.int64)
        subs.append(j.pm.chunks.view(_CHUNK_RAW)[j.rgs[:, None], at[None, :]])
        metas.append(j.pm.columns.view(_COLUMN_RAW)[at])
        ats.append(at)
    counts = [len(jobs[k].rgs) for k in ks]
    one = len(ks) == 1
    sub = (subs[0] if one else np.concatenate(subs)).view(L.CHUNK_DTYPE)
    rgs = jobs[ks[0]].rgs if one else np.concatenate([jobs[k].rgs for k in ks])
    cols = np.repeat(np.concatenate(ats).reshape(len(ks), width), counts, axis=0)  # each cell's column
    meta = np.repeat(np.concatenate(metas).reshape(len(ks), width), counts, axis=0).view(L.COLUMN_DTYPE)
    nulls = all_null_mask(sub, meta["max_def_level"])
    decoded = decoded_estimate(sub, meta)
    est = (decoded + np.where(nulls, 0, sub["total_compressed"].astype(np.int64)).sum(axis=1)).tolist()
    decoded, taken = decoded.tolist(), kinds.taken_rows(sub).tolist()
    segs, start = [], 0  # (job, first row, end row) of each unit
    for k, n in zip(ks, counts):
        segs += [(k, start + a, start + b) for a, b in _cuts(jobs[k], est[start:start + n], cap)]
        start += n
    plans = plan_many([jobs[k].pm for k, _, _ in segs], [b - a for _, a, b in segs], rgs, cols, sub, nulls,
                      [jobs[k].avoid for k, _, _ in segs], max_gap=max_gap)
    for (k, a, b), p in zip(segs, plans):
        j = jobs[k]
        out[k].append(Unit(j.name, j.pm, j.path, rgs[a:b].tolist(), list(j.cols), j.full, p, sum(decoded[a:b]),
                           all(taken[a:b])))


def _cuts(j, sizes, cap) -> list:
    """Job j's runs as (first, end) positions among its rows: consecutive survivors (by j.idx),
    cut before a row that would take the run past `cap` bytes (`sizes`, per row)."""
    n = len(sizes)
    if n == 1:  # the common unit: a lone survivor
        return [(0, 1)]
    idx, cuts, acc = j.idx.tolist(), [0], 0
    for i in range(n):
        if i > cuts[-1] and (idx[i] != idx[i - 1] + 1 or acc + sizes[i] > cap):
            cuts.append(i)
            acc = 0
        acc += sizes[i]
    cuts.append(n)
    return list(zip(cuts[:-1], cuts[1:]))
