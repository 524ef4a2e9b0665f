"""Where a one-shot read's wall time goes between its two lanes (compare_tpch.py --breakdown).

A one shot plans on the calling thread while the decode pool idles, then both decode, then the
caller finishes alone. Stamps taken around the plan (`Scan._units_for_read`), every unit's decode
(`Scan._decode`) and every pool task (`pool.Task.run`), over `n` calls, say how long each phase
takes and how busy the pool is once the plan is done; a pool task's wall time less its thread's CPU
time is time it waited, mostly for the GIL. Report only: the patched methods are restored after.
Splits ahead on the worker that never takes the GIL (qdbpm.table.offload) run as C jobs and are
not stamped: with it on, a Q6 one shot's pool runs nothing and the calling thread's busy share
(compare_tpch.py --breakdown's "this thread") says what is left on the critical path.
"""

from __future__ import annotations

import statistics
import threading
import time

PHASES = ("plan", "first_decode", "first_pool_task", "last_decode", "total")


def timeline(fn, n=100) -> dict:
    """Medians over `n` calls of `fn` (a one shot), in seconds from its start: when the plan ends
    ("plan"), the first unit's decode starts ("first_decode"), the pool's first task starts
    ("first_pool_task", None when the pool ran none) and the last decode ends ("last_decode"),
    and the call's length ("total"); "pool_busy": the share of the time after the plan in which
    the pool ran a task; "pool_waiting": seconds of its tasks' wall time off the CPU."""
    from qdbpm.table import pool, scan

    events, pc = [], time.perf_counter
    main = threading.current_thread()

    def stamped(owner, name, label):
        real = getattr(owner, name)

        def wrapper(*a, **k):
            t0, c0 = pc(), time.thread_time()
            try:
                return real(*a, **k)
            finally:
                if label != "task" or threading.current_thread() is not main:
                    events.append((label, t0, pc(), time.thread_time() - c0))
        setattr(owner, name, wrapper)
        return real

    originals = [(owner, name, stamped(owner, name, label)) for owner, name, label in
                 ((scan.Scan, "_units_for_read", "plan"), (scan.Scan, "_decode", "decode"), (pool.Task, "run", "task"))]
    runs = []
    try:
        for _ in range(n):
            events.clear()
            t0 = pc()
            fn()
            runs.append(_phases(list(events), t0, pc()))
    finally:
        for owner, name, real in originals:
            setattr(owner, name, real)
    return {k: (statistics.median(r[k] for r in runs) if all(r[k] is not None for r in runs) else None)
            for k in runs[0]}


def _phases(events, t0, t1) -> dict:
    plan = max((b for label, a, b, _ in events if label == "plan"), default=t0)
    decodes = [(a, b) for label, a, b, _ in events if label == "decode"]
    tasks = [(a, b, cpu) for label, a, b, cpu in events if label == "task"]
    after = max(t1 - plan, 1e-12)
    return {
        "plan": plan - t0,
        "first_decode": min((a for a, _ in decodes), default=t1) - t0,
        "first_pool_task": min(a for a, _, _ in tasks) - t0 if tasks else None,
        "last_decode": max((b for _, b in decodes), default=t1) - t0,
        "total": t1 - t0,
        "pool_busy": sum(max(0.0, b - max(a, plan)) for a, b, _ in tasks) / after,
        "pool_waiting": sum(max(0.0, (b - a) - cpu) for a, b, cpu in tasks),
    }


def describe(got) -> str:
    """One line of `timeline`'s answer."""
    ms = {k: (None if v is None else v * 1e3) for k, v in got.items()}
    pool = ("no pool task (splits ahead run on the offload worker, which is not stamped)" if ms["first_pool_task"]
            is None else f"the pool's first task {ms['first_pool_task']:.2f}")
    return (f"plan ends at {ms['plan']:.2f} ms; first decode {ms['first_decode']:.2f}, {pool}; after the plan the "
            f"pool is busy {got['pool_busy']:.2f} of the time, its tasks {ms['pool_waiting']:.2f} ms off the CPU; "
            f"last decode ends {ms['last_decode']:.2f}; one shot {ms['total']:.2f} ms")
