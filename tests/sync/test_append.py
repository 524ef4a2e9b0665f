"""qdbpm.append / qdbpm.recover: rows appended to a Parquet file in place as new row groups (after
the old footer, then a new footer), `_pm` updated, every snapshot readable; crashes at every
write / fsync boundary leave a state `recover` brings back to the last committed one.
"""

import io
import json
import os

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import col
from qdbpm.pm import layout as L
from qdbpm.bloom.sbbf import SplitBlockBloomFilter
from qdbpm.errors import PmError
from qdbpm.pm.fileops import FileOps

from conftest import read_bytes as file_bytes
from support.generate_checks import check_pm
from support.parquet_oracle import footer_meta
from support.questdb_files import QDB_COLUMNS, questdb_file


def part(lo, n):
    return pa.table({
        "a": pa.array(np.arange(lo, lo + n), pa.int64()),
        "s": pa.array([f"v{i}" if i % 10 else None for i in range(lo, lo + n)], pa.string()),
        "d": pa.array(np.arange(lo, lo + n) * 0.5),
        "ts": pa.array(np.arange(lo, lo + n) * 1_000_000, pa.timestamp("us", "UTC")),
        "l": pa.array([[i, i + 1] if i % 3 else None for i in range(lo, lo + n)], pa.list_(pa.int32())),
        "st": pa.array([{"x": i, "y": str(i)} for i in range(lo, lo + n)],
                       pa.struct([("x", pa.int32()), ("y", pa.string())])),
    })


def start(tmp_path, first=part(0, 300), **kw):
    path = str(tmp_path / "data.parquet")
    kw.setdefault("row_group_size", 100)
    pq.write_table(first, path, **kw)
    return path, str(tmp_path / "_pm")


def check_all_snapshots(pm, path, tables):
    """Every snapshot: the `_pm` agrees with the file's prefix of that size (chunks, stats,
    blooms) and pyarrow reads that prefix as the rows appended up to then."""
    data = file_bytes(path)
    with qdbpm.open(pm) as m:
        snaps = m.snapshots()
    assert len(snaps) == len(tables)
    for k, size in enumerate(reversed(snaps)):
        with qdbpm.open(pm, parquet_size=size, verify=True) as m:
            assert m.parquet_size == size
        check_pm(pm, path, parquet_size=size)
        got = pq.read_table(io.BytesIO(data[:size]))
        assert got.equals(pa.concat_tables(tables[: k + 1])), k
    check_pm(pm, path)  # the latest against pyarrow's view as well


def test_append_round_trip(tmp_path):
    path, pm = start(tmp_path, compression="zstd", write_page_index=True, sorting_columns=[pq.SortingColumn(0)])
    qdbpm.generate(path, pm)
    tables = [part(0, 300)]
    sizes = []
    for lo, n, rgs in ((300, 50, None), (350, 250, 100), (600, 1, None)):
        old_size = os.path.getsize(path)
        old_bytes = file_bytes(path)
        t = part(lo, n)
        size = qdbpm.append(path, t, pm, row_group_size=rgs)
        tables.append(t)
        assert size == os.path.getsize(pm)
        sizes.append(size)
        # In place: the old bytes untouched, new chunks start right at the old end of file.
        assert file_bytes(path)[:old_size] == old_bytes
        with qdbpm.open(pm) as m:
            new_rows = m.chunks[m.row_group_count - (-(-n // rgs) if rgs else 1):]
            assert int(new_rows["byte_range_start"].min()) == old_size
            assert (m.chunks["codec"] == L.CODEC_ZSTD).all()
            assert m.sorting_columns == [(0, False)]
        assert pq.read_table(path).equals(pa.concat_tables(tables))
    check_all_snapshots(pm, path, tables)
    with qdbpm.open(pm) as m:
        assert m.row_group_count == 3 + 1 + 3 + 1
        assert m.num_rows.tolist() == [100, 100, 100, 50, 100, 100, 50, 1]
    assert sizes == sorted(sizes)


def test_append_without_a_pm_generates_one_first(tmp_path):
    path, pm = start(tmp_path)
    size0 = os.path.getsize(path)
    assert not os.path.exists(pm)
    qdbpm.append(path, part(300, 20))
    with qdbpm.open(pm) as m:
        assert m.snapshots() == [os.path.getsize(path), size0]
    check_all_snapshots(pm, path, [part(0, 300), part(300, 20)])


def test_pinned_reader_keeps_its_snapshot_across_an_append(tmp_path):
    path, pm = start(tmp_path)
    qdbpm.generate(path, pm)
    with qdbpm.open(pm) as old:
        before = old.byte_ranges()
        size = old.parquet_size
        qdbpm.append(path, part(300, 100), pm)
        # The old mapping still shows the old snapshot, and its ranges still hold the same bytes.
        assert old.row_group_count == 3 and old.byte_ranges() == before
        data = file_bytes(path)
        assert pq.read_table(io.BytesIO(data[:size])).equals(part(0, 300))
    with qdbpm.open(pm, parquet_size=size) as again:
        assert again.byte_ranges() == before


@pytest.mark.parametrize("table, message", [
    (part(0, 5).drop_columns(["d"]), r"missing columns \['d'\]"),
    (part(0, 5).append_column("extra", pa.array(range(5))), r"columns not in the file \['extra'\]"),
    (part(0, 5).select(["s", "a", "d", "ts", "l", "st"]), "in order"),
    (part(0, 5).set_column(0, "a", pa.array(range(5), pa.int32())), "column 'a' is int32 in the table, int64"),
    (part(0, 5).set_column(3, "ts", pa.array(range(5), pa.timestamp("ms", "UTC"))), "column 'ts'"),
    (pa.table({"a": [1]}), "missing columns"),
])
def test_schema_mismatch_is_refused_and_changes_nothing(tmp_path, table, message):
    path, pm = start(tmp_path)
    qdbpm.generate(path, pm)
    before = file_bytes(path), file_bytes(pm)
    with pytest.raises(PmError, match=message):
        qdbpm.append(path, table, pm)
    assert (file_bytes(path), file_bytes(pm)) == before


def test_nulls_into_a_required_column_are_refused(tmp_path):
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), ("b", pa.string())])
    path, pm = start(tmp_path, pa.table({"a": [1, 2], "b": ["x", None]}, schema=schema))
    with pytest.raises(PmError, match="'a' has 1 nulls but is not nullable"):
        qdbpm.append(path, pa.table({"a": [3, None], "b": ["y", "z"]}), pm)
    qdbpm.append(path, pa.table({"a": [3, 4], "b": ["y", None]}), pm)  # nullable table, no nulls: fine
    assert pq.read_table(path).column("a").to_pylist() == [1, 2, 3, 4]


def test_a_file_pyarrow_lays_out_differently_is_refused(tmp_path):
    """An INT96 timestamp (Spark's old encoding): pyarrow writes INT64 for the same Arrow type."""
    path, pm = start(tmp_path, pa.table({"t": pa.array([1, 2], pa.timestamp("ns"))}),
                     use_deprecated_int96_timestamps=True)
    with pytest.raises(PmError, match=r"schema element 1 \('t'\): the physical type is 3 in the file, 2"):
        qdbpm.append(path, pq.read_table(path), pm)


def test_empty_table_appends_nothing(tmp_path):
    path, pm = start(tmp_path)
    size = qdbpm.generate(path, pm)
    before = file_bytes(path)
    assert qdbpm.append(path, part(0, 0), pm) == size
    assert file_bytes(path) == before


def test_not_a_table(tmp_path):
    path, pm = start(tmp_path)
    with pytest.raises(PmError, match="pyarrow.Table"):
        qdbpm.append(path, {"a": [1]}, pm)


# --- UNUSED_BYTES ---------------------------------------------------------------------------------


def test_external_file_unused_bytes_by_hand(tmp_path):
    path, pm = start(tmp_path)
    qdbpm.generate(path, pm)
    expect = 0
    for k in range(3):
        _, f_len, _ = footer_meta(file_bytes(path))
        expect += f_len + 8  # the old footer, its u32 length and PAR1 are dead now
        qdbpm.append(path, part(1000 * k, 10), pm)
        with qdbpm.open(pm) as m:
            assert m.unused_bytes == expect


def test_questdb_file_json_unused_bytes_and_schema_survive(tmp_path):
    path, table = questdb_file(str(tmp_path / "data.parquet"), n=300, unused=4096)
    pm = str(tmp_path / "_pm")
    qdbpm.generate(path, pm)
    _, f_len, _ = footer_meta(file_bytes(path))
    more = pq.read_table(path).slice(0, 50)  # same Arrow types as the file reads back
    ts = more.column("ts")
    later = pa.array(ts.cast(pa.int64()).to_numpy() + 10 ** 9).cast(ts.type)
    more = more.set_column(0, more.schema.field(0), later)  # in timestamp order, after the file
    qdbpm.append(path, more, pm)
    md = pq.ParquetFile(path).metadata
    doc = json.loads(md.metadata[b"questdb"])
    assert doc["unused_bytes"] == 4096 + f_len + 8
    assert [c["column_type"] for c in doc["schema"]] == [c[1] for c in QDB_COLUMNS]
    assert b"ARROW:schema" not in md.metadata
    with qdbpm.open(pm) as m:
        assert m.unused_bytes == 4096 + f_len + 8
        assert m.designated_timestamp == 0 and m.feature_flags & L.FEATURE_SORTING_IS_DTS_ASC
        assert m.columns["type"].tolist() == [c[1] for c in QDB_COLUMNS]
        assert m.row_group_count == 4 and len(m.snapshots()) == 2
    check_pm(pm, path)
    assert pq.read_table(path).num_rows == 350


# --- order -------------------------------------------------------------------------------------------


def test_declared_order_is_kept_and_enforced(tmp_path):
    path, pm = start(tmp_path, sorting_columns=[pq.SortingColumn(0)])
    qdbpm.generate(path, pm)
    before = file_bytes(path), file_bytes(pm)
    shuffled = part(300, 20).take(pa.array([5, 1, 0] + list(range(2, 5)) + list(range(6, 20))))
    with pytest.raises(PmError, match="sorted by a and the table's rows are not"):
        qdbpm.append(path, shuffled, pm)
    assert (file_bytes(path), file_bytes(pm)) == before
    # 'a' is no designated timestamp (int64): a sorting column orders rows within each row group,
    # so rows starting below the file's last value are fine.
    qdbpm.append(path, part(100, 20), pm)
    md = pq.ParquetFile(path).metadata
    assert [(c.column_index, c.descending) for c in md.row_group(3).sorting_columns] == [(0, False)]
    qdbpm.generate(path, str(tmp_path / "_pm2"))  # from scratch: every row group still agrees
    with qdbpm.open(str(tmp_path / "_pm2")) as m:
        assert m.sorting_columns == [(0, False)]


def test_designated_timestamp_order_across_the_append(tmp_path):
    t = part(0, 300).select(["ts", "a"])
    schema = pa.schema([pa.field("ts", pa.timestamp("us", "UTC"), nullable=False), ("a", pa.int64())])
    path, pm = start(tmp_path, t.cast(schema), sorting_columns=[pq.SortingColumn(0)])
    qdbpm.generate(path, pm)
    with qdbpm.open(pm) as m:
        assert m.designated_timestamp == 0
    before = file_bytes(path)
    with pytest.raises(PmError, match="out-of-order rows need a rewrite"):
        qdbpm.append(path, part(250, 100).select(["ts", "a"]).cast(schema), pm)
    assert file_bytes(path) == before
    qdbpm.append(path, part(299, 100).select(["ts", "a"]).cast(schema), pm)  # equal to the end: fine
    with qdbpm.open(pm) as m:
        assert m.row_group_count == 4 and m.timestamp_find(398 * 1_000_000) == 8


# --- bloom filters in appended row groups ------------------------------------------------------------


def test_appended_row_groups_get_filters(tmp_path):
    path, pm = start(tmp_path, bloom_filter_options={"a": {"ndv": 100}})
    qdbpm.generate(path, pm, bloom_columns=["s"])
    qdbpm.append(path, part(5000, 100), pm)
    check_pm(pm, path)  # 'a': the file's own filter (pyarrow wrote one for the new row group too)
    md = pq.ParquetFile(path).metadata
    assert md.row_group(3).column(0).bloom_filter_offset is not None
    assert md.row_group(3).column(0).bloom_filter_length < 4096  # sized for the rows, not 1 MiB
    with qdbpm.open(pm) as m:
        assert [m.column_names[int(b)] for b in m.bloom_columns] == ["a", "s"]
        assert SplitBlockBloomFilter.from_bytes(m.bloom_filter(3, "a")).contains(np.arange(5000, 5100)).all()
        s_values = [v for v in part(5000, 100).column("s").to_pylist() if v is not None]
        assert SplitBlockBloomFilter.from_bytes(m.bloom_filter(3, "s")).contains(s_values).all()
        assert m.prune(col("a") == 5050).tolist() == [False, False, False, True]
        assert m.prune(col("s") == "v5051").tolist() == [False, False, False, True]


def test_external_mode_survives_append(tmp_path):
    path, pm = start(tmp_path, bloom_filter_options={"a": {"ndv": 100}})
    qdbpm.generate(path, pm, bloom="external")
    qdbpm.append(path, part(5000, 100), pm)
    check_pm(pm, path, bloom="external")
    with qdbpm.open(pm) as m:
        assert m.feature_flags & L.FEATURE_BLOOM_FILTERS_EXTERNAL
        off, n = m.bloom_ref(3, "a")
        assert off > os.path.getsize(path) - 10_000
        assert m.prune(col("a") == 5050).tolist() == [False, False, False, True]


# --- other writers ----------------------------------------------------------------------------------


def test_append_to_a_duckdb_file(tmp_path):
    """DuckDB annotates differently (converted types, version 1 footer): same layout, accepted."""
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    duckdb.connect().execute(f"""copy (select i::bigint as a, (i % 200)::utinyint as u8, (i % 40000)::uinteger as u32,
        'v' || (i % 13) as s, (i / 7)::decimal(9, 3) as dec, timestamp '2024-01-01' + to_seconds(i) as ts,
        make_timestamp_ns(i * 1000) as tsns, [i, i + 1] as lst, {{'x': i}} as st
        from range(0, 3000) t(i)) to '{path}' (format parquet, row_group_size 1000, compression 'zstd')""")
    first = pq.read_table(path)
    qdbpm.generate(path, pm)
    more = first.slice(100, 700)
    qdbpm.append(path, more, pm)
    assert pq.read_table(path).equals(pa.concat_tables([first, more]))
    # The file's own schema is kept: DuckDB's root name and annotations.
    assert pq.ParquetFile(path).metadata.schema.to_arrow_schema() == pq.ParquetFile(path).schema_arrow
    check_all_snapshots(pm, path, [first, more])
    got = duckdb.connect().execute(f"select count(*), sum(a) from '{path}'").fetchone()
    assert got == (3700, sum(range(3000)) + sum(range(100, 800)))


# --- crashes and recover ---------------------------------------------------------------------------------


class Crash(Exception):
    pass


class CrashOps(FileOps):
    """Counts write / truncate / fsync / rename boundaries; at boundary `at` a write lands half
    its bytes (when more than 8: an 8-byte size patch is atomic) and the process "dies"."""

    def __init__(self, at=None):
        self.at, self.n, self.log = at, 0, []

    def _boundary(self, what):
        self.log.append(what)
        self.n += 1
        return self.n - 1 == self.at

    def pwrite(self, fd, data, offset):
        if self._boundary(("pwrite", os.readlink(f"/proc/self/fd/{fd}"), offset, len(data))):
            if len(data) > 8:
                super().pwrite(fd, bytes(data)[: len(data) // 2], offset)
            raise Crash
        super().pwrite(fd, data, offset)

    def fsync(self, fd):
        if self._boundary(("fsync",)):
            raise Crash
        super().fsync(fd)

    def truncate(self, fd, size):
        if self._boundary(("truncate", size)):
            raise Crash
        super().truncate(fd, size)

    def replace(self, src, dst):
        if self._boundary(("replace", dst)):
            raise Crash
        super().replace(src, dst)


def test_every_crash_point_recovers(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    path0, pm0 = start(base)
    qdbpm.generate(path0, pm0)
    probe = CrashOps()
    work = tmp_path / "probe"
    work.mkdir()
    for name in ("data.parquet", "_pm"):
        (work / name).write_bytes((base / name).read_bytes())
    qdbpm.append(str(work / "data.parquet"), part(300, 40), str(work / "_pm"), ops=probe)
    kinds = [e[0] for e in probe.log]
    assert probe.n >= 5 and kinds.count("fsync") >= 3, probe.log
    old, new = part(0, 300), pa.concat_tables([part(0, 300), part(300, 40)])
    outcomes = set()
    for at in range(probe.n):
        d = tmp_path / f"crash{at}"
        d.mkdir()
        for name in ("data.parquet", "_pm"):
            (d / name).write_bytes((base / name).read_bytes())
        path, pm = str(d / "data.parquet"), str(d / "_pm")
        with pytest.raises(Crash):
            qdbpm.append(path, part(300, 40), pm, ops=CrashOps(at))
        # After the crash: the committed _pm names one snapshot; recover cuts the file back to it.
        size = qdbpm.recover(path, pm)
        assert os.path.getsize(path) == size
        with qdbpm.open(pm) as m:
            assert m.parquet_size == size
            committed = m.row_group_count
        got = pq.read_table(path)
        assert got.equals(old if committed == 3 else new), (at, probe.log[at])
        outcomes.add(committed)
        check_pm(pm, path)
        # And the next append works from there.
        qdbpm.append(path, part(1000, 10), pm)
        want = pa.concat_tables([old if committed == 3 else new, part(1000, 10)])
        assert pq.read_table(path).equals(want)
        with qdbpm.open(pm) as m:
            for s in m.snapshots():
                with qdbpm.open(pm, parquet_size=s):
                    pass
    assert outcomes == {3, 4}  # crashes before the publish roll back, the last ones keep the append


def test_recover_without_crash_debris_is_a_no_op(tmp_path):
    path, pm = start(tmp_path)
    size = os.path.getsize(path)
    assert qdbpm.recover(path, pm) == size  # no _pm: nothing to go by
    qdbpm.generate(path, pm)
    ops = CrashOps()
    assert qdbpm.recover(path, pm, ops=ops) == size and ops.n == 0


def test_recover_truncates_an_uncommitted_tail(tmp_path):
    path, pm = start(tmp_path)
    qdbpm.generate(path, pm)
    before = file_bytes(path)
    with open(path, "ab") as f:
        f.write(b"half an append" * 100)
    assert qdbpm.recover(path, pm) == len(before)
    assert file_bytes(path) == before


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:-100], "shorter than"),
    (lambda b: b[:-1] + b"X" + b"tail", "not the footer length"),
])
def test_recover_refuses_a_file_the_pm_does_not_describe(tmp_path, damage, message):
    path, pm = start(tmp_path)
    qdbpm.generate(path, pm)
    damaged = damage(file_bytes(path))
    with open(path, "wb") as f:
        f.write(damaged)
    with pytest.raises(PmError, match=message):
        qdbpm.recover(path, pm)
    with pytest.raises(PmError, match=message):
        qdbpm.append(path, part(300, 5), pm)
    assert file_bytes(path) == damaged
