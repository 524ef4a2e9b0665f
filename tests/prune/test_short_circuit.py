"""An OR and a CASE compute a part that may fail (a narrow CAST, an overflow) only over the rows
that reach it, as DuckDB does (prune/staged.py): `b = 1 OR CAST(a AS TINYINT) > 0` and `CASE WHEN
a > 100 THEN 0 ELSE CAST(a AS TINYINT) END = 1` answer where DuckDB answers. Before, Arrow computed
every part over every row and qdbpm raised EvaluationError on a row DuckDB never computes the part
for (a guarded CAST, the way users write one to avoid that error)."""

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import qdbpm
from qdbpm.errors import EvaluationError
from qdbpm.prune import residual as R
from qdbpm.prune.arrow import filter_table
from qdbpm.prune.staged import guarded
from qdbpm.table import scan as scan_mod
from support.residual_cases import duckdb_ids, one_partition

BIG = 33  # the one row whose `big` (2^40) no narrow CAST takes

# DuckDB answers each (the failing part never meets row 33): so must qdbpm, on every path
ANSWERED = [
    "id = 33 OR CAST(big AS TINYINT) > 5",
    "(id = 33 OR s = 2) OR CAST(big AS INTEGER) < 0",
    "s = 1 OR (id = 33 OR big * 9223372036854775 > 100)",
    "CASE WHEN big > 1000 THEN 0 ELSE CAST(big AS TINYINT) END = 3",
    "CASE WHEN id = 33 THEN -1 WHEN CAST(big AS SMALLINT) > 30 THEN 1 ELSE 0 END = 1",
    "CASE WHEN big < 100 THEN CAST(big AS TINYINT) * 2 END > 10",
    "CASE WHEN id <> 33 THEN CAST(big AS DECIMAL(4,1)) ELSE 0.5 END > 3.0",
    "CASE WHEN id = 33 THEN 'x' ELSE CAST(CAST(big AS TINYINT) AS VARCHAR) END = '7'",
    "s = 1 OR (CASE WHEN id = 33 THEN 0 ELSE CAST(big AS TINYINT) END > 30 AND f > 1)",
    "CASE WHEN s = 0 THEN CASE WHEN id = 33 THEN 0 ELSE CAST(big AS TINYINT) END ELSE 1 END = 0",
    "coalesce(CASE WHEN big > 99 THEN NULL ELSE CAST(big AS SMALLINT) END, 5) = 5",
]
# row 33 reaches the failing part whatever the order: DuckDB raises, and so does qdbpm
RAISED = [
    "id <> 33 OR CAST(big AS TINYINT) > 0",
    "CASE WHEN id = 33 THEN CAST(big AS TINYINT) ELSE 0 END = 1",
    "CASE WHEN s = 99 THEN 0 WHEN CAST(big AS TINYINT) > 0 THEN 1 END = 1",
    "CASE WHEN id < 40 THEN 1 ELSE 0 END = 1 AND CASE WHEN s >= 0 THEN CAST(big AS SMALLINT) END > 0",
]


# DuckDB computes an OR's parts in the order written: it raises on the first, answers the second;
# qdbpm answers both (it raises only where every order meets the failing value, as for an AND)
ORDERS = [("CAST(big AS TINYINT) > 5 OR id = 33", "id = 33 OR CAST(big AS TINYINT) > 5"),
          ("CAST(big AS SMALLINT) > 30 OR big - 1 > 30", "big - 1 > 30 OR CAST(big AS SMALLINT) > 30")]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    n = 40
    i = np.arange(n)
    t = pa.table({"id": i, "s": pa.array(i % 9, pa.int32()), "f": (i % 7) * 1.25,
                  "big": pa.array(np.where(i == BIG, 1 << 40, i), pa.int64())})
    return one_partition(tmp_path_factory.mktemp("short_circuit"), t, row_group_size=10)


def _duckdb(path, clause):
    return duckdb_ids(f"read_parquet('{path}')", clause)


@pytest.mark.parametrize("clause", ANSWERED)
def test_a_part_that_may_fail_meets_only_the_rows_that_reach_it(table, clause, monkeypatch):
    root, path = table
    want = _duckdb(path, clause)
    assert 0 < len(want) < 40
    assert sorted(qdbpm.read_table(root, ["id"], clause)["id"].to_pylist()) == want
    assert sorted(qdbpm.read_table(root, ["id"], clause, footer=False)["id"].to_pylist()) == want
    assert qdbpm.open_table(root).scan(clause).count() == len(want)
    assert sorted(filter_table(qdbpm.read_table(root), qdbpm.parse(clause))["id"].to_pylist()) == want
    monkeypatch.setattr(scan_mod, "DIRECT", False)  # pyarrow's reader decodes, the filter runs after
    assert sorted(qdbpm.read_table(root, ["id"], clause)["id"].to_pylist()) == want


@pytest.mark.parametrize("written, answered", ORDERS)
def test_an_or_answers_where_some_order_of_its_parts_answers(table, written, answered):
    root, path = table
    with pytest.raises(duckdb.ConversionException):
        _duckdb(path, written)
    want = _duckdb(path, answered)
    for clause in (written, answered):
        assert sorted(qdbpm.read_table(root, ["id"], clause)["id"].to_pylist()) == want


@pytest.mark.parametrize("clause", RAISED)
def test_a_row_that_reaches_the_failing_part_still_raises(table, clause):
    root, path = table
    with pytest.raises(duckdb.ConversionException):
        _duckdb(path, clause)
    with pytest.raises(EvaluationError, match="partition 'p0'"):
        qdbpm.read_table(root, ["id"], clause)
    with pytest.raises(EvaluationError, match="partition 'p0'"):
        qdbpm.open_table(root).scan(clause).count()


def test_guarded_reads_a_branch_s_columns_as_null_off_its_rows():
    e = qdbpm.parse("CASE WHEN a > 1 THEN CAST(b AS TINYINT) ELSE b + 1 END = 2")
    case = guarded(e).left
    first = qdbpm.parse("a > 1")
    (cond, value), = case.whens
    assert cond == first
    # THEN: b where its WHEN is TRUE, else NULL; ELSE: NULL where the WHEN is TRUE, else b
    assert value == R.Cast(R.Case(((first, R.Ref("b")),), R.Const(None)), "TINYINT")
    assert case.default == R.Arith("+", R.Case(((first, R.Const(None)),), R.Ref("b")), R.Const(1))
    safe = qdbpm.parse("CASE WHEN a > 1 THEN b ELSE 0 END = 2")
    assert guarded(safe) == safe  # nothing that may fail: unchanged
