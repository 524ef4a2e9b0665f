"""qdbpm.append and qdbpm.update on data.parquet files QuestDB wrote, beside QuestDB's own `_pm`:
the rows read back (pyarrow), the `_pm` gains a snapshot chained to QuestDB's, whose own snapshot
still opens pinned to the old size, and QuestDB's column descriptors are kept byte for byte."""

import os
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.questdb.table_dir import read_table_dir

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "questdb")


def partitions(tmp_path):
    out = []
    for z in ("legacy_bool~11", "legacy_all~18"):
        with zipfile.ZipFile(os.path.join(DATA, f"{z}.zip")) as f:
            f.extractall(tmp_path / z)
        root = str(tmp_path / z / z)
        out += [os.path.join(root, p.name) for p in read_table_dir(root).partitions]
    return out


def later_rows(old: pa.Table, n=3) -> pa.Table:
    """The file's last n rows again, their designated timestamp moved past the file's last one."""
    tail = old.slice(old.num_rows - n)
    ts = old.schema.get_field_index("ts")
    last = pa.compute.max(old["ts"]).cast(pa.int64()).as_py()
    moved = pa.array(last + 1000 * np.arange(1, n + 1, dtype=np.int64)).cast(old.schema.field(ts).type)
    return tail.set_column(ts, old.schema.field(ts), moved)


def test_append_and_update_on_questdb_files(tmp_path):
    for d in partitions(tmp_path):
        parquet, pm_path = os.path.join(d, "data.parquet"), os.path.join(d, "_pm")
        old, size0 = pq.read_table(parquet), os.path.getsize(parquet)
        with qdbpm.open(pm_path) as pm:
            header = pm.buffer[8 : pm.header_end].tobytes()  # after the committed size
            committed0, rgs0 = pm.pm_size, pm.row_group_count
        add = later_rows(old)
        qdbpm.append(parquet, add)
        got = pq.read_table(parquet)
        assert got.equals(pa.concat_tables([old, add])), d
        with qdbpm.open(pm_path) as pm:  # CRC and every check
            assert pm.prev_pm_size == committed0 and pm.row_group_count > rgs0
            assert pm.parquet_size == os.path.getsize(parquet)
            assert pm.buffer[8 : pm.header_end].tobytes() == header  # QuestDB's descriptors kept
        with qdbpm.open(pm_path, parquet_size=size0) as pm:  # QuestDB's own snapshot, pinned
            assert pm.row_group_count == rgs0
        qdbpm.update(parquet)  # nothing changed: a new snapshot of the same row groups
        with qdbpm.open(pm_path) as pm:
            assert pm.row_group_count > rgs0


def test_nulls_into_a_required_questdb_column_are_refused(tmp_path):
    d = partitions(tmp_path)[0]  # legacy_bool: ts and b are REQUIRED in the file
    parquet = os.path.join(d, "data.parquet")
    old = pq.read_table(parquet)
    add = later_rows(old, 2)
    bad = add.set_column(1, pa.field("b", pa.bool_()), pa.array([None, True], pa.bool_()))
    with pytest.raises(qdbpm.PmError, match="nulls"):
        qdbpm.append(parquet, bad)
    assert pq.read_table(parquet).equals(old)
