"""benchmarks/compare_tpch.py's call counter: what one call of a function makes in this thread.
Nothing here is timed."""

from __future__ import annotations

import os
import sys
import threading

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks import compare_tpch  # noqa: E402


def _leaf():
    return len("ab")


def _two_leaves():
    _leaf()
    _leaf()
    return sorted([2, 1])


def test_calls_counts_the_python_and_builtin_calls_one_call_makes():
    assert compare_tpch.calls(_two_leaves) == {"python": 2, "builtin": 3}  # _leaf x2; len x2, sorted
    assert compare_tpch.calls(_leaf) == {"python": 0, "builtin": 1}
    assert sys.getprofile() is None  # the hook is removed


def test_calls_counts_this_thread_only_and_restores_a_profiler_set_before():
    def many():
        for _ in range(2000):
            _leaf()

    def other():
        t = threading.Thread(target=many)
        t.start()
        t.join()

    seen = []

    def outer(frame, event, arg):
        seen.append(event)

    sys.setprofile(outer)
    try:
        got = compare_tpch.calls(other)
        assert sys.getprofile() is outer
    finally:
        sys.setprofile(None)
    # Thread.start / join are this thread's calls; the thread's 2,000 _leaf and len calls are not
    assert 0 < got["python"] < 500 and got["builtin"] < 500
