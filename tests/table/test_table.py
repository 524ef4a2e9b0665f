"""Tables of many partitions: pruning across files in one call, schema groups, the prune CLI."""

import datetime as dt
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import col
from qdbpm.sync.generate import generate
from qdbpm.table.table import open_table

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DAY_US = 86_400_000_000


def make_table(root, days=6, rows=400, rg=100, extra_schema=False):
    truth = {}
    for d in range(days):
        part = os.path.join(root, f"2024-01-{d + 1:02d}")
        os.makedirs(part)
        ts = (np.datetime64("2024-01-01", "us") + np.timedelta64(d * DAY_US, "us")
              + np.arange(rows).astype("timedelta64[us]") * (DAY_US // rows))
        cols = {"ts": pa.array(ts, pa.timestamp("us")), "sym": pa.array([f"S{(i // rg + d) % 5}" for i in range(rows)]),
                "px": pa.array(np.arange(rows, dtype=np.float64) + d * 1000)}
        if extra_schema and d % 2:
            cols["extra"] = pa.array(np.arange(rows, dtype=np.int32))
        t = pa.table(cols)
        path = os.path.join(part, "data.parquet")
        pq.write_table(t, path, row_group_size=rg, sorting_columns=[pq.SortingColumn(0)])
        generate(path)
        truth[os.path.basename(part)] = t
    return truth


def brute(truth, rg, pred):
    from qdbpm.prune.arrow import filter_table

    out = set()
    for p, t in truth.items():
        for r in range(t.num_rows // rg):
            if filter_table(t.slice(r * rg, rg), pred).num_rows:
                out.add((p, r))
    return out


@pytest.mark.parametrize("extra_schema", [False, True])
def test_table_prune_matches_brute_force(tmp_path, extra_schema):
    truth = make_table(str(tmp_path), extra_schema=extra_schema)
    preds = [
        (col("ts") >= dt.datetime(2024, 1, 3, 12)) & (col("ts") < dt.datetime(2024, 1, 4, 6)),
        col("sym") == "S3",
        (col("px") > 2150.0) | col("sym").isin(["S0"]),
        ~(col("px") < 5000),
        col("ts").between("2024-01-02T00:00:00", "2024-01-02T05:59:59"),
    ]
    with open_table(str(tmp_path)) as table:
        assert table.partitions == sorted(truth)
        for pred in preds:
            kept = table.prune(pred)
            assert kept.schema.names == ["partition", "row_group", "num_rows"]
            assert kept.schema.field("row_group").type == pa.int32()
            got = set(zip(kept["partition"].to_pylist(), kept["row_group"].to_pylist()))
            must = brute(truth, 100, pred)
            assert must <= got
            # timestamp and string stats are exact here: the ranges line up with row groups
            if pred is preds[0] or pred is preds[1]:
                assert got == must
            assert all(n == 100 for n in kept["num_rows"].to_pylist())


def test_table_groups_partitions_by_schema(tmp_path):
    make_table(str(tmp_path), extra_schema=True)
    with open_table(str(tmp_path)) as table:
        masks = table.prune_masks(col("px") < 10)
        assert len(table.schema_groups()) == 2
        assert masks["2024-01-01"].tolist() == [True, False, False, False]
        assert not any(masks[p].any() for p in table.partitions[1:])
        with pytest.raises(qdbpm.PmError, match="no column 'extra'"):
            table.prune(col("extra") > 1)  # absent from half the partitions


def test_prune_cli(tmp_path):
    make_table(str(tmp_path), days=3)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "qdbpm.cli", "prune", str(tmp_path), "--where",
                        "ts >= '2024-01-02T18:00:00' AND sym = 'S3'", "--json"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["partitions"] == 3 and out["row_groups"] == 12
    # ts keeps 2024-01-02 rg 3 and all of 2024-01-03; sym = 'S3' lives in 01-02 rg 2 and 01-03 rg 1
    assert [(k["partition"], k["row_group"]) for k in out["kept"]] == [("2024-01-03", 1)]
    p = subprocess.run([sys.executable, "-m", "qdbpm.cli", "prune", str(tmp_path), "--where", "px >"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "qdbpm: error:" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "qdbpm.cli", "prune", str(tmp_path), "--where", "ts > '2024-01-03T18:00:00'"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "kept 1 of 12 row groups" in p.stdout


def test_hidden_directories_are_never_partitions(tmp_path):
    """Directories starting with '.' or '_' (a writer's staging area) are skipped by the listing
    of partitions and of Parquet files to generate, as pyarrow.dataset's ignore_prefixes do."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from qdbpm.sync.generate import generate
    from qdbpm.sync.remote import find_parquet
    from qdbpm.table.listing import find_partitions, is_hidden

    for rel in ["day=1", "_staging/job/day=2", ".hidden/day=3", "day=4/_tmp"]:
        d = tmp_path / rel
        d.mkdir(parents=True)
        pq.write_table(pa.table({"a": [1, 2]}), d / "data.parquet")
        generate(str(d / "data.parquet"))
    assert find_partitions(str(tmp_path)) == ["day=1"]
    assert [p for p, _ in find_parquet(str(tmp_path))] == [str(tmp_path / "day=1" / "data.parquet")]
    assert is_hidden("_staging/x/_pm") and is_hidden("a/.b/_pm") and not is_hidden("a=1/_pm")
