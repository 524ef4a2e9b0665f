"""Residuals compute on an unsigned INT32 column as DuckDB does on its UINTEGER. The `_pm` types
such a column as QuestDB's IPv4 (the type table's one unsigned INT32), and arithmetic, CAST,
coalesce and CASE on it were refused with "arithmetic on OTHER" (noticed while fuzzing reads); it
is now an integer, as BIGINT, on both read paths (footer or `_pm` types alone)."""

import numpy as np
import pyarrow as pa
import pytest

import qdbpm
from support.residual_cases import one_partition, partition_ids

TOP = 2 ** 31
CLAUSES = ["u + 1 > 2", "u - 5 < 0", f"CAST(u AS BIGINT) + b > {TOP}", "u / 2 > 1e9", "coalesce(u, 7) = 7",
           "CASE WHEN b > 0 THEN u ELSE b END > 3", "u > b", "u + 0 IN (2, 4294967295)",
           "CAST(u AS DOUBLE) > 3e9", "CAST(u AS DECIMAL(12,2)) > 3e9", f"u - b >= {TOP}"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    u = np.array([0, 1, 2, 3, TOP - 1, TOP, TOP + 5, 2 ** 32 - 1], np.uint32)
    t = pa.table({"id": np.arange(8), "u": pa.array(u, mask=np.arange(8) == 3), "b": pa.array(np.arange(8) - 4)})
    return one_partition(tmp_path_factory.mktemp("uint32"), t, row_group_size=3)


@pytest.mark.parametrize("clause", CLAUSES)
def test_uint32_residuals_select_duckdbs_rows(table, clause):
    root = table[0]
    got, want = partition_ids(table, clause)
    assert got == want
    assert 0 < len(want) < 8
    strict = sorted(qdbpm.read_table(root, ["id"], clause, footer=False)["id"].to_pylist())
    assert strict == want
