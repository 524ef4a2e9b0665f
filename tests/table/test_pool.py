"""pool.Deal: a unit's columns dealt one at a time to whichever thread is free (this one and the
shared pool's). Each item runs exactly once, results come back in item order, a failure stops
the dealing and is raised by finish, and nothing is left running or queued when it returns."""

import os
import subprocess
import sys
import threading
import time

import pytest

from qdbpm.errors import ParquetFormatError
from qdbpm.table import direct, pool

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository


def _blocked_pool():
    """Every pool thread held until the returned event is set."""
    go = threading.Event()
    held = [pool.executor().submit(go.wait) for _ in range(max(1, pool.LANES - 1))]
    return go, held


@pytest.mark.parametrize("helpers", [0, 1, 3])
def test_every_item_runs_once_and_results_come_in_item_order(helpers):
    runs, lock = [], threading.Lock()

    def fn(x):
        with lock:
            runs.append(x)
        return x * 10

    items = list(range(50))
    assert pool.Deal(fn, items, helpers).finish() == [x * 10 for x in items]
    assert sorted(runs) == items


def test_with_the_pool_busy_this_thread_runs_every_item_and_the_helper_is_dropped():
    go, held = _blocked_pool()
    timer = threading.Timer(30, go.set)  # were a helper awaited, the pool is freed after 30 s
    timer.start()
    try:
        me = threading.get_ident()
        deal = pool.Deal(lambda x: (x, threading.get_ident()), range(6), helpers=1)
        got = deal.finish()
        assert [g[0] for g in got] == list(range(6)) and {g[1] for g in got} == {me}
        assert all(fu.cancelled() for fu in deal.helpers) and not go.is_set()
        deal.close()  # closed twice (finish, then the caller's finally): a dropped helper is no error
    finally:
        timer.cancel()
        go.set()
        for h in held:
            h.result()


def test_a_failure_stops_the_dealing_and_finish_raises_it():
    runs = []

    def fn(x):
        runs.append(x)
        if x == 3:
            raise ParquetFormatError(f"item {x}: page ends early")
        return x

    with pytest.raises(ParquetFormatError, match="item 3"):
        pool.Deal(fn, range(10)).finish()
    assert runs == [0, 1, 2, 3]  # no item dealt after the failure


def test_of_two_failures_the_first_item_dealt_is_raised():
    """A helper fails on item 0 while this thread fails on item 1: item 0's error is raised,
    whichever ended first."""
    started, release = threading.Event(), threading.Event()

    def fn(x):
        if x == 0:
            started.set()
            release.wait()
            raise ParquetFormatError("item 0")
        release.set()
        raise ParquetFormatError("item 1")

    deal = pool.Deal(fn, [0, 1], helpers=1)
    assert started.wait(30)  # the helper holds item 0; this thread then takes item 1
    with pytest.raises(ParquetFormatError, match="item 0"):
        deal.finish()


def test_close_waits_for_the_item_a_helper_is_running():
    started, release, done = threading.Event(), threading.Event(), []

    def fn(x):
        started.set()
        release.wait()
        done.append(x)
        return x

    deal = pool.Deal(fn, [0, 1, 2], helpers=1)
    assert started.wait(30)  # the helper holds item 0
    closer = threading.Thread(target=deal.close)
    closer.start()
    for _ in range(30_000):  # close stops the dealing (bounded: a bug fails, never hangs) ...
        if deal.next == 3:
            break
        time.sleep(0.001)
    assert deal.next == 3 and closer.is_alive()  # ... and waits for the item being run
    release.set()
    closer.join(30)
    assert not closer.is_alive() and done == [0]


@pytest.mark.parametrize("where", ["q < 24 AND s = 'b'", None])
def test_a_read_deals_a_units_columns_largest_first(tmp_path, monkeypatch, where):
    """decode_filtered (a filter) and decode (none) deal a unit's columns by compressed bytes,
    largest first: the last dealt are short, so no thread is left alone with a long tail. The
    rows are pyarrow's."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import qdbpm
    from qdbpm.prune.arrow import to_arrow
    from qdbpm.prune.filters import where_text
    from qdbpm.table.read import read_table

    from test_direct import same  # noqa: E402

    rng = np.random.default_rng(5)
    n = 20000
    t = pa.table({"q": pa.array(rng.integers(0, 50, n)), "s": pa.array(rng.choice(["a", "b"], n)),
                  "small": pa.array(rng.integers(0, 3, n)), "wide": pa.array(rng.normal(0, 1, n)),
                  "text": pa.array([f"row {x} " * 3 for x in rng.integers(0, 10 ** 9, n)])})
    d = tmp_path / "t" / "p=0"
    d.mkdir(parents=True)
    pq.write_table(t, d / "data.parquet", compression="none")
    qdbpm.generate(str(d / "data.parquet"))
    events = []
    real_sizes, real_deal = direct._sizes, pool.Deal

    def sizes(*a):
        got = real_sizes(*a)
        events.append(("sizes", got))
        return got

    class Spy(real_deal):
        def __init__(self, fn, items, helpers=0):
            events.append(("deal", list(items)))
            super().__init__(fn, items, helpers)

    monkeypatch.setattr(direct, "_sizes", sizes)
    monkeypatch.setattr(pool, "Deal", Spy)
    monkeypatch.setattr(direct, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(direct, "LANES", 2)
    got = read_table(str(tmp_path / "t"), ["text", "small", "wide", "q"], where)
    want = t.select(["text", "small", "wide", "q"]) if where is None else \
        t.filter(to_arrow(where_text(where), t.schema)).select(["text", "small", "wide", "q"])
    assert same(got, want)
    checked = 0
    for k, (kind, items) in enumerate(events):
        if kind != "deal" or len(items) < 3:
            continue
        size = next(v for kd, v in reversed(events[:k]) if kd == "sizes" and len(v) == len(items))
        assert [size[i] for i in items] == sorted(size, reverse=True) and len(set(size)) == len(size)
        checked += 1
    assert checked == 1


def test_a_task_runs_once_whichever_thread_claims_it_first():
    """pool.Task: the pool's thread and any number of threads that need it race to run it; one
    does, the others are told it was taken, and all see its one result."""
    go = threading.Event()
    runs = []
    task = pool.Task(lambda: runs.append(threading.get_ident()) or len(runs))
    claimed = []

    def race():
        go.wait()
        claimed.append(task.run(here=True))

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join()
    assert sorted(claimed) == [False] * 7 + [True] and len(runs) == 1
    assert task.done() and task.result() == 1 and not task.cancelled()
    assert not task.cancel()  # it ran: too late


def test_a_cancelled_task_never_runs_and_says_so():
    from concurrent.futures import CancelledError

    ran = []
    task = pool.Task(lambda: ran.append(1))
    assert task.cancel() and task.cancelled() and task.done()
    assert task.cancel()  # dropped before: still True, as a Future's cancel
    task.settle()  # never raises
    assert not task.run() and not ran
    with pytest.raises(CancelledError):
        task.result()


def test_a_task_keeps_its_failure_and_an_interrupt_is_raised_where_it_was_stolen():
    """An error of the call is raised where the result is taken (the pool's thread never dies
    of it); an interrupt in the thread that ran it here is raised there at once as well."""
    def bad():
        raise ValueError("page")

    task = pool.Task(bad)
    assert task.run(here=True)
    with pytest.raises(ValueError, match="page"):
        task.result()
    assert isinstance(task.exception(), ValueError)

    def interrupted():
        raise KeyboardInterrupt

    task = pool.Task(interrupted)
    with pytest.raises(KeyboardInterrupt):
        task.run(here=True)
    with pytest.raises(KeyboardInterrupt):
        task.result()
    on_pool = pool.executor().submit(bad)
    with pytest.raises(ValueError):
        on_pool.result()
    assert pool.executor().submit(lambda: 7).result() == 7  # the pool's thread lives on


def test_at_exit_a_running_task_finishes_and_a_queued_one_is_dropped(tmp_path):
    # The interpreter stops its daemon threads at exit: one taking the GIL back then is ended
    # by pthread_exit, and with a C++ frame of pyarrow's on its stack that is an abort after
    # the work is done. So at exit the pool lets its running tasks finish first (here: the
    # marker is written after the main thread has returned) and drops the queued ones.
    code = f"""
import os, threading, time
from qdbpm.table import pool
started = threading.Event()
def slow(name):
    started.set()
    time.sleep(0.3)
    open(os.path.join({str(tmp_path)!r}, name), "w").close()
p = pool.executor()
p.submit(lambda: slow("first"))
for i in range(64):  # more than the pool's threads: most are still queued at exit
    p.submit(lambda i=i: slow(f"queued{{i}}"))
started.wait()
print(len(p._threads))
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "first").exists()  # it ran to its end, after the main thread returned
    ran = len([f for f in os.listdir(tmp_path) if f.startswith("queued")])
    assert ran < int(p.stdout)  # only those the other threads had taken before the exit
