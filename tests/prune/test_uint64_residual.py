"""Residuals over a UINT64 column and over integers past 2^53 select DuckDB's rows. Before: an
integer becoming a DOUBLE past 2^53 (CAST(u64 AS DOUBLE), u64 / 2) raised Arrow's "Integer value
... not in range" mid-read, and arithmetic or a comparison with a BIGINT cast a UINT64 from 2^63 on
to BIGINT, which overflowed (found by scripts/fuzz_reads.py). A UINT64 value is now a DECIMAL(20, 0)
in the exact filter, and an integer rounds to the nearest DOUBLE as in SQL."""

import numpy as np
import pyarrow as pa
import pytest

from support.residual_cases import one_partition, partition_ids

AT = 2 ** 63
CLAUSES = [f"CAST(u AS DOUBLE) >= {float(AT)}", "CAST(u AS DOUBLE) - 9.2e18 > 2.3e16", "u / 2 > 4.6e18",
           f"u - b > {AT}", f"u - b * 1000 <= {AT - 1000}", f"coalesce(u, {AT}) = {AT}", f"u + b > {AT}",
           f"u IS DISTINCT FROM {AT + 5}", "u > b", "CASE WHEN b > 0 THEN u ELSE b END > 100",
           f"CAST(i AS DOUBLE) = {float(2 ** 60 + 512)}", f"i / 3 > {(2 ** 60 + 1000) / 3}",
           f"coalesce(i, f) > {float(2 ** 60 + 600)}", "CASE WHEN b > 0 THEN i ELSE f END > 100",
           f"u + 0 IN ({AT}, {AT + 3})"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    n = 20
    u = (np.uint64(AT) - np.uint64(10) + np.arange(n, dtype=np.uint64))
    t = pa.table({"id": np.arange(n), "u": pa.array(u, mask=np.arange(n) == 7),
                  "b": pa.array(np.arange(n) * 3 % 7 - 3, pa.int64()),
                  "i": pa.array(2 ** 60 + np.arange(n) * 100, pa.int64()), "f": np.arange(n) * 1.5})
    return one_partition(tmp_path_factory.mktemp("uint64"), t, row_group_size=5)


@pytest.mark.parametrize("clause", CLAUSES)
def test_uint64_and_large_integer_residuals_select_duckdbs_rows(table, clause):
    got, want = partition_ids(table, clause)
    assert got == want
    assert 0 < len(want) < 20  # neither every row nor none
