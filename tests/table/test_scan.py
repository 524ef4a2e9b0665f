"""Table.scan: the pruning decision as row groups, an exact count, a byte-range plan and a
bounded stream, against DuckDB evaluating the same WHERE text over the same Parquet files.

Tables are written by pyarrow (several partitions, row groups of 100 rows, sorted by `ts` and
`rid`, a `grp` column constant per row group so statistics prove whole row groups), `_pm` by
qdbpm.generate. A fixed seeded list of SQL predicates and column subsets checks to_table,
to_reader and count against DuckDB, and `full` against brute force; counting filesystems show
what a scan fetches; a budget hook shows what the pipeline holds.
"""

import gc
import os
import threading

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.sync.generate import generate
from qdbpm.table.decode import decoded_bytes
from qdbpm.table import offload, pipeline
from qdbpm.table.pipeline import THREAD_NAME
from qdbpm.table.ranges import plan

from support.scan_cases import COLUMNS, DAY_US, DAYS, N_PREDICATES, RG, ROWS, cases, iso, rows_of, write_partition
from support.table_files import CountingFS, upload
from support.table_files import duckdb_rows as duck


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("scan"))
    files = []
    for d in range(DAYS):
        part = os.path.join(root, f"day={d:02d}")
        os.makedirs(part)
        files.append(os.path.join(part, "data.parquet"))
        write_partition(files[-1], d)
        generate(files[-1])
    return root, files


def test_scan_equals_duckdb(table_dir):
    root, files = table_dir
    seen_full = seen_partial = nonempty = 0
    with qdbpm.open_table(root) as table:
        for where, cols, batch_rows in cases():
            want = duck(files, f"SELECT {', '.join(cols)} FROM FILES WHERE {where} ORDER BY rid")
            scan = table.scan(where, cols, batch_rows=batch_rows)
            got = scan.to_table()
            assert got.column_names == cols
            assert rows_of(got) == want, where
            batches = list(scan.to_reader())
            assert all(0 < b.num_rows <= (batch_rows or RG) for b in batches), where
            streamed = pa.Table.from_batches(batches, scan.schema)
            assert streamed.schema == got.schema and rows_of(streamed) == want, where
            assert scan.count() == len(want), where
            nonempty += bool(want)

            # full: statistics' proof; brute force says every row of such a row group matches,
            # and every row group holding a match survives
            per_rg = duck(files, f"""SELECT rid // 100000, (rid % 100000) // {RG},
                count(*) FILTER (WHERE ({where}) IS NOT TRUE), count(*) FILTER (WHERE {where})
                FROM FILES GROUP BY ALL""")
            rgs = scan.row_groups()
            kept = {(int(p[4:]), r): f for p, r, f in zip(rgs["partition"].to_pylist(),
                                                          rgs["row_group"].to_pylist(), rgs["full"].to_pylist())}
            for day, rg, missing, matching in per_rg:
                if matching:
                    assert (day, rg) in kept, (where, day, rg)
                if kept.get((day, rg)):
                    assert missing == 0, (where, day, rg)
            seen_full += sum(kept.values())
            seen_partial += sum(not f for f in kept.values())
    # the fixed case list exercises both classes and real results
    assert seen_full > 100 and seen_partial > 100 and nonempty > N_PREDICATES // 2


def test_row_groups_columns(table_dir):
    root, _ = table_dir
    with qdbpm.open_table(root) as table:
        t = table.scan("grp = 7 OR qty > 45").row_groups()
        assert t.schema.names == ["partition", "path", "row_group", "num_rows", "full"]
        assert [f.type for f in t.schema] == [pa.string(), pa.string(), pa.int32(), pa.int64(), pa.bool_()]
        assert all(p == table.parquet_path(q) for p, q in zip(t["path"].to_pylist(), t["partition"].to_pylist()))
        assert {(r, f) for r, f in zip(t["row_group"].to_pylist(), t["full"].to_pylist()) if r == 7} == {(7, True)}
        assert table.scan().row_groups()["full"].to_pylist() == [True] * (DAYS * 8)
        empty = table.scan("grp > 100").row_groups()
        assert empty.num_rows == 0 and empty.schema == t.schema


def boundary(day, rg):
    return iso(day * DAY_US + rg * RG * (DAY_US // ROWS))


def test_count_of_a_time_range_reads_no_data_bytes(table_dir):
    root, files = table_dir
    where = f"ts >= '{boundary(0, 2)}' AND ts < '{boundary(1, 7)}'"  # day 0 rg 2 .. day 1 rg 6
    counting = CountingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(root, counting) as table:
        scan = table.scan(where)
        assert all(scan.row_groups()["full"].to_pylist()) and scan.row_groups().num_rows == 6 + 7
        n = scan.count()
    assert n == duck(files, f"SELECT count(*) FROM FILES WHERE {where}")[0][0] == 550 + 700
    assert not [q for q, *_ in counting.requests if q.endswith("data.parquet")]


def test_full_row_groups_never_fetch_predicate_only_columns(table_dir):
    root, files = table_dir
    where = "grp BETWEEN 2 AND 5"  # min = max = grp in every row group: all survivors full
    counting = CountingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(root, counting) as table:
        scan = table.scan(where, ["rid", "ts", "px"])
        got = scan.to_table()
        assert rows_of(got) == duck(files, f"SELECT rid, ts, px FROM FILES WHERE {where} ORDER BY rid")
        assert set(scan.byte_ranges()["column"].to_pylist()) == {"rid", "ts", "px"}
        filler = 0
        for p in table.partitions:
            pm = table.meta(p)
            g = pm.column_index("grp")
            chunks = [(int(c["byte_range_start"]), int(c["byte_range_start"] + c["total_compressed"]))
                      for c in pm.chunks[:, g]]
            reads = [(s, e) for q, s, e, _ in counting.requests if q == table.parquet_path(p)]
            assert reads and not [(s, e) for s, e in reads for a, b in chunks if s < b and a < e
                                  and (s, e) != (pm.parquet_footer_offset, pm.parquet_size)]
            # without the barrier the coalescing rule would take the tiny grp chunk as filler
            loose = plan(pm, [2, 3, 4, 5], [pm.column_index(n) for n in ("rid", "ts", "px")])
            filler += sum(r.start < b and a < r.end for r in loose.ranges for a, b in chunks)
        assert filler > 0
        grp3 = [(int(c["byte_range_start"]), int(c["byte_range_start"] + c["total_compressed"]))
                for c in table.meta("day=00").chunks[3:4, 2]]

        def fetched_grp3():
            return any(s < b and a < e for q, s, e, _ in counting.requests if q == table.parquet_path("day=00")
                       for a, b in grp3)

        # A partial row group whose stats prove `grp = 3` for every row filters on qty alone:
        # grp is not fetched there (nor asked of the exact filter), and the rows are DuckDB's.
        counting.requests.clear()
        where = "grp = 3 AND qty > 0"
        scan = table.scan(where, ["rid", "px"])
        assert rows_of(scan.to_table()) == duck(files, f"SELECT rid, px FROM FILES WHERE {where} ORDER BY rid")
        assert not fetched_grp3()
        assert scan._parts and all(p.residual.columns() == {"qty"} for p in scan._parts)
        # A conjunct statistics cannot prove (arithmetic: a residual) is filtered on, so fetched.
        counting.requests.clear()
        where = "grp + 0 = 3 AND qty > 0"
        scan = table.scan(where, ["rid", "px"])
        assert rows_of(scan.to_table()) == duck(files, f"SELECT rid, px FROM FILES WHERE {where} ORDER BY rid")
        assert fetched_grp3()


def test_byte_ranges_is_the_plan_fetched(table_dir):
    root, _ = table_dir
    counting = CountingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(root, counting) as table:
        scan = table.scan("qty > 40 OR note = 'n3'", ["rid", "note"])
        br = scan.byte_ranges()
        assert br.schema.names == ["path", "offset", "length", "partition", "row_group", "column"]
        assert [f.type for f in br.schema] == [pa.string(), pa.int64(), pa.int64(), pa.string(), pa.int32(),
                                               pa.string()]
        assert set(br["column"].to_pylist()) <= {"rid", "note", "qty"}
        planned = {(p, o, o + n) for p, o, n in zip(br["path"].to_pylist(), br["offset"].to_pylist(),
                                                     br["length"].to_pylist())}
        scan.to_table()
        fetched = {(q, s, e) for q, s, e, _ in counting.requests if q.endswith("data.parquet")}
        footers = {(table.parquet_path(p), table.meta(p).parquet_footer_offset, table.meta(p).parquet_size)
                   for p in table.partitions}
        assert fetched - footers == planned
        # every chunk's offset/length is a coalesced range holding it
        for rg, col, part, o, n in zip(br["row_group"].to_pylist(), br["column"].to_pylist(),
                                       br["partition"].to_pylist(), br["offset"].to_pylist(), br["length"].to_pylist()):
            pm = table.meta(part)
            c = pm.chunks[rg, pm.column_index(col)]
            assert o <= int(c["byte_range_start"]) and int(c["byte_range_start"] + c["total_compressed"]) <= o + n
        # all-null chunks (note in the first half) are never listed nor fetched
        assert not [1 for rg, col in zip(br["row_group"].to_pylist(), br["column"].to_pylist())
                    if col == "note" and rg < 3]


def test_pipeline_never_holds_more_than_the_budget(table_dir):
    root, files = table_dir
    with qdbpm.open_table(root) as table:
        per_rg = {}
        for r in table.scan(None, ["px", "qty"]).byte_ranges().to_pylist():
            per_rg.setdefault((r["partition"], r["row_group"]), set()).add((r["offset"], r["length"]))
        decoded = {(name, rg): int(decoded_bytes(table.meta(name), [rg], [table.meta(name).column_index(c)
                                                                         for c in ("px", "qty")])[0])
                   for name, rg in per_rg}
        # a row group's charge: its fetched bytes plus its decoded estimate
        one_rg = max(sum(n for _, n in ranges) + decoded[k] for k, ranges in per_rg.items())
        for budget in [3 * one_rg, 1]:  # several row groups ahead; then every unit alone
            scan = table.scan(None, ["px", "qty"], memory_budget=budget, batch_rows=50)
            events = []
            scan.observer = lambda e, n: events.append((e, n))
            got = scan.to_table()
            assert rows_of(got) == duck(files, "SELECT px, qty FROM FILES ORDER BY rid")
            held = arrived = units = peak = 0
            ahead = None  # units admitted before the first one is released
            admitted = []  # [charged, decoded] per unit held, in admission (= release) order
            for e, n in events[1:]:
                if e == "admit":
                    held, units = held + n, units + 1
                    admitted.append([n, None])
                elif e == "decoded":
                    assert admitted[-1][1] is None and 0 < n < admitted[-1][0]  # rows cost memory too
                    admitted[-1][1] = n
                elif e == "release":
                    ahead = units if ahead is None else ahead
                    charged, decoded = admitted.pop(0)
                    assert charged == n
                    held, units, arrived = held - n, units - 1, arrived - (n - decoded)
                else:
                    assert e == "fetched"
                    arrived += n
                assert held <= budget or units == 1  # a unit larger than the budget is held alone
                assert 0 <= arrived <= held  # bytes that arrived and are not yet yielded
                peak = max(peak, held)
            assert held == 0 and events[0] == ("plan", sum(n for e, n in events if e == "admit"))
            if budget > 1:
                assert peak <= budget and ahead >= 2  # fetched ahead while the first unit decodes
            else:
                assert ahead == 1 and peak <= 2 * one_rg  # one row group (+ small filler) alone


def scan_threads():
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


def test_a_local_count_reads_in_this_thread_and_a_remote_one_does_not(table_dir, monkeypatch):
    """A local table's count() reads its ranges inline, as to_table() does (a pread from the page
    cache costs less than a hand-off to a fetch thread); through fsspec it fetches concurrently."""
    root, _ = table_dir
    started = []
    real = pipeline.Fetcher.__init__

    def fetcher(self, *a, **k):
        started.append(1)
        real(self, *a, **k)

    monkeypatch.setattr(pipeline.Fetcher, "__init__", fetcher)
    where = "px > 100.5"  # partial row groups everywhere: many ranges
    with qdbpm.open_table(root) as table:
        scan = table.scan(where)
        assert len(scan.byte_ranges()) > 16
        local = scan.count()
    assert not started
    with qdbpm.open_table(root, fsspec.filesystem("file")) as table:
        assert table.scan(where).count() == local
    assert started


def test_an_inline_fetch_hands_its_bytes_or_its_error_to_the_unit_that_takes_it(table_dir, monkeypatch):
    """A local scan's ranges are read inline into `pool.Done` records: the chunks, or the
    read's error, raised where the unit's chunks are taken, as a Future's would be."""
    d = pipeline.Inline().submit(lambda: 1 / 0)
    assert d.done() and not d.cancel() and isinstance(d.exception(), ZeroDivisionError)
    with pytest.raises(ZeroDivisionError):
        d.result()
    ok = pipeline.Inline().submit(lambda x: x + 1, 1)
    assert ok.done() and ok.exception() is None and ok.result() == 2
    root, _ = table_dir
    with qdbpm.open_table(root) as table:
        want = table.scan("px > 100.5").to_table()
    real, calls = pipeline._fetch, []

    def failing(fs, path, r, size, note):
        calls.append(threading.current_thread())
        if len(calls) == 3:
            raise qdbpm.StorageError(f"{path}: the third range")
        return real(fs, path, r, size, note)

    monkeypatch.setattr(pipeline, "_fetch", failing)
    monkeypatch.setattr(offload, "ENABLED", False)  # reads the worker makes: tests/table/test_offload.py
    with qdbpm.open_table(root) as table:
        with pytest.raises(qdbpm.StorageError, match="the third range"):
            table.scan("px > 100.5").to_table()
    assert set(calls) == {threading.current_thread()}  # inline: no fetch thread
    monkeypatch.setattr(pipeline, "_fetch", real)
    with qdbpm.open_table(root) as table:
        assert table.scan("px > 100.5").to_table().equals(want)


def test_closing_the_reader_early_stops_the_pipeline(table_dir):
    root, _ = table_dir
    counting = CountingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(root, counting) as table:
        scan = table.scan(None, ["rid", "ts", "px"], memory_budget=20_000, batch_rows=10)
        total = int(scan.byte_ranges().group_by(["path", "offset"]).aggregate([("length", "max")])["length_max"]
                    .to_numpy().sum())
        reader = scan.to_reader()
        assert reader.read_next_batch().num_rows == 10
        reader.close()  # the reader stays referenced: the pipeline still stops
        for t in scan_threads():
            t.join(timeout=60)
        assert not scan_threads()
        data = sum(n for q, s, e, n in counting.requests if q.endswith("data.parquet")
                   and (s, e) != (table.meta("day=00").parquet_footer_offset, table.meta("day=00").parquet_size))
        assert 0 < data <= 20_000 < total
        del reader
        gc.collect()
        assert not scan_threads()


def test_batch_rows_and_the_arrow_stream(table_dir):
    root, files = table_dir
    where = "sym = 'S1' OR grp = 0"
    want = duck(files, f"SELECT {', '.join(COLUMNS)} FROM FILES WHERE {where} ORDER BY rid")
    with qdbpm.open_table(root) as table:
        # by default a scan returns the file columns, then the hive key (day=NN directories)
        assert table.scan(where).schema.names == COLUMNS + ["day"]
        for batch_rows in [1, 33, 1000]:
            scan = table.scan(where, COLUMNS, batch_rows=batch_rows)
            sizes = [b.num_rows for b in scan.to_reader()]
            assert max(sizes) <= batch_rows and sum(sizes) == len(want)
        scan = table.scan(where, COLUMNS)
        via_c = pa.RecordBatchReader.from_stream(scan).read_all()
        assert rows_of(via_c) == want and via_c.schema == scan.to_table().schema
        with pytest.raises(qdbpm.PmError, match="batch_rows"):
            table.scan(where, batch_rows=0)
        with pytest.raises(qdbpm.PmError, match="memory_budget"):
            table.scan(where, memory_budget=0)
        with pytest.raises(KeyError):
            table.scan(where, ["nope"])


def test_read_table_takes_an_open_table_and_reuses_its_footers(table_dir):
    root, files = table_dir
    counting = CountingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(root, counting) as table:
        a = qdbpm.read_table(table, ["rid", "sym"], "qty < -40")
        b = table.scan("qty < -40", ["rid", "sym"]).to_table()
        footer = [(s, e) for q, s, e, _ in counting.requests
                  if (s, e) == (table.meta("day=00").parquet_footer_offset, table.meta("day=00").parquet_size)]
        assert len(footer) == 1  # one _pm column schema, read once for both scans
        assert rows_of(a) == rows_of(b) == duck(files, "SELECT rid, sym FROM FILES WHERE qty < -40 ORDER BY rid")
        with pytest.raises(qdbpm.PmError, match="filesystem"):
            qdbpm.read_table(table, filesystem=counting)
    strict = qdbpm.open_table(root).scan("px > 110", ["ts", "px"], footer=False)
    assert strict.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert strict.count() == len(duck(files, "SELECT 1 FROM FILES WHERE px > 110"))


def test_open_table_partitioning_and_urls(table_dir):
    root, _ = table_dir
    assert qdbpm.open_table(root).partitioning == "hive"
    assert qdbpm.open_table(root, partitioning=None).partitioning is None
    with pytest.raises(qdbpm.PmError, match="partitioning"):
        qdbpm.open_table(root, partitioning="directory")
    t = qdbpm.open_table("file://" + root)
    assert t.filesystem is None and t.partitions == [f"day={d:02d}" for d in range(DAYS)]  # local stays local
    with pytest.raises(qdbpm.PmError, match="storage_options"):
        qdbpm.open_table(root, fsspec.filesystem("file"), storage_options={})


def test_zero_row_row_groups_are_never_fetched(tmp_path):
    part = tmp_path / "p=0"
    part.mkdir()
    t = pa.table({"a": pa.array(np.arange(30), pa.int64()), "b": pa.array([f"x{i}" for i in range(30)])})
    with pq.ParquetWriter(str(part / "data.parquet"), t.schema) as w:
        w.write_table(t.slice(0, 10))
        w.write_table(t.slice(0, 0))
        w.write_table(t.slice(10, 20))
    generate(str(part / "data.parquet"))
    with qdbpm.open_table(str(tmp_path)) as table:
        for where in [None, "a >= 0", "a > 5"]:
            scan = table.scan(where)
            assert 1 not in scan.row_groups()["row_group"].to_pylist()
            assert 1 not in scan.byte_ranges()["row_group"].to_pylist()
            assert scan.to_table().equals(qdbpm.read_table(str(tmp_path), where=where))
        assert table.scan("a > 5").count() == 24 and table.scan().count() == 30


def test_remote_scan_on_s3(s3_server, s3_bucket, table_dir):
    root, files = table_dir
    fs = s3_server.filesystem()
    remote = f"{s3_bucket}/scan"
    upload(fs, root, remote)
    with qdbpm.open_table(f"s3://{remote}", storage_options=s3_server.storage_options()) as table:
        assert table.partitions == [f"day={d:02d}" for d in range(DAYS)]
        for where, cols, batch_rows in cases()[:12]:
            want = duck(files, f"SELECT {', '.join(cols)} FROM FILES WHERE {where} ORDER BY rid")
            # a small budget: units of one or two row groups, fetched ahead across partitions
            scan = table.scan(where, cols, batch_rows=batch_rows, memory_budget=16_384)
            assert rows_of(scan.to_table()) == want, where
            assert rows_of(pa.Table.from_batches(list(scan.to_reader()), scan.schema)) == want, where
            assert scan.count() == len(want), where
            assert set(scan.row_groups()["path"].to_pylist()) <= {f"{remote}/day={d:02d}/data.parquet"
                                                                  for d in range(DAYS)}
    assert not scan_threads()


def test_to_dataset_hands_over_the_survivors(table_dir):
    root, _ = table_dir
    with qdbpm.open_table(root) as table:
        scan = table.scan("grp = 3 OR qty > 48", ["px"])
        rgs = scan.row_groups()
        ds = scan.to_dataset()
        got = {(os.path.basename(os.path.dirname(f.path)), g.id) for f in ds.get_fragments() for g in f.row_groups}
        assert got == set(zip(rgs["partition"].to_pylist(), rgs["row_group"].to_pylist()))
        assert ds.to_table(columns=["px"]).num_rows == sum(rgs["num_rows"].to_pylist())


def test_decoded_estimate_tracks_what_pyarrow_decodes(table_dir):
    """The budget charges decoded_bytes for decoding: per row group and column it stays within a
    small factor of the Arrow bytes pyarrow actually produces (ints, doubles, bools, strings)."""
    root, files = table_dir
    with qdbpm.open_table(root) as table:
        for name, path in zip(table.partitions, files):
            pm, pf = table.meta(name), pq.ParquetFile(path)
            for c, col in enumerate(pm.column_names):
                est = decoded_bytes(pm, range(pm.row_group_count), [c])
                for rg in range(pm.row_group_count):
                    real = pf.read_row_group(rg, columns=[col]).nbytes
                    assert real / 2 <= est[rg] <= 4 * real + 256, (name, col, rg, est[rg], real)
