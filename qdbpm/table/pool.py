"""The shared decode pool: a unit's columns split into lanes of about equal bytes, one run in
the calling thread and the others on the pool (`run`), and columns decompressed ahead for a later
unit (`Split`), which the thread that needs them runs itself if the pool has not started them:
no thread waits behind the pool's queue for work it can do. Decompression, the page kernels
and numpy release the GIL, so the lanes run at once."""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

LANES = max(1, min(4, os.cpu_count() or 1))  # this thread + the pool's threads

_pool = None
_pool_pid = None


def executor():
    """The shared decode pool of this process. A forked child gets its own: the parent's pool
    object survives a fork without its threads, and work queued on it would never run."""
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():
        _pool = ThreadPoolExecutor(max_workers=max(1, LANES - 1), thread_name_prefix="qdbpm-decode")
        _pool_pid = os.getpid()
    return _pool


def balance(sizes, n):
    """Indexes of `sizes` split into at most n lanes of about equal total (largest first, each to
    the lightest lane)."""
    lanes = [[] for _ in range(n)]
    load = [0] * n
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        j = load.index(min(load))
        lanes[j].append(i)
        load[j] += sizes[i]
    return [ln for ln in lanes if ln]


def run(tasks, sizes, n):
    """Run `tasks` (callables) in up to n lanes of about equal `sizes`, one lane in this thread
    and the rest on the shared pool; their results in order. A lane the pool has not started
    when this thread is done with its own (the pool busy with a later unit) runs here. Every
    lane ends before this returns, also when one raised."""
    lanes = balance(sizes, n) if n > 1 and len(tasks) > 1 else [list(range(len(tasks)))]

    def lane_results(lane):
        return [(i, tasks[i]()) for i in lane]

    pooled = [Split(partial(lane_results, lane)) for lane in lanes[1:]]
    try:
        done = lane_results(lanes[0]) if lanes else []
        for task in pooled:
            done += task.result()
    finally:
        for task in pooled:
            task.close()
    out = [None] * len(tasks)
    for i, v in done:
        out[i] = v
    return out


class Split:
    """Work queued on the shared pool (a lane; a column's pages split ahead of its unit,
    `direct.presplit`); whoever needs its result first runs it if the pool has not started it
    yet (`steal`). A failure is kept and raised where the result is taken."""

    __slots__ = ("fn", "fu")

    def __init__(self, fn):
        self.fn, self.fu = fn, executor().submit(fn)

    def steal(self) -> bool:
        """Run it in this thread if the pool has not started it; False when it had."""
        if not self.fu.cancel():
            return False
        fu = Future()
        try:
            fu.set_result(self.fn())
        except Exception as e:  # raised to the unit that takes it, as the pool's would be
            fu.set_exception(e)
        self.fu = fu
        return True

    def result(self, idle=None):
        """The splits; while the pool runs them, `idle()` may do other work (False: none left)."""
        if not self.steal():
            while not self.fu.done() and idle is not None and idle():
                pass
        return self.fu.result()

    def close(self):
        """Drop it if the pool has not started it, else wait for it to end (never raises)."""
        self.fu.cancel() or self.fu.exception()


def steal_one(started) -> bool:
    """Run here one Split of `started` ({unit: {column: Split} or None}, nearest unit first)
    the pool has not started; False when there is none."""
    for splits in started.values():
        for task in (splits or {}).values():
            if task.steal():
                return True
    return False
