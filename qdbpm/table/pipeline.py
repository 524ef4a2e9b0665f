"""Fetch ahead under a byte budget: the units of a scan, in order, their ranges requested
concurrently while the consumer decodes earlier ones.

The consumer drives it. A unit is charged its fetched bytes plus its estimated decoded size,
from admission until the consumer asks for the next unit: fetched-ahead bytes and the rows being
decoded and handed out share one budget. Each time the consumer asks, the previous unit is
released and as many further units are admitted as fit in the budget (one unit alone when nothing else is
held, however large); their ranges go to at most `workers` fetch threads. A thread exits as soon
as the queue is empty, so a consumer that stops asking (a reader closed early) admits nothing
more and leaves no thread behind once the admitted requests are answered.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial

from . import offload
from .pool import Deferred, Done
from .ranges import fetch_range

DEFAULT_WORKERS = 8  # concurrent range requests per scan
THREAD_NAME = "qdbpm-fetch"
AHEAD = 2  # admitted units a consumer is shown ahead of the one it gets


@dataclass
class Unit:
    """Row groups of one partition fetched and decoded together."""

    partition: str
    pm: object  # ParquetMeta
    path: str  # the Parquet object, as the filesystem names it
    row_groups: list
    columns: list  # _pm column indexes decoded
    full: bool  # every row matches: no row filter
    plan: object  # ranges.Plan
    decoded: int = 0  # estimated Arrow bytes of the decoded rows
    direct: bool = None  # every chunk's encodings and codec are direct's (kinds.taken_rows); None: unknown
    size: int = field(init=False)  # what the budget charges: bytes fetched plus decoded

    def __post_init__(self):
        self.size = self.plan.fetch_bytes + self.decoded


class Fetcher:
    """Up to `workers` daemon threads running queued calls; each exits when the queue is empty."""

    def __init__(self, workers=DEFAULT_WORKERS):
        self.workers = workers
        self._queue = deque()
        self._lock = threading.Lock()
        self._running = 0

    def submit(self, fn, *args) -> Future:
        fut = Future()
        with self._lock:
            self._queue.append((fut, fn, args))
            if self._running < self.workers:
                self._running += 1
                threading.Thread(target=self._work, name=THREAD_NAME, daemon=True).start()
        return fut

    def _work(self):
        while True:
            with self._lock:
                if not self._queue:
                    self._running -= 1
                    return
                fut, fn, args = self._queue.popleft()
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as e:  # handed to the consumer, who re-raises it
                fut.set_exception(e)

    def cancel(self):
        """Drop every call not started yet."""
        with self._lock:
            queued, self._queue = list(self._queue), deque()
        for fut, _, _ in queued:
            fut.cancel()


class Inline:
    """A Fetcher that runs each call at once in the calling thread: no thread to start, for
    work too small to gain from concurrency."""

    def submit(self, fn, *args) -> Done:
        return Done.of(fn, *args)  # an error is handed to the consumer, who re-raises it

    def cancel(self):
        pass


class Lazy:
    """A Fetcher that queues nothing: each read is made by the first thread that needs its
    bytes: the pool's thread splitting its unit ahead (`ahead_chunks`), else the consumer as the
    unit is handed out. A local read from the page cache is a copy that releases the GIL, so it
    costs the consumer's thread nothing when the pool's makes it (TPC-H Q6: 9 of 12 ranges)."""

    def submit(self, fn, *args) -> Deferred:
        return Deferred(fn, args)

    def cancel(self):
        pass


class Offloaded:
    """A Fetcher of local ranges for the worker that never takes the GIL (`offload.Read`): each
    read is made there, off the consumer's thread and the pool's, queued when its unit is split
    ahead or its chunks are asked for (`offload.Read.start`); the consumer takes its chunks when
    it gets to the unit."""

    def submit(self, fn, fs, path, r, size, note) -> offload.Read:
        return offload.Read(fn, (fs, path, r, size, note), fs._strip_protocol(path))

    def cancel(self):
        pass


def stream(fs, units, budget, *, workers=DEFAULT_WORKERS, observer=None, inline=False, ahead=None, lazy=False,
           starting=None):
    """Yield (unit, {(row_group, column): chunk bytes}) for each unit, in order.

    A unit's size (fetched plus decoded bytes) counts against `budget` from its admission until
    the consumer asks for the next unit. `observer(event, nbytes)`, when given, sees "admit" and
    "release" (a unit's size, consumer thread), "decoded" (right after "admit": the part of that
    size charged for decoding) and "fetched" (one range's bytes as they arrive, a fetch thread; with
    `inline`, every range is fetched in the consumer's thread as its unit is admitted).
    `ahead`, when given (a list), holds at each yield the next admitted units (up to AHEAD) as
    [(unit, [Future of its ranges' chunks])]: already charged, so its consumer may start on them.
    `lazy` (local ranges): each is read off this thread, by the worker that never takes the GIL
    (`Offloaded`), or, offload off, by the first thread that asks for it (`Lazy`); with
    `inline`'s events. `starting(unit, futures)`, when given, is called with lazy reads before a
    unit's chunks are waited for (`ahead` already set): work on them may start off this thread
    first."""
    note = observer or (lambda event, n: None)
    fetcher = (Offloaded() if offload.ENABLED else Lazy()) if lazy else Inline() if inline else Fetcher(workers)
    todo = iter(units)
    nxt = next(todo, None)
    pending = deque()  # (unit, [Future]) admitted, not yet handed out
    held = 0
    done = None
    try:
        while True:
            if done is not None:
                held -= done.size
                note("release", done.size)
                done = None
            while nxt is not None and (held == 0 or held + nxt.size <= budget):
                held += nxt.size
                note("admit", nxt.size)
                note("decoded", nxt.decoded)
                pending.append((nxt, [fetcher.submit(_fetch, fs, nxt.path, r, nxt.pm.parquet_size, note) for r in nxt.plan.ranges]))
                nxt = next(todo, None)
            if not pending:
                return
            unit, futures = pending.popleft()
            if ahead is not None:
                ahead[:] = [(u, list(fs)) for u, fs in itertools.islice(pending, AHEAD)]
            if lazy and starting is not None:
                starting(unit, futures)
            blobs = chunks_of(futures)
            done = unit
            yield unit, blobs
            del blobs
    finally:
        fetcher.cancel()


def chunks_of(futures) -> dict:
    """{(row_group, column): chunk bytes} of a unit from the Futures of its ranges (waits)."""
    out = {}
    for f in futures:
        out.update(f.result())
    return out


def ahead_chunks(futures, ranges):
    """What work started on a unit fetched ahead takes: (its chunks, None) once every range has
    arrived; where none of its `Deferred` reads has been made, (a callable making them and
    returning the chunks, {(row_group, column): bytes of the chunk}); (None, None) while reads
    are in flight or one failed (the unit's consumer raises it)."""
    if all(isinstance(f, Deferred) and not f.done() for f in futures):  # offload.Read is one
        return partial(chunks_of, futures), {(rg, c): n for r in ranges for rg, c, _, n in r.chunks}
    if all(f.done() and f.exception() is None for f in futures):
        return chunks_of(futures), None
    return None, None


def _fetch(fs, path, r, size, note):
    out = fetch_range(fs, path, r, size)
    note("fetched", r.length)
    return out
