"""Where DuckDB refuses to compute a residual over a row's value, qdbpm raises an EvaluationError
naming the partition, on every read path; it never returns rows computed from a value DuckDB
refuses. Before: `CAST(x AS TINYINT / SMALLINT / INTEGER)` was a BIGINT cast, so a value outside
the type passed through and matched (DuckDB: "Conversion Error"); an integer overflow or a value
outside a `CAST AS DECIMAL(p, s)` escaped as pyarrow's bare `ArrowInvalid` mid-read; an integer
literal outside a CAST's type was folded as it was; and `INT4`, `INT2`, `INT8` were refused (the
type-name pattern had no digits). A conjunct that may fail meets only the rows the other
conjuncts keep (prune/staged.py), so qdbpm raises only where DuckDB does in any order."""

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import qdbpm
from qdbpm.errors import EvaluationError, PredicateError
from qdbpm.prune.arrow import filter_table
from qdbpm.table import scan as scan_mod
from support.residual_cases import one_partition, partition_ids

# in range for every row: the same rows as DuckDB
IN_RANGE = ["CAST(s AS TINYINT) > 3", "CAST(s AS SMALLINT) = 7", "CAST(m AS INTEGER) < -1000",
            "CAST(m AS INT4) + 1 <= 0", "CAST(f AS TINYINT) = 2", "CAST(f AS SMALLINT) >= 4",
            "CAST(flag AS TINYINT) = 1", "CAST(s AS INT1) BETWEEN 2 AND 5", "CAST(m AS INT2) = -1000"]
# a row's value outside what the clause can compute: DuckDB raises, and so does qdbpm
REFUSED = ["CAST(big AS TINYINT) > 1", "CAST(big AS SMALLINT) > 1", "CAST(big AS INTEGER) > 1",
           "CAST(fbig AS INTEGER) > 1", "CAST(big AS DECIMAL(4,1)) > 1", "big * 9223372036854775807 > 1",
           "CAST(fnan AS BIGINT) > 1"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    n = 40
    i = np.arange(n)
    t = pa.table({"id": i, "s": pa.array(i % 9, pa.int32()), "m": pa.array(-(i * 100), pa.int64()),
                  "f": (i % 7) * 1.25, "flag": i % 3 == 0,
                  "big": pa.array(np.where(i == 33, 1 << 40, i), pa.int64()),
                  "fbig": np.where(i == 21, 3e10, i * 0.5),
                  "fnan": np.where(i == 5, np.nan, i * 1.0)})
    return one_partition(tmp_path_factory.mktemp("evaluation"), t, row_group_size=10)


@pytest.mark.parametrize("clause", IN_RANGE)
def test_casts_to_narrow_integers_in_range_select_duckdbs_rows(table, clause):
    got, want = partition_ids(table, clause)
    assert got == want
    assert 0 < len(want) < 40


@pytest.mark.parametrize("clause", REFUSED)
def test_a_value_duckdb_refuses_is_an_evaluation_error_on_every_path(table, clause, monkeypatch):
    root, path = table
    with pytest.raises((duckdb.ConversionException, duckdb.OutOfRangeException)):
        duckdb.connect().execute(f"select id from read_parquet('{path}') where {clause}").fetchall()
    reads = {"read_table": lambda: qdbpm.read_table(root, ["id"], clause),
             "footer=False": lambda: qdbpm.read_table(root, ["id"], clause, footer=False),
             "count": lambda: qdbpm.open_table(root).scan(clause).count(),
             "to_reader": lambda: qdbpm.open_table(root).scan(clause, ["id"]).to_reader().read_all()}
    for name, read in reads.items():
        with pytest.raises(EvaluationError, match="partition 'p0': the filter cannot be computed") as e:
            read()
        assert isinstance(e.value, PredicateError) and isinstance(e.value, ValueError), name
    monkeypatch.setattr(scan_mod, "DIRECT", False)  # pyarrow's reader decodes, the filter runs after
    for name in ("read_table", "count"):
        with pytest.raises(EvaluationError, match="partition 'p0'"):
            reads[name]()


def test_pruned_row_groups_are_not_evaluated(table):
    """The row group holding the refused value is pruned by its ids: nothing read raises (DuckDB,
    whose zone maps skip it alike, answers too)."""
    clause = "id < 20 AND CAST(big AS TINYINT) >= 0"
    got, want = partition_ids(table, clause)
    assert got == want == list(range(20))


def test_filter_table_names_what_it_filters():
    t = pa.table({"a": pa.array([1, 300], pa.int64())})
    with pytest.raises(EvaluationError, match="the rows: the filter cannot be computed .*300"):
        filter_table(t, qdbpm.parse("CAST(a AS TINYINT) > 0"))
    with pytest.raises(EvaluationError, match="partition 'x'"):
        filter_table(t, qdbpm.parse("a * 9223372036854775807 > 0"), "partition 'x'")
    assert filter_table(t, qdbpm.parse("CAST(a AS SMALLINT) > 0")).num_rows == 2


@pytest.mark.parametrize("text", ["CAST(300 AS TINYINT) = a", "a = CAST(-40000 AS SMALLINT)",
                                  f"a > CAST({1 << 31} AS INTEGER)", f"a < CAST({1 << 63} AS BIGINT)"])
def test_a_literal_outside_its_cast_is_refused_when_parsed(text):
    with pytest.raises(PredicateError, match="out of .* range"):
        qdbpm.parse(text)
    with pytest.raises(duckdb.ConversionException):
        duckdb.connect().execute(f"select 1 from (select 1 as a) where {text}").fetchall()


def test_a_literal_inside_its_cast_folds():
    assert qdbpm.parse("a = CAST(-128 AS TINYINT)") == qdbpm.parse("a = -128")
    assert qdbpm.parse(f"a = CAST({(1 << 31) - 1} AS INTEGER)") == qdbpm.parse(f"a = {(1 << 31) - 1}")


def test_the_narrow_types_show_in_the_tree_and_pickle():
    import pickle

    e = qdbpm.parse("CAST(a AS SMALLINT) > 1")
    assert pickle.loads(pickle.dumps(e)) == e
    assert "SMALLINT" in repr(e) and e != qdbpm.parse("CAST(a AS BIGINT) > 1")



STAGED = {  # clause -> the ids it keeps: the other conjunct is FALSE on the one row (id 33) whose
    # `big` (2^40) no narrow CAST takes, so that row never meets the CAST
    "s <> 6 AND CAST(big AS TINYINT) >= 0": [i for i in range(40) if i % 9 != 6],
    "CAST(big AS SMALLINT) < 100 AND (f > 100 OR id <> 33)": [i for i in range(40) if i != 33],
    "big * 9000000 >= 0 AND s <> 6 AND id > 2": [i for i in range(3, 40) if i % 9 != 6],
    # both may fail: the CAST fails on row 33 until the sum, which does not, has dropped it
    "CAST(big AS TINYINT) >= 0 AND (big + 1 < 1000 AND id >= 0)": [i for i in range(40) if i != 33],
}


@pytest.mark.parametrize("clause", sorted(STAGED))
def test_a_conjunct_that_may_fail_meets_only_the_rows_the_others_keep(table, clause, monkeypatch):
    """As DuckDB evaluates a conjunction (each conjunct over the rows the earlier ones kept), a
    conjunct that may fail is computed over the rows every other conjunct keeps: it answers here
    whatever order DuckDB picks (found by scripts/fuzz_reads.py, which had qdbpm raise where
    DuckDB answered)."""
    root = table[0]
    want = STAGED[clause]
    assert sorted(qdbpm.read_table(root, ["id"], clause)["id"].to_pylist()) == want
    assert qdbpm.open_table(root).scan(clause).count() == len(want)
    assert sorted(qdbpm.read_table(root, ["id"], clause, footer=False)["id"].to_pylist()) == want
    monkeypatch.setattr(scan_mod, "DIRECT", False)
    assert sorted(qdbpm.read_table(root, ["id"], clause)["id"].to_pylist()) == want
    t = qdbpm.read_table(root)
    assert sorted(filter_table(t, qdbpm.parse(clause))["id"].to_pylist()) == want


@pytest.mark.parametrize("clause", ["s <> 5 AND CAST(big AS TINYINT) >= 0", "id = 33 AND CAST(big AS INTEGER) > 0"])
def test_a_row_every_other_conjunct_keeps_still_raises(table, clause):
    root, path = table
    with pytest.raises(duckdb.ConversionException):
        duckdb.connect().execute(f"select id from read_parquet('{path}') where {clause}").fetchall()
    with pytest.raises(EvaluationError, match="partition 'p0'"):
        qdbpm.read_table(root, ["id"], clause)


@pytest.mark.parametrize("text, sure, risky", [
    ("a > 1 AND CAST(b AS TINYINT) = 2", "a > 1", ["CAST(b AS TINYINT) = 2"]),
    ("a > 1 AND b / 2 > 3 AND lower(s) = 'x'", "a > 1 AND b / 2 > 3 AND lower(s) = 'x'", []),
    ("a + 1 > 2 AND (-b < 0 AND abs(c) = 1)", None, ["a + 1 > 2", "-b < 0", "abs(c) = 1"]),
    ("CAST(a AS DOUBLE) > 1 AND CAST(d AS DATE) = DATE '2024-01-01' AND (x > 1 OR CAST(y AS DECIMAL(4,1)) = 1)",
     "CAST(a AS DOUBLE) > 1", ["CAST(d AS DATE) = DATE '2024-01-01'", "x > 1 OR CAST(y AS DECIMAL(4,1)) = 1"]),
    ("coalesce(a, 1) = 1 AND CASE WHEN a > 0 THEN b * 2 ELSE 0 END > 1", "coalesce(a, 1) = 1",
     ["CASE WHEN a > 0 THEN b * 2 ELSE 0 END > 1"]),
])
def test_stages_split_what_may_fail(text, sure, risky):
    """Each conjunct of the (flattened) AND on its side: CASTs to integers, DECIMAL or DATE, and
    + - * abs and negation may fail; a DOUBLE division, a CAST to DOUBLE, lower, coalesce cannot."""
    from qdbpm.prune.staged import stages

    assert stages(qdbpm.parse(text)) == (None if sure is None else qdbpm.parse(sure),
                                          tuple(qdbpm.parse(k) for k in risky))


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """Two hive partitions, k=1 and k=300 (300 is no TINYINT)."""
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("keyed")
    for k in (1, 300):
        (root / f"k={k}").mkdir()
        pq.write_table(pa.table({"a": [1, 2]}), root / f"k={k}" / "data.parquet")
        qdbpm.generate(str(root / f"k={k}" / "data.parquet"))
    return str(root)


@pytest.mark.parametrize("clause, want", [("k < 10 AND CAST(k AS TINYINT) > 0", 2),
                                          ("a = 5 AND CAST(k AS TINYINT) > 0", 0),
                                          ("k = 300 AND CAST(a AS TINYINT) > 0", 2)])
def test_a_key_atom_its_values_cannot_compute_is_left_to_the_rows(keyed, clause, want):
    """The keys decide what they can; an atom that cannot be computed over some partition's key
    (before: Arrow's bare ArrowInvalid from the key plan) is decided over the rows that reach it."""
    assert qdbpm.read_table(keyed, where=clause).num_rows == want
    assert qdbpm.open_table(keyed).scan(clause).count() == want


@pytest.mark.parametrize("clause", ["CAST(k AS TINYINT) > 0", "CAST(k AS TINYINT) > 0 AND a = 2"])
def test_a_key_value_every_row_reaches_raises(keyed, clause):
    with pytest.raises(EvaluationError, match="partition 'k=300'"):
        qdbpm.read_table(keyed, where=clause)
    with pytest.raises(EvaluationError, match="partition 'k=300'"):
        qdbpm.open_table(keyed).scan(clause).count()
