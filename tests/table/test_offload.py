"""Local reads and chunk splits made ahead by the worker that never takes the GIL
(qdbpm/table/offload.py over _offload.pyx): its reads equal the file's bytes; what it cannot read
is read again in Python and fails as a Python read fails; scans read what pyarrow reads with it on
and off, split ahead on the worker (corrupt chunks: tests/table/test_presplit.py); with no worker
running, the thread that needs a job runs it; a reader dropped early, and a forked child, are
served as well."""

import multiprocessing
import os
import pathlib
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from qdbpm.errors import PmError, StorageError
from qdbpm.parquet import pages
from qdbpm.prune.arrow import to_arrow
from qdbpm.prune.filters import where_text
from qdbpm.table import _offload, direct, offload, pipeline, scan
from qdbpm.table.ranges import Range, fetch_range
from qdbpm.table.read import read_table
from support.chunk_files import random_file

from test_direct import same  # noqa: E402
from test_presplit import _table  # noqa: E402


@pytest.mark.parametrize("seed", range(10))
def test_worker_reads_equal_the_file_bytes(tmp_path, seed):
    rng = np.random.default_rng(7100 + seed)
    path = tmp_path / "data.parquet"
    data = random_file(path, rng, 1, 400_000)
    jobs = []
    for _ in range(20):
        start = int(rng.integers(0, len(data) + 10))
        buf = np.full(int(rng.integers(0, 100_000)), 0xEE, np.uint8)
        jobs.append((start, buf, _offload.read(os.fsencode(path), start, buf)))
    for start, buf, job in jobs:
        code = job.wait()
        whole = start + len(buf) <= len(data)
        assert code == (0 if whole else 1)  # a read short of its range is not the worker's answer
        assert job.got == min(len(buf), max(0, len(data) - start))
        assert bytes(buf[:job.got]) == data[start:start + job.got] and (buf[job.got:] == 0xEE).all()
    with pytest.raises(ValueError):
        _offload.read(b"a\0b", 0, np.empty(4, np.uint8))


def _range(path, start, n):
    return Range(start, n, [(0, 0, start, n)])


def test_what_the_worker_cannot_read_is_read_again_and_fails_as_a_python_read(tmp_path):
    import fsspec

    fs = fsspec.filesystem("file")
    path = tmp_path / "data.parquet"
    path.write_bytes(bytes(range(256)) * 40)
    events = []
    note = lambda event, n: events.append((event, n))  # noqa: E731
    ok = offload.Read(pipeline._fetch, (fs, str(path), _range(path, 100, 500), None, note), str(path))
    assert bytes(ok.result()[(0, 0)]) == bytes(fetch_range(fs, str(path), _range(path, 100, 500))[(0, 0)])
    assert events == [("fetched", 500)] and ok.done()
    for where, r in [(path, _range(path, 10_000, 500)), (tmp_path / "missing", _range(path, 0, 10))]:
        with pytest.raises(StorageError) as want:
            fetch_range(fs, str(where), r)
        bad = offload.Read(pipeline._fetch, (fs, str(where), r, None, note), str(where))
        with pytest.raises(StorageError) as got:
            bad.result()
        assert type(got.value) is type(want.value) and str(got.value) == str(want.value)
        assert isinstance(bad.exception(), StorageError)


@pytest.fixture
def lanes(monkeypatch):
    """Two lanes and no size floor: every filtered unit of several is split ahead; counts the
    columns split on the worker."""
    monkeypatch.setattr(direct, "LANES", 2)
    monkeypatch.setattr(direct, "PARALLEL_BYTES", 0)
    seen = {"worker": 0}
    real = offload.split

    def counted(*a, **k):
        got = real(*a, **k)
        seen["worker"] += got is not None
        return got

    monkeypatch.setattr(offload, "split", counted)
    return seen


QUERIES = [("q < 24 AND s = 'b'", ["k", "price", "note"]), ("q BETWEEN 5 AND 7", ["k", "q", "price", "s", "note"]),
           ("s IS NULL AND price > 1200", ["note", "q"])]


@pytest.mark.parametrize("codec", ["snappy", "lz4", "none", "zstd", "gzip"])
def test_scans_read_what_pyarrow_reads_with_the_worker_on_and_off(tmp_path, lanes, monkeypatch, codec):
    whole = _table(str(tmp_path / "t"), codec=codec)
    for enabled in (True, False):
        monkeypatch.setattr(offload, "ENABLED", enabled)
        for where, cols in QUERIES:
            want = whole.filter(to_arrow(where_text(where), whole.schema)).select(cols)
            assert same(read_table(str(tmp_path / "t"), cols, where), want), (codec, enabled, where)
    # Snappy, LZ4_RAW (pyarrow's "lz4", QuestDB's codec), ZSTD and plain chunks are split on the
    # worker; gzip ones are its to read, the pool's to split
    assert (lanes["worker"] > 0) == (codec != "gzip")


CHILD = r'''
import sys
sys.path.insert(0, sys.argv[1])
from qdbpm.table import direct, offload
from qdbpm.table.read import read_table
import pyarrow.dataset as ds
from qdbpm.prune.arrow import to_arrow
from qdbpm.prune.filters import where_text
offload._running = True  # no worker ever starts: every job is run by the thread that needs it
direct.LANES, direct.PARALLEL_BYTES = 2, 0
split, early = offload.split, offload.early
made, earlies = [], []
offload.split = lambda *a, **k: made.append(split(*a, **k)) or made[-1]
offload.early = lambda *a: earlies.append(early(*a)) or earlies[-1]
where, cols = "q < 24 AND s = 'b'", ["k", "price", "note"]
got = read_table(sys.argv[2], cols, where)
d = ds.dataset(sys.argv[2], partitioning="hive")
want = d.to_table(columns=cols, filter=to_arrow(where_text(where), d.schema))
assert got.sort_by("k").equals(want.sort_by("k")), "rows differ"
assert any(s is not None for s in made)
# a stream closed early drops the jobs nobody started (no worker here: all of the later units')
from qdbpm.table.table import open_table
made.clear()
batches = open_table(sys.argv[2]).scan(where, ["k", "note"], batch_rows=100)._batches()
assert next(batches).num_rows
queued = [p[5] for s in made if s is not None for p in s.parts if p is not None and not p[5].done()]
assert queued, "later units' splits queued"
batches.close()
assert not any(j.steal() or j.done() for j in queued), "a dropped job ran"
assert all(j.wait() == 1 for j in queued), "a dropped job said done"
# the first units' columns started before the units were planned: taken by their splits, or
# dropped; with more of them than units split ahead, a stream closed early drops those none took
from qdbpm.table import scan
for n in (scan.EARLY_ROW_GROUPS, 10):  # 10: every row group's, past the units split ahead
    scan.EARLY_ROW_GROUPS = n
    earlies.clear()
    sc = open_table(sys.argv[2]).scan(where, ["k", "note"], batch_rows=100)
    batches = sc._batches()
    assert next(batches).num_rows
    assert (len(sc._early_left) > 0) == (n == 10), "early entries no unit has taken yet"
    batches.close()
    jobs = [e[3] for got in earlies for e in got.values()]
    assert jobs and not sc._early_left, "early entries kept"
    assert all(j.done() or (not j.steal() and j.wait() == 1) for j in jobs), "an early job left behind"
print("ok", len(made))
'''


def test_with_no_worker_running_the_thread_that_needs_a_job_runs_it_and_a_closed_stream_drops_the_rest(tmp_path):
    _table(str(tmp_path / "t"), parts=5)
    tests = str(pathlib.Path(__file__).parent)
    out = subprocess.run([sys.executable, "-c", CHILD, str(pathlib.Path(offload.__file__).parents[2]),
                          str(tmp_path / "t")], capture_output=True, text=True, timeout=300, cwd=tests)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr


def test_a_reader_dropped_early_leaves_nothing_behind(tmp_path, lanes):
    import gc

    whole = _table(str(tmp_path / "t"), parts=8)
    from qdbpm.table.table import open_table

    for _ in range(5):
        with open_table(str(tmp_path / "t")) as t:
            reader = t.scan("q < 30", ["k", "price"]).to_reader()
            first = reader.read_next_batch()
            assert first.num_rows > 0
            del reader
            gc.collect()
    where, cols = "q < 30", ["k", "price"]
    assert same(read_table(str(tmp_path / "t"), cols, where), whole.filter(to_arrow(where_text(where), whole.schema)).select(cols))


def _child_read(root, q):
    where, cols = "q < 24 AND s = 'b'", ["k", "price", "note"]
    q.put(read_table(root, cols, where).num_rows)


def test_a_forked_child_reads_with_its_own_worker(tmp_path, lanes):
    root = str(tmp_path / "t")
    whole = _table(root, parts=6)
    where, cols = "q < 24 AND s = 'b'", ["k", "price", "note"]
    n = read_table(root, cols, where).num_rows  # the parent's worker has run
    assert n == whole.filter(to_arrow(where_text(where), whole.schema)).num_rows
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_read, args=(root, q))
    p.start()
    got = q.get(timeout=120)
    p.join(60)
    assert p.exitcode == 0 and got == n


def test_a_range_the_worker_cannot_read_fails_the_scan_as_a_python_read(tmp_path, lanes, monkeypatch):
    """A partition truncated after the scan was planned: the worker's read comes up short, the
    range is read again in Python, and the scan fails with that read's StorageError, as it does
    with the worker off."""
    from qdbpm.table.table import open_table

    root = str(tmp_path / "t")
    _table(root, parts=5)
    errors = {}
    for enabled in (True, False):
        monkeypatch.setattr(offload, "ENABLED", enabled)
        with open_table(root) as t:
            s = t.scan("q < 24 AND s = 'b'", ["k", "price", "note"])
            s.byte_ranges()
            path = os.path.join(root, "p=3", "data.parquet")
            raw = pathlib.Path(path).read_bytes()
            pathlib.Path(path).write_bytes(raw[:len(raw) // 3])
            try:
                with pytest.raises(StorageError) as e:
                    s.to_table()
                errors[enabled] = str(e.value)
            finally:
                pathlib.Path(path).write_bytes(raw)
    assert errors[True] == errors[False] and "p=3" in errors[True]


@pytest.mark.parametrize("where", ["q < 24 AND s = 'b'", "q BETWEEN 3 AND 30"])  # the second: filter jobs
def test_a_scan_leaves_nothing_to_the_cycle_collector(tmp_path, lanes, where):
    """Every Read, Split, filter job and decoded page of a scan is freed by reference counting
    as it is done with: one left to the cycle collector keeps its pages (and the worker's buffer
    cache empty) until the next collection, which a caller may have switched off."""
    import gc

    root = str(tmp_path / "t")
    _table(root, parts=6)
    cols = ["k", "price", "note"]
    read_table(root, cols, where)
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            read_table(root, cols, where)
        assert gc.collect() == 0
    finally:
        gc.enable()
    assert lanes["worker"] > 0


@pytest.mark.parametrize("codec", ["snappy", "lz4", "none"])
def test_the_filter_pass_on_the_worker_keeps_the_rows_pyarrow_keeps(tmp_path, lanes, monkeypatch, codec):
    """Once the Decider's memo holds a predicate column's values, a unit's filter pass runs on
    the worker (offload.kept): the rows read equal pyarrow's with it on and off; a memo lacking
    a unit's values (k, price: new in every unit) leaves the pass to Python."""
    root = str(tmp_path / "t")
    whole = _table(root, codec=codec)
    taken = {True: 0, False: 0}
    real = offload.Split.kept

    def counted(self, idle=None):
        got = real(self, idle)
        taken[offload.FILTER_PASS] += got is not None
        return got

    monkeypatch.setattr(offload.Split, "kept", counted)
    queries = [("q BETWEEN 5 AND 7", ["k", "price"]), ("q < 24 AND k > 4000", ["k", "q", "price"]),
               ("price > 1200 AND q >= 40", ["note", "q"]), ("q IN (1, 3, 49)", ["q"])]
    for on in (True, False):
        monkeypatch.setattr(offload, "FILTER_PASS", on)
        for where, cols in queries:
            want = whole.filter(to_arrow(where_text(where), whole.schema)).select(cols)
            for _ in range(2):  # the second read finds every unit's values in the memo
                assert same(read_table(root, cols, where), want), (codec, on, where)
    assert taken[True] > 0 and taken[False] == 0


def test_the_filter_job_is_queued_only_where_its_mask_and_rows_fit_the_units_budget_charge(tmp_path, lanes,
                                                                                             monkeypatch):
    """A queued filter job holds 9 bytes a row (its mask, its rows) until its unit is read: a unit
    whose budget charge (fetched plus decoded bytes) is smaller keeps the filter pass in Python;
    either way the rows equal pyarrow's."""
    import pyarrow.parquet as pq

    import qdbpm

    rng = np.random.default_rng(5)
    parts = []
    for i in range(5):
        n = 20000
        t = pa.table({"b": pa.array(rng.integers(0, 12, n).astype(np.int32)),
                      "x": pa.array(rng.integers(0, 10 ** 9, n)), "y": pa.array(rng.normal(size=n))})
        d = tmp_path / "t" / f"p={i}"
        d.mkdir(parents=True)
        pq.write_table(t, str(d / "data.parquet"), compression="snappy")
        qdbpm.generate(str(d / "data.parquet"))
        parts.append(t)
    whole = pa.concat_tables(parts)
    queued = []
    real = offload._offload.filter
    monkeypatch.setattr(offload._offload, "filter", lambda *a: queued.append(1) or real(*a))
    for cols, job in ((["b"], False), (["b", "x", "y"], True)):  # 4 decoded bytes a row, then 20
        queued.clear()
        want = whole.filter(to_arrow(where_text("b < 3"), whole.schema)).select(cols)
        for _ in range(2):  # the second read finds every unit's values in the memo
            assert same(read_table(str(tmp_path / "t"), cols, "b < 3"), want)
        assert bool(queued) == job, cols


@pytest.mark.parametrize("codec", ["snappy", "zstd", "gzip"])
def test_the_first_units_columns_started_before_the_plan_read_what_pyarrow_reads(tmp_path, lanes, monkeypatch,
                                                                                  codec):
    """The worker's share of the first units (scan.EARLY_ROW_GROUPS of them), read and split
    before the units are planned (`offload.early`), is what their splits take: none (0), the
    first units', or every row group's (10, past the units split ahead). The rows are pyarrow's
    each way; a gzip chunk is no worker's split and never started early."""
    whole = _table(str(tmp_path / "t"), codec=codec)
    started, taken = [], []
    real_early, real_split = offload.early, offload.split

    def early(*a):
        got = real_early(*a)
        started.extend(e[3] for e in got.values())
        return got

    def split(*a, **k):
        got = real_split(*a, **k)
        if got is not None:
            taken.extend(p[5] for p in got.parts if p is not None)
        return got

    monkeypatch.setattr(offload, "early", early)
    monkeypatch.setattr(offload, "split", split)
    for n in (0, scan.EARLY_ROW_GROUPS, 10):
        monkeypatch.setattr(scan, "EARLY_ROW_GROUPS", n)
        started.clear()
        taken.clear()
        for where, cols in QUERIES:
            want = whole.filter(to_arrow(where_text(where), whole.schema)).select(cols)
            assert same(read_table(str(tmp_path / "t"), cols, where), want), (codec, n, where)
        used = {id(j) for j in taken}
        assert (len(started) > 0) == (n > 0 and codec != "gzip"), (codec, n)
        assert all(id(j) in used for j in started) or n == 10, "an early split no unit took"
        assert any(id(j) in used for j in started) == bool(started)


def test_a_split_takes_an_early_entry_only_for_its_own_chunk(tmp_path):
    """offload.split takes an early entry of (file, row group, column) only where its start and
    length are the chunk's; else it splits the chunk from the unit's own bytes."""
    import pyarrow.parquet as pq

    import qdbpm

    path = str(tmp_path / "data.parquet")
    pq.write_table(pa.table({"x": pa.array(np.arange(5000, dtype=np.int64))}), path, compression="snappy",
                   row_group_size=2500)
    qdbpm.generate(path)
    pm = qdbpm.open(str(tmp_path / "_pm"))
    ch = pm.chunks[1, 0]
    start, n = int(ch["byte_range_start"]), int(ch["total_compressed"])
    buf = np.frombuffer(pathlib.Path(path).read_bytes()[start:start + n], np.uint8).copy()
    found = {(1, 0): (None, buf, 0, n)}
    for shift, used in ((0, True), (1, False)):
        early = offload.early(pm, path, [1], [0])
        mine = early[(pm.path, 1, 0)][3]
        early[(pm.path, 1, 0)] = (start + shift,) + early[(pm.path, 1, 0)][1:]
        got = offload.split(pm, [1], [0], found, set(), lambda: None, early=early)
        assert (got.parts[0][5] is mine) == used and not early
        values = got.result()[0][0]
        assert pages.chunk_values(values, None).values.tolist() == list(range(2500, 5000))


def test_early_splits_start_the_first_unit_and_the_next_ones_within_the_cap(tmp_path, lanes):
    """direct.early_splits: the first item's share is always started (the stream admits a first
    unit whatever its size); a next one only while every started chunk's bytes, read and decoded
    (decode.decoded_estimate), stay within the cap."""
    import pyarrow.parquet as pq

    import qdbpm
    from qdbpm.table.decode import decoded_estimate

    items = []
    for i in range(3):
        (tmp_path / str(i)).mkdir()
        path = str(tmp_path / str(i) / "data.parquet")
        pq.write_table(pa.table({"x": pa.array(np.arange(40000, dtype=np.int64) * (i + 1))}), path,
                       compression="snappy")
        qdbpm.generate(path)
        pm = qdbpm.open(str(tmp_path / str(i) / "_pm"))
        items.append((pm, path, [0], [0]))
    one = int(decoded_estimate(items[0][0].chunks[[0]][:, [0]], items[0][0].columns[[0]][None, :])[0]) + \
        int(items[0][0].chunks[0, 0]["total_compressed"])
    for cap, files in ((0, 1), (one, 1), (10 * one, 3)):
        got = direct.early_splits(items, cap)
        assert sorted({k[0] for k in got}) == sorted(it[0].path for it in items[:files]), cap
        offload.discard(got)
    # a first item of several row groups: its first row group's share always, the next ones' within the cap
    (tmp_path / "many").mkdir()
    path = str(tmp_path / "many" / "data.parquet")
    pq.write_table(pa.table({"x": pa.array(np.arange(120000, dtype=np.int64))}), path, compression="snappy",
                   row_group_size=40000)
    qdbpm.generate(path)
    pm = qdbpm.open(str(tmp_path / "many" / "_pm"))
    for cap, rgs, total in ((0, [0], 1), (5 * one // 2, [0, 1], 2), (10 * one, [0, 1, 2], 6)):
        got = direct.early_splits([(pm, path, [0, 1, 2], [0])] + items, cap)
        assert sorted(r for p, r, c in got if p == pm.path) == rgs and len(got) == total, cap
        offload.discard(got)
