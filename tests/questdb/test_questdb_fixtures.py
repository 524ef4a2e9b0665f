"""QuestDB's own table directories (tests/data/questdb, written by QuestDB 9.4.x): `_txn`, `_meta` and
partition names read as QuestDB reads them, and the Parquet tables read through open_table /
read_table as their `_txn` commits them."""

import os
import shutil
import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.questdb.meta import parse_meta
from qdbpm.questdb.names import partition_name
from qdbpm.questdb.table_dir import read_table_dir
from qdbpm.questdb.txn import read_txn
from qdbpm.table.read import read_table
from qdbpm.table.table import open_table

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "questdb")
BROKEN = "t_col_top_день_missing_parts"  # deliberately broken by QuestDB's tests: partitions deleted


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("questdb"))
    for z in ("data_426", "legacy_bool~11", "legacy_all~18"):
        with zipfile.ZipFile(os.path.join(DATA, f"{z}.zip")) as f:
            f.extractall(os.path.join(root, z))
    return root


def tables(fixtures, zip_name):
    base = os.path.join(fixtures, zip_name)
    found = sorted(os.path.dirname(os.path.join(d, "_txn")) for d, _, files in os.walk(base) if "_txn" in files)
    assert found, zip_name
    return found


def test_every_partition_directory_name_of_data_426_comes_from_its_txn(fixtures):
    checked = 0
    for t in tables(fixtures, "data_426"):
        qt = read_table_dir(t)
        names = [p.name for p in qt.partitions]
        on_disk = {d for d in os.listdir(t) if os.path.isdir(os.path.join(t, d)) and d[0].isdigit()}
        if os.path.basename(t) == BROKEN:
            assert not set(names) <= on_disk  # its partitions were deleted on purpose
            continue
        if qt.meta.partition_by_name == "NONE":
            assert names == ["default"] and qt.partitions[0].row_count == qt.txn.transient_row_count
            continue
        assert set(names) <= on_disk, (t, sorted(set(names) - on_disk))
        # every committed directory named, and only those: the rest are stale versions
        for d in on_disk - set(names):
            base, _, suffix = d.partition(".")
            live = [n for n in names if n.partition(".")[0] == base]
            assert live, (t, d)
        checked += 1
        # row counts: the last partition's from the transient count
        assert qt.partitions[-1].row_count == qt.txn.transient_row_count
        assert sum(p.row_count for p in qt.partitions[:-1]) == qt.txn.fixed_row_count
    assert checked >= 10


def test_txn_fixtures_with_slot_b_current():
    for name, suffix in (("sys.acl_entities~1", ".5"), ("sys.acl_passwords~5", ".7")):
        txn = read_txn(os.path.join(DATA, "txn", name, "_txn"))
        assert txn.version % 2 == 1  # slot B
        names = [partition_name(p.timestamp, 1, p.name_txn) for p in txn.partitions]
        assert names == ["2025-02", f"2025-03{suffix}"]


@pytest.mark.parametrize("name", ["legacy_bool~11", "legacy_all~18"])
def test_a_questdb_parquet_table_opens_as_its_txn_commits_it(fixtures, name):
    root = tables(fixtures, name)[0]
    qt = read_table_dir(root)
    with open(os.path.join(root, "_meta"), "rb") as f:
        meta = parse_meta(f.read())
    with open_table(root) as t:
        assert t.questdb is not None and t.partitions == [p.name for p in qt.partitions]
        for p in qt.partitions:
            parquet = os.path.join(root, p.name, "data.parquet")
            assert p.parquet and p.parquet_size == os.path.getsize(parquet)
            md = pq.read_metadata(parquet)
            assert md.num_rows == p.row_count
            pm = t.meta(p.name)
            assert pm.parquet_size == p.parquet_size  # pinned to the committed size
            assert pm.column_names[pm.designated_timestamp] == meta.timestamp_name
    want = pa.concat_tables([pq.read_table(os.path.join(root, p.name, "data.parquet")) for p in qt.partitions])
    got = read_table(root)
    assert got.equals(want.replace_schema_metadata(got.schema.metadata))


def test_stale_and_in_flight_directories_and_a_dead_tail_are_never_read(fixtures, tmp_path):
    src = tables(fixtures, "legacy_bool~11")[0]
    root = str(tmp_path / "t")
    shutil.copytree(src, root)
    want = read_table(root)
    qt = read_table_dir(root)
    first = qt.partitions[0].name  # 2024-01-01.4
    base, _, n = first.partition(".")
    for other in (f"{base}.{int(n) - 1}", f"{base}.{int(n) + 3}", base):  # stale, in flight, unsuffixed
        shutil.copytree(os.path.join(root, first), os.path.join(root, other))
        pq.write_table(pa.table({"ts": pa.array([0], pa.timestamp("us")), "b": [True]}),
                       os.path.join(root, other, "data.parquet"))
    with open(os.path.join(root, first, "data.parquet"), "ab") as f:
        f.write(b"\0dead tail of a failed in-place update" * 100)
    with open_table(root) as t:
        assert t.partitions == [p.name for p in qt.partitions]
    got = read_table(root)
    assert got.equals(want)
    # layout="directories" reads every directory holding a _pm instead, stale ones included
    with open_table(root, layout="directories") as t:
        assert len(t.partitions) == 5


def test_a_committed_partition_that_vanished_is_a_storage_error(fixtures, tmp_path):
    root = str(tmp_path / "t")
    shutil.copytree(tables(fixtures, "legacy_bool~11")[0], root)
    shutil.rmtree(os.path.join(root, read_table_dir(root).partitions[1].name))
    with pytest.raises(qdbpm.StorageError, match="vanished"):
        open_table(root)


PREDICATES = ["n_byte = 0", "c_byte = 0", "n_short = 0", "n_char = 0", "c_bool = true", "n_bool = false",
              "n_int IS NULL", "n_int IS NOT NULL", "c_int > 0", "n_long < 0", "n_string IS NULL",
              "c_symbol IS NOT NULL", "n_symbol IS NULL", "ts > '2024-01-01T00:00:00.000100'"]


@pytest.mark.parametrize("where", PREDICATES)
def test_questdb_written_columns_prune_and_read_like_pyarrow(fixtures, where):
    """QuestDB records REQUIRED columns as OPTIONAL and counts the zeros of BYTE / SHORT / CHAR as
    nulls: neither may drop a matching row group or turn a value into a null. Brute force: pyarrow
    reads every row group and filters it (DuckDB answers differently here: it trusts those null
    counts and reads the zeros as NULL; qdbpm's values are pyarrow's)."""
    import pyarrow.dataset as ds

    from qdbpm.prune.arrow import to_arrow

    root = tables(fixtures, "legacy_all~18")[0]
    parquet = os.path.join(root, read_table_dir(root).partitions[0].name, "data.parquet")
    data = pq.read_table(parquet)
    flt = to_arrow(qdbpm.parse(where), data.schema)
    want = ds.dataset(data).to_table(filter=flt)
    got = read_table(root, None, where)
    assert got.equals(want.replace_schema_metadata(got.schema.metadata)), where
    with open_table(root) as t:
        assert t.scan(where).count() == want.num_rows
        kept = set(t.prune(where).column("row_group").to_pylist())
    f = pq.ParquetFile(parquet)
    for rg in range(f.num_row_groups):  # a row group holding a match is never pruned
        if ds.dataset(f.read_row_group(rg)).count_rows(filter=flt):
            assert rg in kept, (where, rg)
