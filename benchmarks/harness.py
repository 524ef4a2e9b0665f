"""The comparison harness of benchmarks/compare*.py: interleaved timed rounds, the report of
medians, ratios and goals, and the peers' settings every scenario shares.

Every contender of a scenario runs once per round, rounds interleaved (order rotated each round),
so slow drift on a shared machine hits all of them alike; reported times are medians over rounds
(fast operations are batched within a sample; as in timeit, garbage is collected before and
cyclic GC is off inside each sample; glibc's heap is trimmed before each sample too).
"""

from __future__ import annotations

import ctypes
import gc
import statistics
import sys
import time


def _malloc_trim():
    """glibc's malloc_trim, or None: what settles the C heap the way gc.collect settles Python's."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


# --- timing ------------------------------------------------------------------------------------


def _clocks():
    return time.perf_counter(), time.process_time(), time.thread_time()


class Contender:
    """fn() timed in batches; or, with `setup`, fn(setup()) timed once per sample and
    teardown(state) run after the clock stops."""

    def __init__(self, name, fn, setup=None, note="", teardown=None):
        self.name, self.fn, self.setup, self.note, self.teardown = name, fn, setup, note, teardown
        self.number = 1
        self.samples = []  # wall seconds per call
        self.cpu_samples = []  # this process's CPU seconds per call (robust to other load)
        # the calling thread's CPU seconds per call: wall minus this is how long it waited (for
        # a pool, the GIL, I/O); near the wall, that thread is the critical path
        self.thread_samples = []

    def sample(self):
        # As timeit does: collect first, no cyclic GC inside the timed region (a full collection
        # of whatever the other contenders left behind would land on whoever runs next).
        state = self.setup() if self.setup is not None else None
        gc.collect()
        # Likewise glibc's free lists: a contender that freed many small blocks (pyarrow.dataset
        # over 1,000 files) leaves them unconsolidated, and the next large malloc by anyone
        # consolidates them all (measured: +45 ms on a 13 ms one-shot prune that followed it).
        if _TRIM is not None:
            _TRIM(0)
        gc.disable()
        try:
            if self.setup is not None:
                start = _clocks()
                self.fn(state)
                self._record(start, 1)
                if self.teardown is not None:
                    self.teardown(state)
                return
            fn, n = self.fn, self.number
            start = _clocks()
            for _ in range(n):
                fn()
            self._record(start, n)
        finally:
            gc.enable()

    def _record(self, start, n):
        """One sample of n calls since `start` (`_clocks()`): wall, process CPU, thread CPU."""
        wall, cpu, thread = (b - a for a, b in zip(start, _clocks()))
        self.samples.append(wall / n)
        self.cpu_samples.append(cpu / n)
        self.thread_samples.append(thread / n)

    @property
    def median(self):
        return statistics.median(self.samples)

    @property
    def cpu_median(self):
        return statistics.median(self.cpu_samples)

    @property
    def thread_median(self):
        return statistics.median(self.thread_samples)


def timed_calls(fn, repeat):
    """([seconds of each call], last result) of `repeat` plain calls of fn (the end-to-end scripts,
    where one call is long enough to time alone)."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def run_rounds(contenders, rounds, target):
    """Calibrate (one warm call each), then `rounds` interleaved rounds."""
    for c in contenders:
        if c.setup is None:
            c.fn()  # the first call may pay one-time costs (imports, page faults)
            t = time.perf_counter()
            c.fn()
            t = time.perf_counter() - t
            c.number = max(1, min(10_000, int(target / max(t, 1e-7))))
        else:
            state = c.setup()
            c.fn(state)
            if c.teardown is not None:
                c.teardown(state)
    for k in range(rounds):
        # Rotate the order each round: no contender always follows the same neighbour.
        for c in contenders[k % len(contenders):] + contenders[:k % len(contenders)]:
            c.sample()
    return contenders


def fmt_time(s):
    if s >= 1:
        return f"{s:8.3f} s "
    if s >= 1e-3:
        return f"{s * 1e3:8.2f} ms"
    return f"{s * 1e6:8.1f} us"


class Report:
    """Rows, goals and run facts, printed as they come and kept for --json."""

    def __init__(self):
        self.rows = []
        self.goals = []
        self.info = {}

    def table(self, scenario, dataset, contenders, base, extra=None):
        """Print contenders with `peer / base` ratios (how many times base is faster)."""
        print(f"\n== {scenario} [{dataset}]")
        width = max(len(c.name) for c in contenders)
        for c in contenders:
            ratio = c.median / base.median
            tag = "" if c is base else (f"{ratio:10.1f}x" if ratio >= 1 else f"{ratio:10.3g}x")
            extra_s = f"   {extra[c.name]}" if extra and c.name in extra else ""
            print(f"  {c.name:<{width}}  {fmt_time(c.median)}  {tag:>11}{extra_s}"
                  + (f"   ({c.note})" if c.note else ""))
            self.rows.append({"scenario": scenario, "dataset": dataset, "what": c.name,
                              "median_s": c.median, "samples_s": c.samples, "cpu_median_s": c.cpu_median,
                              "thread_median_s": c.thread_median,
                              "calls_per_sample": c.number,
                              "ratio_to": base.name, "ratio": ratio,
                              **({"extra": extra[c.name]} if extra and c.name in extra else {})})
        print(f"  (ratio = time / time of {base.name!r})")

    def goal(self, text, value, target, unit, higher_is_better=True, report_only=False, rounds=None):
        """A goal from the issues (met / MISSED), or with report_only a number shown against the
        same target for context, never judged. `rounds`: the same ratio per round (`round_ratios`),
        printed as its range: a verdict near its line that one run's rounds straddle is not settled
        by that run's medians."""
        met = value >= target if higher_is_better else value <= target
        self.goals.append({"goal": text, "value": value, "target": target, "unit": unit,
                           "op": ">=" if higher_is_better else "<=", "met": None if report_only else bool(met),
                           "margin": (value / target) if higher_is_better else (target / value),
                           **({"rounds": list(rounds)} if rounds else {})})

    def ratio_goal(self, text, peer, base, target, unit, report_only=False):
        """`goal` of how many times `base` is faster than `peer` (contenders of one run_rounds):
        the medians' ratio, with each round's beside it (`round_ratios`)."""
        self.goal(text, peer.median / base.median, target, unit, report_only=report_only,
                  rounds=round_ratios(peer, base))

    def print_goals(self):
        print("\n== goals")
        width = max(len(g["goal"]) for g in self.goals)
        for g in self.goals:
            op = g["op"]
            v = g["value"]
            vs = f"{v:,.1f}" if v >= 10 else f"{v:.3g}"
            status = "report" if g["met"] is None else ("met" if g["met"] else "MISSED")
            spread = f"; rounds {_short(min(g['rounds']))}-{_short(max(g['rounds']))}" if g.get("rounds") else ""
            print(f"  {g['goal']:<{width}}  {vs:>10} {g['unit']:<9} {status:<6} "
                  f"({g['margin']:.2f}x the target {op} {g['target']:,}{spread})")


def _short(v) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def round_ratios(peer, base) -> list:
    """peer's time / base's in each round: `run_rounds` samples both once a round, close in time,
    so each ratio cancels most of the drift a shared VM shows between rounds."""
    return [a / b for a, b in zip(peer.samples, base.samples)]


# --- peers -------------------------------------------------------------------------------------


def duckdb_connection(cache: bool):
    """DuckDB as every scenario runs it: one thread, the Parquet metadata cache on or off."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads=1")
    con.execute(f"SET parquet_metadata_cache={'true' if cache else 'false'}")
    return con
