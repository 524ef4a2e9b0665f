"""A scan's local reads and chunk splits handed to a thread that never takes the GIL
(`_offload.pyx`, `parquet/_split.pyx`): the wrapper, with the Future- and Split-like objects the
fetch pipeline and `direct.presplit` take.

A read (`Read`) is queued when its unit is split ahead (or its chunks are asked for); a
column's split (`split`) is queued behind it, its pages walked and decoded in C. Whoever needs
the result takes it once the worker is done, or runs the job itself if the worker has not started
it. The worker only ever answers what it can read exactly: a short read, a chunk shape or a
malformed page it does not take, is done again by the Python path (`fallback`), which gives its
answer or raises its error, as without offload. TPC-H Q6 (the reads and the splits ahead on the
worker): 1.146x against the Python pool in one process (docs/performance.md, stop 50).
"""

from __future__ import annotations

import os
import threading

import numpy as np

from .. import buffers
from ..parquet import pages
from ..parquet.codecs import SPLIT_CODECS
from . import _offload
from .pool import Deferred, Done
from .ranges import chunks_in

ENABLED = True  # False: reads and splits ahead stay on the Python pool (pool.Deferred, pool.Split)
FILTER_PASS = True  # False: a unit's filter pass stays in the calling thread (`kept` queues nothing)

_lock = threading.Lock()
_running = False


def _forked():
    global _running
    _offload.reset()  # the parent's worker is not in the child: a new one starts on first use
    _running = False


os.register_at_fork(after_in_child=_forked)


def start_worker():
    """Start the worker thread (once per process, and again in a forked child)."""
    global _running
    if not _running:
        with _lock:
            if not _running:
                threading.Thread(target=_offload.work, name="qdbpm-offload", daemon=True).start()
                _running = True


class Read(Deferred):
    """A range read by the worker (a `pool.Deferred`: made once, its answer or error handed to
    every thread that asks). `fn(*args)` (`pipeline._fetch`) reads it again in the asking thread
    when the worker could not read it all: its chunks or its error, as a read made there."""

    __slots__ = ("job", "buf", "path")

    def __init__(self, fn, args, path):
        super().__init__(fn, args)
        self.path, self.job, self.buf = path, None, None

    def start(self):
        """Queue the read (once): its unit is about to be split ahead, or its chunks are asked
        for. Reads are queued no earlier, so the worker's queue holds the next units' reads each
        right before their splits, not every admitted unit's reads before any split."""
        with self.lock:
            self._start()
        return self

    def _start(self):
        if self.job is None:
            start_worker()
            r = self.args[2]
            self.buf = buffers.empty(r.length, np.uint8)
            try:
                self.job = _offload.read(os.fsencode(self.path), r.start, self.buf)
            except ValueError:  # a name the kernel refuses (a NUL): the Python read says what is wrong
                self.job = False

    def _run(self) -> Done:
        with self.lock:
            if self.box is None:
                self._start()  # never queued: this thread reads it now (the job is its own)
                r, note = self.args[2], self.args[4]
                if self.job is False or self.job.wait() != 0:
                    self.box = Done.of(self.fn, *self.args)
                else:
                    note("fetched", r.length)
                    self.box = Done(chunks_in(r, self.buf))
        return self.box

    def cancel(self):
        return not self.job or self.job.drop()


def sources(blobs, ranges):
    """{(row_group, column): (its Read or None, buffer, offset, length)} of a unit's chunks for
    `split`: from its Reads (`blobs` a list of them, in `ranges` order) or its bytes (a dict);
    None when they are neither (a Python read in flight) or offload is off."""
    if not ENABLED:
        return None
    if isinstance(blobs, dict):
        return {k: (None, v, 0, len(v)) for k, v in blobs.items()}
    if not all(isinstance(f, Read) for f in blobs):
        return None
    for f in blobs:
        if f.start().job is False:
            return None
    return {(rg, c): (f, f.buf, s - r.start, n) for r, f in zip(ranges, blobs) for rg, c, s, n in r.chunks}


def _takes(pm, c, chunks):
    """(physical type, max definition level) of column c where the kernel splits its `chunks`
    (None: all null), else None: its type, nesting or a codec it does not decode."""
    col = pm.columns[c]
    ptype, max_def = int(col["physical_type"]), int(col["max_def_level"])
    if ptype not in pages.SUPPORTED_TYPES or max_def > 1 or any(
            ch is not None and int(ch["codec"]) not in SPLIT_CODECS for ch in chunks):
        return None
    return ptype, max_def


def split(pm, rgs, cols, found, all_null, fallback, one=False, early=None):
    """Columns `cols` of row groups `rgs` split on the worker (`found`: `sources`' answer), or
    None where the kernel cannot take one of them (its type, nesting or codec: the pool splits
    them): a Split whose result is `direct._splits_all`'s (per column, per row group; `one`: the
    single column's list); `fallback()` gives the same the Python way. A chunk `early` holds
    (`early`'s answer) is taken from there, split already or on its way."""
    takes = []
    for c in cols:
        chunks = [None if (r, c) in all_null else pm.chunks[r, c] for r in rgs]
        kind = _takes(pm, c, chunks)
        if kind is None:
            return None
        takes.append((*kind, c, chunks))
    start_worker()
    parts = []
    for ptype, max_def, c, chunks in takes:
        for r, ch in zip(rgs, chunks):
            if ch is None:
                parts.append(None)
                continue
            read, buf, at, n = found[(r, c)]
            got = early.pop((pm.path, r, c), None) if early else None
            if got is not None and got[:2] == (int(ch["byte_range_start"]), n):  # the same chunk
                parts.append((ptype, max_def, got[2], 0, n, got[3]))
                continue
            job = _offload.split(None if read is None else read.job, buf, at, n, int(ch["num_values"]),
                                 int(ch["codec"]))
            parts.append((ptype, max_def, buf, at, n, job))
    return Split(parts, len(rgs), fallback, one)


def early(pm, path, rgs, cols) -> dict:
    """Chunks of columns `cols` over row groups `rgs` of the Parquet file at `path` (snapshot
    `pm`) read and split on the worker from now, before their unit is planned: {(pm.path, row
    group, column): (start, length, buffer, split job)}, for `split`'s `early`. A column the
    kernel does not split is left out; an entry no unit takes is dropped (`discard`)."""
    out, name = {}, os.fsencode(path)
    for c in cols:
        chunks = [pm.chunks[r, c] for r in rgs]
        if _takes(pm, c, chunks) is None:
            continue
        start_worker()
        for r, ch in zip(rgs, chunks):
            start, n = int(ch["byte_range_start"]), int(ch["total_compressed"])
            buf = buffers.empty(n, np.uint8)
            try:
                rd = _offload.read(name, start, buf)
            except ValueError:  # a name the kernel refuses: the unit's own read says what is wrong
                return out
            # the split's Handle keeps its read's alive
            out[(pm.path, r, c)] = (start, n, buf, _offload.split(rd, buf, 0, n, int(ch["num_values"]),
                                                                  int(ch["codec"])))
    return out


def discard(early):
    """Drop the jobs of `early`'s entries no split took (a scan ended, or closed early)."""
    for e in early.values():
        e[3].drop()
    early.clear()


def kept(split, pm, rgs, memos, room=None):
    """Queue a unit's filter pass on the worker, right behind `split` (`split`'s Split of its
    predicate columns over row groups `rgs`): each row's value looked up in its column's
    Decider memo (`memos`: per column, in the Split's order, `Decider.memo_at`'s (values, answers)), the rows every
    column keeps gathered (`_split.lookup_split_c`, `_pages.mask_rows_c`): what
    `direct.distinct_rows` computes with those memos' LUTs. Not queued where a chunk is all null
    (its null answer is the Python pass's), nor where its mask and rows (9 bytes a row, held from
    now until the unit is read, as the next units are split ahead) would pass `room`, what the
    unit is charged against the scan's budget. `split.kept` gives the rows."""
    if not FILTER_PASS:
        return
    starts, parts = [0], []
    for r in rgs:
        starts.append(starts[-1] + int(pm.num_rows[r]))
    if room is not None and 9 * starts[-1] > room:
        return
    try:
        for ci, (known, answers) in enumerate(memos):
            bits = known.view(np.uint8)  # the memo's arrays are contiguous (np.unique's)
            for i in range(len(rgs)):
                p = split.parts[ci * split.width + i]  # (ptype, max_def, buf, at, n, job) as `split` made it
                if p is None:
                    return
                parts.append((p[5], p[0], p[1], known.dtype.itemsize, bits, len(known), answers, starts[i],
                              starts[i + 1] - starts[i]))
        n = starts[-1]
        keep, rows = buffers.empty(n, np.uint8), buffers.empty(n + 8, np.int64)
        split.rows = (_offload.filter(parts, keep, rows), rows)
    except ValueError:  # a memo the kernel cannot read (another width, not contiguous): the Python pass
        pass


class Split:
    """pool.Split's interface (`steal`, `result`, `fu.cancel`) over the split jobs of columns,
    one per row group each; with `kept`'s filter job, `kept` too."""

    __slots__ = ("parts", "width", "fallback", "one", "got", "rows")

    def __init__(self, parts, width, fallback, one):
        self.parts, self.width, self.fallback, self.one, self.got, self.rows = parts, width, fallback, one, None, None

    @property
    def fu(self):
        """Itself, as pool.Split's task (`pool.drop_all` cancels through it); a property, not a
        slot: a slot pointing at itself would leave every Split to the cycle collector, and with
        it its decoded pages."""
        return self

    def cancel(self):
        if self.rows is not None:
            self.rows[0].drop()
        for p in self.parts:
            if p is not None:
                p[5].drop()
        return False

    def kept(self, idle=None):
        """The rows the unit's filter job kept (`kept`), or None where there is none or it
        declined: the filter pass then runs in Python."""
        if self.rows is None:
            return None
        job, rows = self.rows
        return rows[:job.got] if _ended(job, idle) == 0 else None

    def steal(self) -> bool:
        return any(p is not None and p[5].steal() for p in self.parts)

    def result(self, idle=None):
        """Per column, each row group's Split (None: all null); while the worker runs them,
        `idle()` may do other work (False: none left)."""
        if self.got is None:
            self.got = Done.of(self._take, idle)
        return self.got.result()

    def _take(self, idle):
        if self.rows is not None:
            self.rows[0].wait()  # it reads the splits' pages, which taking a result moves out of the jobs
        got = []
        for p in self.parts:
            if p is None:
                got.append(None)
                continue
            ptype, max_def, buf, at, n, job = p
            sp = None
            if _ended(job, idle) == 0:
                walked, decoded = job.split()
                sp = pages.assemble(ptype, max_def, walked, buf[at:at + n], decoded)
            if sp is None:
                return self.fallback()  # the Python walk: its Splits, or its error
            got.append(sp)
        cols = [got[i:i + self.width] for i in range(0, len(got), self.width)]
        return cols[0] if self.one else cols


def _ended(job, idle):
    """`job`'s code once it has ended: run here if the worker has not started it, else waited
    for while `idle()` does other work (False: none left)."""
    if not job.steal():
        while not job.done() and idle is not None and idle():
            pass
    return job.wait()
