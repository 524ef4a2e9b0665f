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


def test_timeline_orders_a_one_shots_phases_and_restores_what_it_patched(tmp_path):
    """benchmarks/timeline.py over a filtered read of several partitions: its phases come in
    order, its shares are shares, and the methods it stamps are the library's own again after.
    Structure only: no time is compared with a bound."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import qdbpm
    from benchmarks.timeline import PHASES, describe, timeline
    from qdbpm.table import pool, scan

    for p in range(4):
        (tmp_path / f"p{p}").mkdir()
        path = str(tmp_path / f"p{p}" / "data.parquet")
        n = 200_000
        pq.write_table(pa.table({"k": np.arange(n) + p * n, "v": np.random.default_rng(p).random(n)}), path,
                       row_group_size=50_000)
        qdbpm.generate(path)
    real = (scan.Scan._units_for_read, scan.Scan._decode, pool.Task.run)
    got = timeline(lambda: qdbpm.read_table(str(tmp_path), ["k", "v"], "v < 0.1"), n=3)
    assert (scan.Scan._units_for_read, scan.Scan._decode, pool.Task.run) == real
    assert 0 < got["plan"] <= got["first_decode"] <= got["last_decode"] <= got["total"]
    # None where a run's pool ran no task: the calling thread takes back what the pool has not
    # started (a Split stolen), which thread scheduling decides
    assert got["first_pool_task"] is None or got["plan"] <= got["first_pool_task"] <= got["total"]
    assert 0 <= got["pool_busy"] <= 1 and got["pool_waiting"] >= 0
    assert set(PHASES) <= set(got) and "one shot" in describe(got)


def test_recompressed_rewrites_each_partition_with_the_codec_once(tmp_path):
    """`--codec lz4_raw`: the partitions re-written with QuestDB's codec, rows and row groups as
    they were, each with its `_pm`; the copy is built once."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from qdbpm.parquet.footer import read_footer
    from qdbpm.pm import layout as L

    src = tmp_path / "src"
    for m in range(2):
        (src / f"2024-0{m + 1}").mkdir(parents=True)
        pq.write_table(pa.table({"x": np.arange(3000) + 3000 * m}), src / f"2024-0{m + 1}" / "data.parquet",
                       compression="snappy")
    root = compare_tpch.recompressed(str(src), str(tmp_path / "copy"), "lz4_raw")
    for m in range(2):
        path = os.path.join(root, f"2024-0{m + 1}", "data.parquet")
        assert set(read_footer(path).chunks["codec"].ravel().tolist()) == {L.CODEC_LZ4_RAW}
        want = pq.read_table(src / f"2024-0{m + 1}" / "data.parquet")
        assert pq.read_table(path).cast(want.schema).equals(want)  # DuckDB marks the column required
        assert os.path.exists(os.path.join(os.path.dirname(path), "_pm"))
    stamp = os.path.getmtime(os.path.join(root, "2024-01", "data.parquet"))
    assert compare_tpch.recompressed(str(src), str(tmp_path / "copy"), "lz4_raw") == root
    assert os.path.getmtime(os.path.join(root, "2024-01", "data.parquet")) == stamp
