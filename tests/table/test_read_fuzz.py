"""A few fixed cases of the differential read fuzzer (support.read_fuzz; scripts/fuzz_reads.py runs
thousands): random writer settings x random WHERE clauses, read_table equal to pyarrow's read of
DuckDB's rows, count() their number. Also checks the oracle itself can tell a wrong answer."""

import pyarrow as pa
import pytest

from support.read_fuzz import differ, run_case, write_case
from support.table_files import upload

CASES = [0, 1, 2, 3, 10, 18]  # 2 and 18: partitions written by DuckDB; 10: by Polars


@pytest.mark.parametrize("seed", CASES)
def test_random_reads_equal_pyarrow_on_duckdbs_rows(tmp_path, capfd, seed):
    tally = run_case(str(tmp_path), seed, queries=30)
    assert "poorly aligned" not in capfd.readouterr().err  # Acero's warning of a misaligned buffer
    assert not tally["failures"], "\n".join(f"case {s}: {what}: {why}" for s, what, why in tally["failures"])
    assert not tally["oracle_errors"]  # DuckDB answers every clause of these cases: each one is judged
    assert tally["queries"] == 30 and tally["rows"] >= 10 and tally["empty"] >= 1  # not vacuous


@pytest.mark.parametrize("seed", [1, 2])
def test_random_reads_from_object_storage_equal_the_local_ones(tmp_path, s3_server, s3_bucket, seed):
    """The same cases on SeaweedFS: ranged GETs of the surviving chunks, footer-less too."""
    fs = s3_server.filesystem()

    def put(root):
        upload(fs, root, f"{s3_bucket}/fuzz{seed}")
        return fs, f"s3://{s3_bucket}/fuzz{seed}"

    tally = run_case(str(tmp_path), seed, queries=20, upload=put)
    assert not tally["failures"], "\n".join(f"case {s}: {what}: {why}" for s, what, why in tally["failures"])
    assert tally["queries"] == 20


def test_the_cases_vary_the_writer_settings(tmp_path):
    seen, writers = {}, set()
    for seed in CASES:
        _, settings = write_case(str(tmp_path / str(seed)), seed)
        for opts in settings:
            writers.add(opts.get("writer", "pyarrow"))
            for k, v in opts.items() if "writer" not in opts else ():
                seen.setdefault(k, set()).add(repr(v))
    assert all(len(v) >= 2 for v in seen.values()), seen
    assert writers == {"pyarrow", "duckdb", "polars"}


def test_differ_names_a_wrong_value_type_or_row_count():
    t = pa.table({"x": pa.array([1.0, float("nan"), None])})
    assert differ(t, t) is None  # NaN equals NaN here
    assert "row 2" in differ(pa.table({"x": pa.array([1.0, float("nan"), 2.0])}), t)
    assert "schema" in differ(t.cast(pa.schema([("x", pa.float32())])), t)
    assert "rows" in differ(t.slice(1), t)
