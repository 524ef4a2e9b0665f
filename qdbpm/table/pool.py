"""The shared decode pool: a unit's columns dealt one at a time to whichever of this thread and
the pool's threads is free (`Deal`, `run`), and columns decompressed ahead for a later unit
(`Split`), which the thread that needs them runs itself if the pool has not started them: no
thread waits behind the pool's queue for work it can do. Decompression, the page kernels and
numpy release the GIL, so the threads run at once."""

from __future__ import annotations

import _thread
import atexit
import os
import queue
import threading
from concurrent.futures import CancelledError

LANES = max(1, min(4, os.cpu_count() or 1))  # this thread + the pool's threads

_pool = None
_pool_pid = None


class Task:
    """A call queued on the pool, with the part of a Future's interface this package uses
    (result, exception, done, cancel, cancelled) on two C locks: a Q6 one shot queues 24, and a
    ThreadPoolExecutor's Future (a Condition, an RLock) and submit (a Semaphore probed per call)
    cost ~15 us apiece in the calling thread. `run` claims it: whichever thread runs it first
    (the pool's, or one that needs it now, `Split.steal`) is the only one that does."""

    __slots__ = ("fn", "_claim", "_end", "_value", "_error", "_cancelled")

    def __init__(self, fn):
        self.fn = fn
        self._claim = _thread.allocate_lock()  # held by the thread that runs or cancels it
        self._end = _thread.allocate_lock()  # held until it has run or was cancelled
        self._end.acquire()
        self._value = self._error = None
        self._cancelled = False

    def run(self, here=False) -> bool:
        """Run it in this thread, unless a thread has claimed it: False then. A failure is kept
        for `result`; `here` (a thread that needs the result, not the pool's) also raises an
        interrupt (a KeyboardInterrupt, not an error of the call) at once."""
        if not self._claim.acquire(False):
            return False
        fn, self.fn = self.fn, None
        try:
            self._value = fn()
        except BaseException as e:  # raised where the result is taken, as a Future's is
            self._error = e
        self._end.release()
        if here and self._error is not None and not isinstance(self._error, Exception):
            raise self._error
        return True

    def cancel(self) -> bool:
        """Drop it if no thread has started it. True also when it was dropped before, as a
        Future's cancel: a second close of a Deal must not take a dropped helper for a run one."""
        if not self._claim.acquire(False):
            return self._cancelled
        self.fn, self._cancelled = None, True
        self._end.release()
        return True

    def settle(self):
        """Drop it if no thread has started it, else wait for it to end (never raises)."""
        if not self.cancel():
            self._wait()

    def cancelled(self) -> bool:
        return self._cancelled

    def done(self) -> bool:
        return not self._end.locked()

    def _wait(self):
        self._end.acquire()
        self._end.release()

    def exception(self, timeout=None):
        self._wait()
        if self._cancelled:
            raise CancelledError()
        return self._error

    def result(self, timeout=None):
        if self.exception() is not None:
            raise self._error
        return self._value


class _Pool:
    """LANES - 1 daemon threads running the Tasks of one queue in order (a task claimed
    elsewhere first is skipped). Daemon: a thread idle in the queue must not hold up the
    interpreter's exit; every task a stream queues is taken or waited for before it returns, or
    dropped if not started (one running may still finish after: `close` at exit waits for it)."""

    def __init__(self, workers, prefix):
        self._queue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{prefix}_{i}", daemon=True)
                         for i in range(workers)]
        for t in self._threads:
            t.start()

    def _work(self):
        get = self._queue.get
        while (task := get()) is not None:
            task.run()

    def submit(self, fn) -> Task:
        task = Task(fn)
        self._queue.put(task)
        return task

    def close(self):
        """End the threads: the tasks still queued are dropped, each running one finishes."""
        while True:
            try:
                task = self._queue.get_nowait()
            except queue.Empty:
                break
            if task is not None:
                task.cancel()
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join()


@atexit.register
def _close_at_exit():
    """At the interpreter's exit, before it stops its daemon threads: no decode thread may still
    be running a task then. One taking the GIL back during finalization is ended by
    pthread_exit, and a C++ frame on its stack (pyarrow's: an object freed without the GIL)
    turns that into std::terminate, an abort after the work is done (seen once in a CLI run)."""
    global _pool
    if _pool is not None and _pool_pid == os.getpid():
        done, _pool = _pool, None
        done.close()


def executor():
    """The shared decode pool of this process. A forked child gets its own: the parent's pool
    object survives a fork without its threads, and work queued on it would never run."""
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():
        _pool = _Pool(max(1, LANES - 1), "qdbpm-decode")
        _pool_pid = os.getpid()
    return _pool


def balance(sizes, n):
    """Indexes of `sizes` split into at most n lanes of about equal total (largest first, each to
    the lightest lane): the share of a unit split ahead on the pool (`direct.presplit`)."""
    lanes = [[] for _ in range(n)]
    load = [0] * n
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        j = load.index(min(load))
        lanes[j].append(i)
        load[j] += sizes[i]
    return [ln for ln in lanes if ln]


def run(tasks, sizes, n):
    """Run `tasks` (callables), largest `sizes` first, in this thread and up to n - 1 of the
    shared pool's (`Deal`); their results in order. With the pool busy (a later unit's work),
    this thread runs them all. Every task taken ends before this returns, also when one raised."""
    order = sorted(range(len(tasks)), key=lambda i: -sizes[i])
    got = Deal(lambda i: tasks[i](), order, n - 1 if len(tasks) > 1 else 0).finish()
    out = [None] * len(tasks)
    for i, v in zip(order, got):
        out[i] = v
    return out


class Deal:
    """Items dealt one at a time, in order, to whichever thread is free: `helpers` of the pool's
    threads start at once, this thread joins with `finish`. The balance is dynamic: no thread
    idles while an item is left, however long each one takes (this thread's filter pass
    first, a column slower to gather than its bytes say). Callers order the items largest
    first, so the last ones dealt are short. After a failure no item is dealt; the one raised is
    the first taken."""

    __slots__ = ("fn", "items", "out", "lock", "next", "error", "helpers")

    def __init__(self, fn, items, helpers=0):
        self.fn, self.items = fn, list(items)
        self.out = [None] * len(self.items)
        self.lock = threading.Lock()
        self.next, self.error = 0, None
        self.helpers = [executor().submit(self._drain) for _ in range(min(helpers, len(self.items)))]

    def _take(self):
        with self.lock:
            i = self.next
            if i >= len(self.items):
                return None
            self.next = i + 1
            return i

    def _drain(self):
        while (i := self._take()) is not None:
            try:
                self.out[i] = self.fn(self.items[i])
            except BaseException as e:  # raised by finish, in the thread that takes the results
                with self.lock:
                    self.next = len(self.items)
                    if self.error is None or i < self.error[0]:
                        self.error = (i, e)
                return

    def finish(self) -> list:
        """Take items here until none is left, wait for the helpers' last ones: the results in
        item order, or the failure raised."""
        try:
            self._drain()
        finally:
            self.close()
        if self.error is not None:
            raise self.error[1]
        return self.out

    def close(self):
        """Deal no more; wait for the items being run (never raises). A helper the pool has not
        started is dropped."""
        with self.lock:
            self.next = len(self.items)
        for fu in self.helpers:
            fu.settle()


class Done:
    """A call already run in the thread that wanted it (a stolen `Split`, a range read by
    `pipeline.Inline` or a `Deferred`): the part of a Future's interface its consumers use (result, exception, done, cancel),
    without the Future's condition and lock, which nothing ever waits on (a Q6 one shot made 12
    Futures for its inline reads alone, ~15 calls apiece, for nothing)."""

    __slots__ = ("_value", "_error")

    def __init__(self, value=None, error=None):
        self._value, self._error = value, error

    @classmethod
    def of(cls, fn, *args) -> "Done":
        """fn(*args) run here: its value, or whatever it raised, kept for the consumer to re-raise."""
        try:
            return cls(fn(*args))
        except BaseException as e:
            return cls(error=e)

    def done(self):
        return True

    def cancel(self):
        return False  # it has run

    def exception(self, timeout=None):
        return self._error

    def result(self, timeout=None):
        if self._error is not None:
            raise self._error
        return self._value


class Deferred:
    """A read made once, by the first thread that asks for its result (another asking meanwhile
    waits for it; both get its answer or its error): the part of a Future's interface its
    consumers use."""

    __slots__ = ("fn", "args", "lock", "box")

    def __init__(self, fn, args):
        self.fn, self.args, self.lock, self.box = fn, args, threading.Lock(), None

    def _run(self) -> Done:
        with self.lock:
            if self.box is None:
                self.box = Done.of(self.fn, *self.args)  # an error goes to every consumer
        return self.box

    def result(self, timeout=None):
        return self._run().result()

    def exception(self, timeout=None):
        return self._run().exception()

    def done(self):
        return self.box is not None

    def cancel(self):
        return False  # nothing queued: a read nobody asks for is never made


class Split:
    """Work queued on the shared pool (a column's pages split ahead of its unit,
    `direct.presplit`); whoever needs its result first runs it if the pool has not started it
    yet (`steal`). A failure is kept and raised where the result is taken."""

    __slots__ = ("fu",)

    def __init__(self, fn):
        self.fu = executor().submit(fn)

    def steal(self) -> bool:
        """Run it in this thread if the pool has not started it; False when it had."""
        return self.fu.run(here=True)

    def result(self, idle=None):
        """The splits; while the pool runs them, `idle()` may do other work (False: none left)."""
        if not self.steal():
            while not self.fu.done() and idle is not None and idle():
                pass
        return self.fu.result()

    def kept(self, idle=None):
        """No filter pass runs here (offload.Split's may): the caller's pass decides."""
        return None


def drop_all(started):
    """Drop every Split of `started` (as steal_one's) the pool has not started: a stream that
    ends early never reads its later units. One running is left to end on its own: waiting for
    it could be a wait for this very thread (a generator finalised by the cycle collector on a
    pool thread, in the middle of one)."""
    for splits in started.values():
        for task in (splits or {}).values():
            task.fu.cancel()


def steal_one(started) -> bool:
    """Run here one Split of `started` ({unit: {column: Split} or None}, nearest unit first)
    the pool has not started; False when there is none."""
    for splits in started.values():
        for task in (splits or {}).values():
            if task.steal():
                return True
    return False
