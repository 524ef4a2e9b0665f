"""A scan of several filtered units decompresses the next units' columns on the pool while this
thread filters and gathers the current one (qdbpm.table.direct.presplit / Split, Scan._batches):
the rows equal pyarrow's, a failure in a unit split ahead ends the read as it would have without
it, and no thread waits behind the pool's queue for work it can do itself."""

import os
import pathlib
import threading

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.errors import ParquetFormatError, PmError
from qdbpm.prune.arrow import to_arrow
from qdbpm.prune.filters import where_text
from qdbpm.table import direct, pool, scan
from qdbpm.table.read import read_table

from test_direct import same  # noqa: E402


def _blocked_pool():
    """The pool's threads held until the returned event is set (one task per lane)."""
    go = threading.Event()
    held = [pool.executor().submit(go.wait) for _ in range(max(1, direct.LANES - 1))]
    return go, held


def test_a_split_the_pool_has_not_started_runs_in_the_thread_that_needs_it():
    go, held = _blocked_pool()
    try:
        ran = []
        task = pool.Split(lambda: ran.append(threading.get_ident()) or "pages")
        assert task.result() == "pages" and ran == [threading.get_ident()]

        def bad():
            raise ParquetFormatError("a page ends early")

        failing = pool.Split(bad)
        assert failing.steal()  # ran here; its error waits for whoever takes the result
        with pytest.raises(ParquetFormatError, match="ends early"):
            failing.result()
        assert not failing.steal()  # done: nothing left to run
    finally:
        go.set()
        for h in held:
            h.result()


def test_while_the_pool_runs_a_split_the_waiting_thread_does_other_work():
    started, release, calls = threading.Event(), threading.Event(), []

    def slow():
        started.set()
        release.wait()
        return 7

    task = pool.Split(slow)
    started.wait()

    def idle():
        calls.append(1)
        if len(calls) == 3:
            release.set()
        return len(calls) < 5

    assert task.result(idle) == 7 and len(calls) >= 3


def _table(root, parts=6, seed=1, codec="snappy"):
    rng = np.random.default_rng(seed)
    tables = []
    for i in range(parts):
        n = 3000
        t = pa.table({"k": pa.array(np.arange(i * n, (i + 1) * n)),
                      "q": pa.array(rng.integers(0, 50, n)),
                      "price": pa.array(rng.normal(1000, 300, n)),
                      "s": pa.array(rng.choice(["a", "b", "c", None], n)),
                      "note": pa.array([f"n{x}" for x in rng.integers(0, 10 ** 6, n)])})
        d = os.path.join(root, f"p={i}")
        os.makedirs(d)
        pq.write_table(t, os.path.join(d, "data.parquet"), compression=codec, row_group_size=1500)
        qdbpm.generate(os.path.join(d, "data.parquet"))
        tables.append(t)
    return pa.concat_tables(tables)


def corrupt_a_later_chunk(root, seed, rng):
    """Three bytes of a chunk of a later partition of `_table`'s root mutated: by `seed`, the
    price, note or q column (a column split ahead, or the predicate's)."""
    path = os.path.join(root, f"p={1 + seed % 3}", "data.parquet")
    md = pq.ParquetFile(path).metadata
    raw = bytearray(pathlib.Path(path).read_bytes())
    c = md.row_group(int(rng.integers(0, md.num_row_groups))).column([2, 4, 1][seed % 3])
    start = c.dictionary_page_offset or c.data_page_offset
    for _ in range(3):
        raw[int(rng.integers(start, start + c.total_compressed_size))] = int(rng.integers(0, 256))
    pathlib.Path(path).write_bytes(bytes(raw))


@pytest.fixture
def lanes(monkeypatch):
    """Two lanes and no size floor: every filtered unit of several is split ahead, on the pool
    (the worker that never takes the GIL off: its own tests are tests/table/test_offload.py)."""
    from qdbpm.table import offload

    monkeypatch.setattr(offload, "ENABLED", False)
    monkeypatch.setattr(direct, "LANES", 2)
    monkeypatch.setattr(direct, "PARALLEL_BYTES", 0)
    seen = {"ready": 0, "units": 0, "filter": 0, "filter_beside_share": 0}
    real = scan.Scan._decode

    def decode(self, unit, blobs, ready=None, idle=None):
        seen["units"] += 1
        seen["ready"] += bool(ready)
        ahead = bool(ready) and direct.FILTER in ready  # the predicate's columns split ahead
        seen["filter"] += ahead
        # ... only where the pool has none of the other columns: else this thread splits them
        seen["filter_beside_share"] += ahead and any(c != direct.FILTER for c in ready)
        return real(self, unit, blobs, ready, idle)

    monkeypatch.setattr(scan.Scan, "_decode", decode)
    return seen


@pytest.mark.parametrize("codec", ["snappy", "zstd", "none"])
def test_units_split_ahead_read_what_pyarrow_reads(tmp_path, lanes, codec):
    whole = _table(str(tmp_path / "t"), codec=codec)
    for where, cols in [("q < 24 AND s = 'b'", ["k", "price", "note"]), ("q BETWEEN 5 AND 7", ["k", "q", "price", "s", "note"]),
                        ("s IS NULL AND price > 1200", ["note", "q"]), ("note LIKE 'n1%' AND q <> 3", ["k"]),
                        ("q BETWEEN 5 AND 7 AND s = 'a'", ["q", "s"])]:
        want = whole.filter(to_arrow(where_text(where), whole.schema))
        want = want.select(cols)
        got = read_table(str(tmp_path / "t"), cols, where)
        assert same(got, want), (codec, where)
    assert lanes["ready"] >= lanes["units"] // 2  # most units were split ahead
    # the last query's units return the predicate's columns only: those are split ahead
    # (ANDs of one-column terms); beside a share of other columns, only from FILTER_AHEAD_BYTES
    assert lanes["filter"] >= lanes["units"] // 10 and lanes["filter_beside_share"] == 0


def test_large_predicate_columns_are_split_ahead_beside_a_share(tmp_path, lanes, monkeypatch):
    """From FILTER_AHEAD_BYTES the predicate's columns go to the pool beside its share of the
    others (a large float column filtered on): the same rows."""
    monkeypatch.setattr(direct, "FILTER_AHEAD_BYTES", 0)
    whole = _table(str(tmp_path / "t"))
    for where, cols in [("price > 1200", ["k", "note"]), ("q < 24 AND s = 'b'", ["k", "price", "note"])]:
        got = read_table(str(tmp_path / "t"), cols, where)
        assert same(got, whole.filter(to_arrow(where_text(where), whole.schema)).select(cols)), where
    assert lanes["filter_beside_share"] >= lanes["units"] // 2


@pytest.mark.parametrize("offloaded", [False, True])
@pytest.mark.parametrize("seed", range(9))
def test_a_corrupt_unit_split_ahead_ends_the_read_as_without_it(tmp_path, lanes, monkeypatch, seed, offloaded):
    """Bytes of a later partition's chunks mutated (a column split ahead, or the predicate's):
    the read ends as pyarrow's reader ends it (an error, or the same rows), as it did before
    units were split ahead; on the pool, or on the worker that never takes the GIL (offloaded)."""
    from qdbpm.table import offload

    monkeypatch.setattr(offload, "ENABLED", offloaded)
    root = str(tmp_path / "t")
    _table(root, parts=4, seed=seed, codec=["none", "snappy"][seed % 2])
    corrupt_a_later_chunk(root, seed, np.random.default_rng(seed))

    def outcome():
        try:
            return read_table(root, ["k", "price", "note"], "q < 30")
        except PmError as e:
            return type(e)

    got = outcome()
    scan.DIRECT = False
    try:
        want = outcome()
    finally:
        scan.DIRECT = True
    if isinstance(want, type):
        assert isinstance(got, type), seed
    else:
        assert isinstance(got, pa.Table) and same(got, want), seed
    assert lanes["ready"]


def test_a_scan_read_by_dataset_filter_still_equals(tmp_path, lanes):
    """The same files through pyarrow.dataset's own filter: the reference the rows must equal."""
    _table(str(tmp_path / "t"), parts=3)
    where = "q < 10 AND s = 'a'"
    dataset = ds.dataset(str(tmp_path / "t"), format="parquet", partitioning="hive")
    want = dataset.to_table(columns=["k", "price"], filter=to_arrow(where_text(where), dataset.schema))
    got = read_table(str(tmp_path / "t"), ["k", "price"], where)
    assert same(got.sort_by("k"), want.sort_by("k"))


def test_a_lane_the_pool_has_not_started_runs_in_the_calling_thread():
    """pool.run with the pool busy (held below): every lane runs here rather than wait for it.
    Were a lane left queued, the timer would free the pool after 30 s and the thread ids
    would show it."""
    go, held = _blocked_pool()
    timer = threading.Timer(30, go.set)
    timer.start()
    try:
        me = threading.get_ident()
        got = pool.run([lambda i=i: (i, threading.get_ident()) for i in range(6)], [5, 4, 3, 3, 2, 1], 2)
        assert [g[0] for g in got] == list(range(6)) and {g[1] for g in got} == {me}
    finally:
        timer.cancel()
        go.set()
        for h in held:
            h.result()


def test_a_deferred_read_is_made_once_for_every_thread_that_asks():
    """pipeline.Deferred: the first thread to ask makes the read; one asking meanwhile waits
    and gets the same answer (or the same error); nothing is read until someone asks."""
    from qdbpm.table import pipeline

    inside, release, made = threading.Event(), threading.Event(), []

    def read(x):
        made.append(threading.get_ident())
        inside.set()
        release.wait(60)
        return x * 2

    d = pipeline.Lazy().submit(read, 21)
    assert not d.done() and not made and not d.cancel()
    first = threading.Thread(target=d.result)
    first.start()
    inside.wait(60)
    second = []
    waiter = threading.Thread(target=lambda: second.append(d.result()))
    waiter.start()
    release.set()
    first.join(60)
    waiter.join(60)
    assert second == [42] and d.result() == 42 and len(made) == 1 and d.done()

    def failing():
        made.append(0)
        raise qdbpm.StorageError("gone")

    bad = pipeline.Deferred(failing, ())
    assert isinstance(bad.exception(), qdbpm.StorageError)
    with pytest.raises(qdbpm.StorageError, match="gone"):
        bad.result()
    assert made.count(0) == 1


@pytest.mark.parametrize("mode", ["deferred", "offload", "admission"])
def test_units_split_ahead_are_read_once_by_the_work_started_on_them(tmp_path, lanes, monkeypatch, mode):
    """Local units split ahead are not read here at admission (scan.LAZY_READS): each range is
    read once, by the worker that never takes the GIL (offload), or, offload off, by the first
    thread that needs it, the pool's splitting it ahead or this one; the rows are pyarrow's.
    LAZY_READS False: every range is read here as its unit is admitted."""
    from qdbpm.table import offload

    lazy = mode != "admission"
    monkeypatch.setattr(scan, "LAZY_READS", lazy)
    monkeypatch.setattr(offload, "ENABLED", mode == "offload")
    root = str(tmp_path / "t")
    whole = _table(root)
    where, cols = "q < 24 AND s = 'b'", ["k", "price", "note"]
    events, readers = [], []
    real = scan.Scan._stream

    units = []

    def observed(self, units_, inline=False, ahead=None, starting=None):
        self.observer = lambda event, n: events.append(event)
        units.extend(units_)
        return real(self, units_, inline, ahead, starting)

    real_presplit, given = scan.Scan._presplit, []

    def presplit(self, unit, blobs):  # what each unit's work started on: its bytes, or its reads
        given.append(isinstance(blobs, dict))
        return real_presplit(self, unit, blobs)

    from qdbpm.table import pipeline
    real_fetch = pipeline._fetch

    def fetch(fs, path, r, size, note):
        readers.append((path, r.start, threading.current_thread().name))
        return real_fetch(fs, path, r, size, note)

    monkeypatch.setattr(scan.Scan, "_stream", observed)
    monkeypatch.setattr(scan.Scan, "_presplit", presplit)
    monkeypatch.setattr(pipeline, "_fetch", fetch)
    got = read_table(root, cols, where)
    assert same(got, whole.filter(to_arrow(where_text(where), whole.schema)).select(cols))
    admits = events.count("admit")
    # on the worker, the predicate's columns are split ahead beside the others (it costs no thread)
    assert admits >= 4 and lanes["ready"] >= admits // 2 and (lanes["filter_beside_share"] == 0) == (mode != "offload")
    # lazy: every unit's work, the first's too, started on its reads before they were waited for
    assert given == ([False] * admits if lazy else [True] + [False] * (admits - 1))
    if mode == "offload":  # the worker read every range, none was read again in Python
        assert readers == [] and events.count("fetched") == sum(len(u.plan.ranges) for u in units)
    else:
        assert len({(p, s) for p, s, _ in readers}) == len(readers) == events.count("fetched")  # once each
    first_read = events.index("fetched")
    if lazy:  # every unit admitted (they fit the budget) before any is read
        assert events[:first_read].count("admit") == admits
    else:
        assert events[:first_read] == ["plan", "admit", "decoded"]
        assert {t for _, _, t in readers} == {threading.current_thread().name}


def test_to_table_works_out_the_schema_once_the_first_units_are_started(tmp_path, lanes, monkeypatch):
    """to_table starts its first units (the pool splits them) before it works out the schema
    (it reads footers); to_reader needs the schema first. Both give pyarrow's rows."""
    root = str(tmp_path / "t")
    whole = _table(root)
    where, cols = "q < 24 AND s = 'b'", ["k", "price", "note"]
    events = []
    real_schema, real_presplit = scan.Scan.schema, scan.Scan._presplit
    monkeypatch.setattr(scan.Scan, "schema", property(lambda self: events.append("schema") or real_schema.fget(self)))
    monkeypatch.setattr(scan.Scan, "_presplit",
                        lambda self, unit, blobs: events.append("presplit") or real_presplit(self, unit, blobs))
    want = whole.filter(to_arrow(where_text(where), whole.schema)).select(cols)
    with qdbpm.open_table(root) as table:
        got = table.scan(where, cols).to_table()
        assert same(got, want) and events.index("presplit") < events.index("schema")
        events.clear()
        got = table.scan(where, cols).to_reader().read_all()
        assert same(got, want) and events[0] == "schema"


def test_a_stream_closed_early_drops_the_splits_the_pool_has_not_started(tmp_path, lanes, monkeypatch):
    """A reader dropped after its first batch: the later units' Splits still queued (the pool
    held busy) are dropped, not left to decompress pages nobody will read; none runs once the
    pool is free. (The worker's jobs: tests/table/test_offload.py.)"""
    root = str(tmp_path / "t")
    _table(root)
    made = []

    class Seen(pool.Split):
        __slots__ = ()

        def __init__(self, fn):
            super().__init__(fn)
            made.append(self)

    monkeypatch.setattr(pool, "Split", Seen)
    go, held = _blocked_pool()
    try:
        batches = qdbpm.open_table(root).scan("q < 24 AND s = 'b'", ["k", "note"], batch_rows=100)._batches()
        assert next(batches).num_rows
        queued = [s for s in made if not s.fu.done()]
        assert queued  # later units split ahead, waiting for the pool
        batches.close()
        assert all(s.fu.cancelled() for s in queued)
    finally:
        go.set()
        for h in held:
            h.result()
