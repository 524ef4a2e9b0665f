"""Hive partition keys as typed columns that prune whole partitions before any `_pm` is opened:
typed and decoded as pyarrow.dataset types them (inferred or from an explicit schema), appended to
what scan returns; prune, byte_ranges and to_dataset keep only the surviving partitions; a literal
that does not fit a key is refused before any data is read; a key named like a file column stays
the file's; many key atoms and constant predicates. A recording filesystem shows which `_pm` were
opened.
"""

import datetime as dt
import os

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.errors import PmError, PredicateError

from support.hive_cases import BASE, ROWS, hive_parts, partition_name, sorted_rows, write_data_file, write_hive_table
from support.table_files import RecordingFS


@pytest.fixture(scope="module")
def hive_root(tmp_path_factory):
    return write_hive_table(tmp_path_factory.mktemp("hive"))


def test_keys_are_typed_and_decoded_as_pyarrow_does(hive_root):
    ref = pads.dataset(hive_root, partitioning="hive")
    with qdbpm.open_table(hive_root) as table:
        keys = table.partition_keys
        assert keys.schema == pa.schema([("day", pa.int32()), ("sym", pa.string())])
        assert [f.name for f in ref.schema][-2:] == ["day", "sym"]
        by_path = {os.path.relpath(os.path.dirname(f.path), hive_root).replace(os.sep, "/"):
                   pads.get_partition_keys(f.partition_expression) for f in ref.get_fragments()}
        assert sorted(by_path) == table.partitions
        for p, row in zip(table.partitions, keys.to_pylist()):
            assert row == {"day": by_path[p]["day"], "sym": by_path[p].get("sym")}, p
        assert {r["sym"] for r in keys.to_pylist()} == {"a", "b c", None}
        # every row, keys appended after the file columns, as pyarrow.dataset gives them
        got = table.scan().to_table()
        want = ref.to_table()
        assert got.schema == want.schema and sorted_rows(got) == sorted_rows(want)
        # columns= may name keys, in any order
        got = table.scan("qty > 0", ["sym", "rid", "day"]).to_table()
        assert got.schema.names == ["sym", "rid", "day"]
        assert sorted_rows(got) == sorted_rows(ref.to_table(columns=["sym", "rid", "day"], filter=pc.field("qty") > 0))
        # schema= of the file columns: they are cast, the keys keep their types
        cast = pa.schema([pa.field("rid", pa.float64()), pa.field("ts", pa.timestamp("ms")),
                          pa.field("px", pa.float32()), pa.field("qty", pa.int32()), pa.field("s", pa.large_string())])
        got = table.scan("day = 2 AND qty > 0", schema=cast).to_table()
        want = ref.to_table(filter=(pc.field("day") == 2) & (pc.field("qty") > 0))
        assert got.schema == pa.schema(list(cast) + [want.schema.field("day"), want.schema.field("sym")])
        assert sorted_rows(got) == sorted_rows(want.cast(got.schema))
        # footer-less strict mode: same rows, key columns too
        strict = table.scan("day = 2 AND qty > 0", footer=False).to_table()
        assert strict.schema.names == want.schema.names and strict.column("rid").to_pylist() == \
            table.scan("day = 2 AND qty > 0").to_table().column("rid").to_pylist()
    with qdbpm.open_table(hive_root, partitioning=None) as table:
        assert table.partition_keys.num_columns == 0
        assert table.scan().schema == pq.read_schema(os.path.join(hive_root, "day=1", "sym=a", "data.parquet"))
        with pytest.raises(PredicateError, match="day"):
            table.scan("day = 1")


def test_table_prune_masks_byte_ranges_and_to_dataset_keep_only_surviving_partitions(hive_root):
    where = "day IN (2, 12) AND qty > 10"
    expr = pc.field("day").isin([2, 12]) & (pc.field("qty") > 10)
    ref = pads.dataset(hive_root, partitioning="hive")
    keep = {"day=12/sym=a", "day=12/sym=b%20c", "day=2/sym=__HIVE_DEFAULT_PARTITION__", "day=2/sym=a",
            "day=2/sym=b%20c"}
    rec = RecordingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(hive_root, rec) as table:
        pruned = table.prune(where)
        assert set(pruned.column("partition").to_pylist()) <= keep
        assert set(table.prune_masks(where)) == set(table.classify_masks(where)) == keep
        scan = table.scan(where, ["rid", "qty", "day"])
        assert {os.path.relpath(os.path.dirname(p), table.root).replace(os.sep, "/")
                for p in scan.byte_ranges().column("path").to_pylist()} <= keep
        ds = scan.to_dataset()
        assert {os.path.relpath(os.path.dirname(f.path), table.root).replace(os.sep, "/")
                for f in ds.get_fragments()} <= keep
        assert ds.schema == ref.schema
        assert sorted_rows(ds.to_table(filter=expr, columns=["rid", "qty", "day"])) == \
            sorted_rows(ref.to_table(filter=expr, columns=["rid", "qty", "day"])) == sorted_rows(scan.to_table())
        assert rec.pm_partitions(table.root) == keep
        # a key-only predicate: every row of the surviving partitions, counted from _pm alone
        rec.paths.clear()
        scan = table.scan("sym = 'b c' AND day >= 3")
        assert scan.row_groups()["full"].to_pylist() == [True] * 10
        assert scan.count() == 2 * ROWS and not [p for p in rec.paths if p.endswith("data.parquet")]


def test_a_literal_that_does_not_fit_a_key_is_refused_before_any_data(hive_root):
    rec = RecordingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(hive_root, rec) as table:
        for bad in ["day = 'x'", "day IN (1, 'two')", "sym = TRUE", "day = 2 OR sym > 3"]:
            with pytest.raises(PredicateError, match="day|sym"):
                table.scan(bad)
        # refused once the first partition's _pm shows that the name is no file column (it
        # could be one: see the keys named like file columns), nothing else read
        assert rec.pm_partitions(table.root) == {table.partitions[0]}
        assert not [p for p in rec.paths if p.endswith("data.parquet")]
    rec = RecordingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(hive_root, rec) as table:
        # no partition left: only the first partition's _pm is opened (its columns decide which
        # keys are columns), no data
        assert table.scan("day = 7 OR sym = 'zz'").count() == 0
        assert rec.pm_partitions(table.root) == {table.partitions[0]}


def test_explicit_schema_types_keys_like_pyarrow_partitioning(tmp_path):
    parts = ["d=2024-01-05/k=007", "d=2024-01-06/k=10", "d=2024-02-01/k=__HIVE_DEFAULT_PARTITION__",
             "d=__HIVE_DEFAULT_PARTITION__/k=3"]
    for n, part in enumerate(parts):
        d = tmp_path.joinpath("t", *part.split("/"))
        d.mkdir(parents=True)
        write_data_file(str(d / "data.parquet"), n)
    root = str(tmp_path / "t")
    inferred = pads.dataset(root, partitioning="hive")
    schema = pa.schema([("d", pa.date32()), ("k", pa.int64())])
    explicit = pads.dataset(root, partitioning=pads.partitioning(schema, flavor="hive"))
    jan = (pc.field("d") >= pa.scalar(dt.date(2024, 1, 1))) & (pc.field("d") <= pa.scalar(dt.date(2024, 1, 31)))
    cases = [  # (partitioning, where, filter, its part over keys alone)
        (None, "d >= '2024-01-06'", pc.field("d") >= "2024-01-06", None),  # a date is a string unless typed
        (None, "k = 7", pc.field("k") == 7, None),  # "007" is the int32 7, as pyarrow parses it
        (schema, "d >= DATE '2024-01-06'", pc.field("d") >= pa.scalar(dt.date(2024, 1, 6)), None),
        (schema, "d BETWEEN DATE '2024-01-01' AND DATE '2024-01-31' AND px > 100", jan & (pc.field("px") > 100),
         jan),
        (schema, "d IS NULL OR k > 5", pc.field("d").is_null() | (pc.field("k") > 5), None),
        (schema, "NOT (k IN (3, 7))", ~pc.field("k").isin(pa.array([3, 7], pa.int64())), None),
    ]
    for partitioning, where, expr, key_expr in cases:
        ref = inferred if partitioning is None else explicit
        rec = RecordingFS(fsspec.filesystem("file"))
        with qdbpm.open_table(root, rec, partitioning="hive" if partitioning is None else partitioning) as table:
            assert table.partitioning == ("hive" if partitioning is None else schema)
            keys = table.partition_keys
            assert keys.schema == pa.schema([f for f in ref.schema if f.name in ("d", "k")])
            got = table.scan(where).to_table()
            want = ref.to_table(filter=expr)
            assert got.schema == want.schema and sorted_rows(got) == sorted_rows(want), where
            # the partitions whose keys satisfy the key part: the only _pm opened
            at = pads.dataset(keys.append_column("at", pa.array(range(keys.num_rows)))) \
                .to_table(filter=expr if key_expr is None else key_expr).column("at").to_pylist()
            survivors = {table.partitions[i] for i in at}
            assert rec.pm_partitions(table.root) == (survivors or {table.partitions[0]}), where
    # a value the schema cannot parse: refused at open, naming the partition
    with pytest.raises(PmError, match="d=2024-01-05/k=007"):
        qdbpm.open_table(root, partitioning=pa.schema([("k", pa.int64()), ("d", pa.int8())]))
    with pytest.raises(PmError, match="partitioning"):
        qdbpm.open_table(root, partitioning="directory")


def test_a_key_named_like_a_file_column_stays_the_files_even_of_another_type(tmp_path):
    # the demo's layout: ts=YYYY-MM-DD directories (a string key) over a ts timestamp column
    files = []
    for day in range(3):
        d = tmp_path / "t" / f"ts=2024-03-0{day + 2}"
        d.mkdir(parents=True)
        write_data_file(str(d / "data.parquet"), day)
        files.append(str(d / "data.parquet"))
    ref = pads.dataset(files)
    with qdbpm.open_table(str(tmp_path / "t")) as table:
        assert table.partition_keys.schema == pa.schema([("ts", pa.string())])
        cases = [("ts >= TIMESTAMP '2024-03-02 12:00:00'", pc.field("ts") >= pa.scalar(BASE.replace(day=2, hour=12))),
                 ("ts < '2024-03-03'", pc.field("ts") < pa.scalar(BASE.replace(day=3)))]
        for where, expr in cases:
            got = table.scan(where).to_table()
            want = ref.to_table(filter=expr)
            assert got.schema == want.schema and want.num_rows and sorted_rows(got) == sorted_rows(want), where


def test_a_key_named_like_a_file_column_stays_the_files(tmp_path):
    # qty=<n> directories over files that have a qty column: the file's values win, the key is
    # not a column and prunes nothing; the other key still does
    files = []
    for n, part in enumerate(["qty=1/sym=a", "qty=2/sym=b", "qty=3/sym=a"]):
        d = tmp_path.joinpath("t", *part.split("/"))
        d.mkdir(parents=True)
        write_data_file(str(d / "data.parquet"), n)
        files.append(str(d / "data.parquet"))
    root = str(tmp_path / "t")
    rec = RecordingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(root, rec) as table:
        scan = table.scan("qty = 1 AND sym = 'a'")
        assert scan.schema.names == pq.read_schema(files[0]).names + ["sym"]
        want = pads.dataset([files[0], files[2]]).to_table(filter=pc.field("qty") == 1)  # sym = 'a'
        assert want.num_rows and sorted_rows(scan.to_table().drop(["sym"])) == sorted_rows(want)
        assert rec.pm_partitions(table.root) == {"qty=1/sym=a", "qty=3/sym=a"}


def test_many_key_atoms_and_constant_predicates(hive_root):
    ref = pads.dataset(hive_root, partitioning="hive")
    # 45 key atoms: past the 39 whose patterns fit one integer
    where = " OR ".join([f"(day = {d} AND sym <> 'x{d}')" for d in range(4, 48)] + ["sym IS NULL AND qty > 5"])
    expr = (pc.field("day").isin(pa.array(range(4, 48), pa.int32())) & pc.field("sym").is_valid()) | \
        (pc.field("sym").is_null() & (pc.field("qty") > 5))
    rec = RecordingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(hive_root, rec) as table:
        got = table.scan(where).to_table()
        assert sorted_rows(got) == sorted_rows(ref.to_table(filter=expr))
        assert rec.pm_partitions(table.root) == {partition_name(d, s) for d, s in hive_parts() if d == 12 or s is None}
        assert table.scan("TRUE").count() == len(table.partitions) * ROWS
        assert table.scan("FALSE").count() == 0
