"""Synthetic QuestDB table directories (tests/support/questdb_txn.py writes `_txn` and `_meta` as
QuestDB does): both slots, torn records, hostile bytes, every partitionBy and split partitions,
and tables mixing native and Parquet partitions."""

import datetime as dt
import json
import os
import random
import shutil
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.errors import PmError
from qdbpm.questdb import names as N
from qdbpm.questdb.meta import parse_meta
from qdbpm.questdb.txn import parse_txn, read_txn
from qdbpm.sync.generate import generate
from qdbpm.table.read import read_table
from qdbpm.table.table import open_table
from support.questdb_txn import PARQUET, READ_ONLY, entry, meta_bytes, txn_bytes

US_DAY = 86_400_000_000
TS0 = 1_704_067_200_000_000  # 2024-01-01


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


@pytest.mark.parametrize("version", [2, 7])  # slot A, slot B
def test_both_slots_read_back(tmp_path, version):
    entries = [entry(TS0, 10, 3, 1234, PARQUET), entry(TS0 + US_DAY, 20, -1, -1, READ_ONLY, squash=5)]
    data = txn_bytes(entries, version=version, transient=25, fixed=10, symbols=[(3, 4)])
    write(tmp_path / "_txn", data)
    for txn in (read_txn(tmp_path / "_txn"), parse_txn(data)):
        assert txn.version == txn.txn == version
        assert (txn.transient_row_count, txn.fixed_row_count, txn.symbols) == (25, 10, ((3, 4),))
        a, b = txn.partitions
        assert (a.timestamp, a.row_count, a.name_txn, a.parquet_size, a.parquet, a.read_only) == \
            (TS0, 10, 3, 1234, True, False)
        assert (b.row_count, b.name_txn, b.parquet, b.read_only, b.squash_count) == (20, -1, False, True, 5)


def test_a_record_being_rewritten_is_read_again_then_refused(tmp_path):
    path = tmp_path / "_txn"
    entries = [entry(TS0, 10)]
    write(path, txn_bytes(entries, version=4, record_txn=3))  # the record's txn lags the version
    with pytest.raises(qdbpm.StorageError, match="no consistent read"):
        read_txn(path, deadline=0.05)
    with pytest.raises(qdbpm.CorruptFileError, match="not a committed record"):
        parse_txn(path.read_bytes())
    # the writer finishes while the reader retries: the reader sees the finished record (the
    # file replaced whole: a truncate-then-write here would show the reader an empty _txn, which
    # QuestDB, writing in place, never does)
    def finish():
        write(str(path) + ".new", txn_bytes([entry(TS0, 11)], version=4))
        os.replace(str(path) + ".new", path)

    fixer = threading.Timer(0.05, finish)
    fixer.start()
    try:
        assert read_txn(path, deadline=30).partitions[0].row_count == 11
    finally:
        fixer.join()


@pytest.mark.parametrize("edit,match", [
    (lambda b: b[:20] + b"\1" + b[21:], "padding"),
    (lambda b: b[:16] + (33).to_bytes(4, "little") + b[20:], "multiple of 32"),
    (lambda b: b[:40], "shorter than"),
    (lambda b: b[:200], "runs past the end"),
])
def test_malformed_txn_is_a_clear_error(tmp_path, edit, match):
    data = edit(txn_bytes([entry(TS0, 10), entry(TS0 + US_DAY, 5)], version=2))
    write(tmp_path / "_txn", data)
    with pytest.raises(qdbpm.CorruptFileError, match=match):
        read_txn(tmp_path / "_txn")


def test_unknown_table_versions_are_refused():
    with pytest.raises(qdbpm.UnsupportedFeatureError, match="table version 425"):
        parse_meta(meta_bytes([("ts", 8)], 0, 0, table_version=425))


def test_hostile_txn_and_meta_bytes_raise_qdbpm_errors_only():
    rnd = random.Random(18)
    seeds = [txn_bytes([entry(TS0 + k * US_DAY, k + 1, k - 1, 100 + k, PARQUET if k % 2 else 0)
                        for k in range(4)], version=v, symbols=[(1, 2)] * (v % 3)) for v in (2, 3, 8)]
    metas = [meta_bytes([("ts", 8), ("x", 6), ("é", 11)], pb, 0) for pb in range(6)]
    outcomes = {"ok": 0, "error": 0}
    for k in range(3000):
        seed = bytearray(rnd.choice(seeds if k % 2 else metas))
        for _ in range(rnd.randint(1, 6)):
            kind = rnd.random()
            if kind < 0.6 and seed:
                seed[rnd.randrange(len(seed))] = rnd.randrange(256)
            elif kind < 0.8:
                seed = seed[: rnd.randrange(len(seed) + 1)]
            else:
                at = rnd.randrange(len(seed) + 1)
                seed[at:at] = rnd.randbytes(rnd.randint(1, 9))
        try:
            (parse_txn if k % 2 else parse_meta)(bytes(seed))
            outcomes["ok"] += 1
        except PmError:
            outcomes["error"] += 1
    assert min(outcomes.values()) > 100, outcomes


# --- partition names ---------------------------------------------------------------------------


def reference_name(ts_us, pb):
    """An independent formatter: numpy's ISO string of the period start."""
    d = np.datetime64(ts_us, "us")
    iso = str(d)
    return {N.DAY: iso[:10], N.MONTH: iso[:7], N.YEAR: iso[:4], N.HOUR: iso[:13]}[pb]


@pytest.mark.parametrize("pb", [N.DAY, N.MONTH, N.YEAR, N.HOUR, N.WEEK])
def test_names_of_period_starts(pb):
    rnd = random.Random(pb)
    for _ in range(300):
        ts = rnd.randrange(-(10 ** 17) // 10, 4 * 10 ** 15)  # 1653 .. 2096
        start = N.partition_floor(ts, pb)
        assert start <= ts < N.partition_ceil(ts, pb)
        name = N.partition_name(start, pb)
        if pb == N.WEEK:
            y, w, _ = (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=start)).isocalendar()
            assert name == f"{y:04d}-W{w:02d}" and dt.datetime.fromisoformat(str(np.datetime64(start, "us"))).weekday() == 0
        else:
            assert name == reference_name(start, pb)
        assert N.partition_name(start, pb, 7) == name + ".7"
        ns = N.partition_floor(ts * 1000, pb, "ns")
        assert ns == start * 1000 and N.partition_name(ns, pb, -1, "ns") == name


def test_split_partition_names():
    ts = int((np.datetime64("2023-02-05T20:59:59.880001") - np.datetime64("1970-01-01")) // np.timedelta64(1, "us"))
    assert N.partition_name(ts, N.DAY) == "2023-02-05T205959-880001"
    assert N.partition_name(ts * 1000 + 7, N.DAY, 2, "ns") == "2023-02-05T205959-880001007.2"
    assert N.partition_name(ts - ts % 3_600_000_000, N.DAY) == "2023-02-05T20"  # on the hour
    assert N.partition_name(ts - ts % 1_000_000, N.MONTH) == "2023-02-05T205959"
    assert N.partition_name(0, N.NONE, 3) == "default.3"


# --- tables mixing native and Parquet partitions ------------------------------------------------


def build_table(root, kinds, partition_by=N.DAY):
    """A QuestDB table of one partition per day of `kinds` ('p': Parquet, 'n': native), 100 rows
    each (ts, x); Parquet partitions get data.parquet + _pm; returns the rows pyarrow reads."""
    entries, tables = [], []
    for k, kind in enumerate(kinds):
        ts0 = TS0 + k * US_DAY
        name = N.partition_name(ts0, partition_by, k)
        d = os.path.join(root, name)
        os.makedirs(d)
        t = pa.table({"ts": pa.array(ts0 + np.arange(100, dtype=np.int64) * 600_000_000, pa.timestamp("us")),
                      "x": pa.array(np.arange(100) + 1000 * k, pa.int64())})
        if kind == "p":
            pq.write_table(t, os.path.join(d, "data.parquet"), row_group_size=25)
            generate(os.path.join(d, "data.parquet"))
            entries.append(entry(ts0, 100, k, os.path.getsize(os.path.join(d, "data.parquet")), PARQUET))
            tables.append(t)
        else:
            write(os.path.join(d, "ts.d"), b"\0" * 800)  # native column files: never read
            entries.append(entry(ts0, 100, k))
    write(os.path.join(root, "_txn"), txn_bytes(entries, version=6, transient=100, fixed=100 * (len(kinds) - 1),
                                               min_ts=TS0, max_ts=TS0 + (len(kinds) - 1) * US_DAY + 99 * 600_000_000))
    write(os.path.join(root, "_meta"), meta_bytes([("ts", 8), ("x", 6)], partition_by, 0))
    return pa.concat_tables(tables)


def test_native_partitions_are_refused_skipped_or_pruned_away(tmp_path):
    root = str(tmp_path)
    everything = build_table(root, "pnp")
    native = N.partition_name(TS0 + US_DAY, N.DAY, 1)
    with open_table(root) as t:
        assert t.partitions == [N.partition_name(TS0, N.DAY, 0), N.partition_name(TS0 + 2 * US_DAY, N.DAY, 2)]
        assert [p.name for p in t.questdb.native] == [native]
    for where in (None, "x > 5", f"ts >= '2024-01-02T10:00:00'"):
        with pytest.raises(PmError, match=native):
            read_table(root, None, where)
    got = read_table(root, None, "x > 5", native="skip")
    assert got.num_rows == sum(1 for v in everything.column("x").to_pylist() if v > 5)
    assert json.loads(got.schema.metadata[b"qdbpm.skipped_native"]) == [native]
    # a time range outside the native partition needs none of its rows: no error, nothing skipped
    day1 = read_table(root, None, "ts < '2024-01-02'")
    assert day1.num_rows == 100 and b"qdbpm.skipped_native" not in (day1.schema.metadata or {})
    with open_table(root, native="skip") as t:
        res = t.prune("ts > '2024-01-02T23:00:00'")
        assert json.loads(res.schema.metadata[b"qdbpm.skipped_native"]) == [native]
        assert set(res.column("partition").to_pylist()) == {t.partitions[1]}


@pytest.mark.parametrize("pb", [N.DAY, N.HOUR, N.WEEK, N.MONTH, N.YEAR])
def test_every_partition_by_reads_its_parquet_partitions(tmp_path, pb):
    root = str(tmp_path)
    # day-spaced partitions fall in distinct periods only for DAY and HOUR: the others get split
    # partition names (off their period's start), as QuestDB names out-of-order splits
    want = build_table(root, "ppp", pb)
    got = read_table(root)
    assert got.equals(want.replace_schema_metadata(got.schema.metadata))
    with open_table(root) as t:
        assert len(t.partitions) == 3 and all(os.path.isdir(os.path.join(root, p)) for p in t.partitions)


# --- a partition version purged while it is read -----------------------------------------------


def replace_partition(root, k, version, kinds="ppp"):
    """What QuestDB does when it rewrites partition k: a new directory (name txn `version`) with
    the new rows, `_txn` committing it, the old directory purged. Returns the table's rows now."""
    qt = qdbpm.open_table(root).questdb
    entries, tables = [], []
    for i, p in enumerate(qt.partitions):
        d = os.path.join(root, p.name)
        if i == k:
            new = os.path.join(root, N.partition_name(p.timestamp, N.DAY, version))
            os.makedirs(new)
            t = pq.read_table(os.path.join(d, "data.parquet"))
            t = t.set_column(1, "x", pa.array(np.asarray(t.column("x")) + 1_000_000 * version, pa.int64()))
            pq.write_table(t, os.path.join(new, "data.parquet"), row_group_size=25)
            generate(os.path.join(new, "data.parquet"))
            shutil.rmtree(d)
            d = new
        entries.append(entry(p.timestamp, 100, int(os.path.basename(d).rpartition(".")[2]),
                             os.path.getsize(os.path.join(d, "data.parquet")), PARQUET))
        tables.append(pq.read_table(os.path.join(d, "data.parquet")))
    write(os.path.join(root, "_txn"), txn_bytes(entries, version=8 + 2 * version, transient=100, fixed=200,
                                               min_ts=TS0, max_ts=TS0 + 2 * US_DAY + 99 * 600_000_000))
    return pa.concat_tables(tables)


def test_read_table_reads_again_when_a_partition_is_purged_mid_read(tmp_path, monkeypatch):
    """QuestDB replaces partition 1 after read_table opened the table and before it read the rows:
    the old directory is gone, `_txn` names the new one. read_table reads `_txn` again and returns
    the new rows, never a mix."""
    import qdbpm.table.read as R

    root = str(tmp_path)
    old = build_table(root, "ppp")
    real, opened, state = R.open_table, [], {}

    def open_then_purge(*a, **kw):
        t = real(*a, **kw)
        opened.append(t.partitions)
        if len(opened) == 1:
            state["want"] = replace_partition(root, 1, 5)
        return t

    monkeypatch.setattr(R, "open_table", open_then_purge)
    got = read_table(root)
    assert len(opened) == 2 and opened[0] != opened[1]
    assert got.equals(state["want"].replace_schema_metadata(got.schema.metadata))
    assert not got.equals(old.replace_schema_metadata(got.schema.metadata))


def test_purged_at_every_read_is_a_storage_error_after_the_retries(tmp_path, monkeypatch):
    import qdbpm.table.read as R

    root = str(tmp_path)
    build_table(root, "ppp")
    real, n = R.open_table, [0]

    def open_then_purge(*a, **kw):
        t = real(*a, **kw)
        n[0] += 1
        replace_partition(root, 2, 10 + n[0])
        return t

    monkeypatch.setattr(R, "open_table", open_then_purge)
    with pytest.raises(qdbpm.StorageError, match=f"vanished during {R.RETRIES} reads"):
        read_table(root)
    assert n[0] == R.RETRIES


def test_an_open_tables_scan_names_the_purged_file(tmp_path):
    """An open Table is one `_txn` snapshot: a partition purged under it is a VanishedError (also a
    FileNotFoundError) naming the file, in to_table, count and mid-stream, after the batches
    already read (never rows of the new version)."""
    root = str(tmp_path)
    old = build_table(root, "ppp")
    with open_table(root) as t:
        gone = os.path.join(root, t.partitions[1], "data.parquet")
        # a budget of one byte admits one row group at a time: partition 1 is not fetched yet
        reader = t.scan(batch_rows=25, memory_budget=1).to_reader()
        first = reader.read_next_batch()
        assert first.to_pylist() == old.slice(0, 25).to_pylist()
        replace_partition(root, 1, 3)
        with pytest.raises(qdbpm.VanishedError, match=gone) as e:
            for b in reader:
                assert b.column("x").to_pylist()[0] < 1_000_000  # old rows only
        assert isinstance(e.value, FileNotFoundError)
        for fn in (lambda: t.scan().to_table(), lambda: t.scan("x > 1050").count()):
            with pytest.raises(qdbpm.VanishedError, match=gone):
                fn()
