"""Hive partition keys as typed columns that prune whole partitions before any `_pm` is opened.

A pyarrow-written table laid out as `day=<int>/sym=<string>` directories (a URL-encoded value and
`__HIVE_DEFAULT_PARTITION__`, a null, among them). For a fixed seeded set of random predicates
mixing key and file columns under AND / OR / NOT: `Table.scan` returns exactly what
`pyarrow.dataset.dataset(root, partitioning="hive")` returns with the same filter (same schema, key
columns appended) and DuckDB's `read_parquet(..., hive_partitioning=true)` the same row ids;
`count()` agrees; no row group holding a match is skipped and a full one holds no non-match; and a
recording filesystem shows that the `_pm` opened are exactly those of the partitions the keys
leave, computed here by brute force over every value the non-key atoms could take. The same holds
on SeaweedFS, counted on the wire.
"""

import datetime as dt
import itertools
import os
import random
import urllib.parse

import duckdb
import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.errors import PmError, PredicateError

from support.table_files import upload

DAYS = [1, 2, 3, 12]
SYMS = ["a", "b c", None]  # "b c" is the directory sym=b%20c, None is __HIVE_DEFAULT_PARTITION__
ROWS, RG = 240, 50  # five row groups per file, the last of 40 rows
N_PREDICATES = 150
BASE = dt.datetime(2024, 3, 1)


def _segment(v):
    return "__HIVE_DEFAULT_PARTITION__" if v is None else urllib.parse.quote(str(v))


def _parts():
    # not the full cross product: (12, None) and (3, "a") are missing, so no key value is a
    # rectangle of the others
    return [(d, s) for d in DAYS for s in SYMS if (d, s) not in ((12, None), (3, "a"))]


def _write(path, k):
    rng = np.random.default_rng(k)
    i = np.arange(ROWS)
    t = pa.table({
        "rid": pa.array(k * 10_000 + i, pa.int64()),
        "ts": pa.array([BASE + dt.timedelta(hours=k * 24 + int(j) // 10) for j in i], pa.timestamp("us")),
        "px": pa.array(np.round(rng.normal(100, 10, ROWS) * 4) / 4, mask=rng.random(ROWS) < 0.1),
        "qty": pa.array(rng.integers(-20, 20, ROWS) + (i // RG) * 3, pa.int64()),
        "s": pa.array([None if v < 0.2 else f"x{int(v * 10)}" for v in rng.random(ROWS)], pa.string()),
    })
    pq.write_table(t, path, row_group_size=RG)
    qdbpm.generate(path)


@pytest.fixture(scope="module")
def hive_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("hive")
    for k, (d, s) in enumerate(_parts()):
        part = root / f"day={d}" / f"sym={_segment(s)}"
        part.mkdir(parents=True)
        _write(str(part / "data.parquet"), k)
    return str(root)


class RecordingFS:
    """An fsspec filesystem that records every path it fetches or opens."""

    def __init__(self, fs):
        self.fs = fs
        self.paths = []

    def cat(self, path, *args, **kwargs):
        self.paths.extend([path] if isinstance(path, str) else path)
        return self.fs.cat(path, *args, **kwargs)

    def cat_file(self, path, *args, **kwargs):
        self.paths.append(path)
        return self.fs.cat_file(path, *args, **kwargs)

    def open(self, path, *args, **kwargs):
        self.paths.append(path)
        return self.fs.open(path, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def pm_partitions(self, root) -> set:
        base = self.fs._strip_protocol(root).rstrip("/")
        return {os.path.relpath(os.path.dirname(self.fs._strip_protocol(p)), base).replace(os.sep, "/")
                for p in self.paths if p.endswith("/_pm")}


def _partition_name(d, s):
    return f"day={d}/sym={_segment(s)}"


# --- predicates: one tree, rendered for qdbpm (SQL), DuckDB (SQL) and pyarrow (Expression) --------
# A node is ("and" | "or", [nodes]), ("not", node) or ("atom", qdbpm_sql, duckdb_sql, expression,
# key_truth): key_truth(day, sym) gives a key atom's value in a partition (True / False / None, in
# qdbpm's and pyarrow's semantics), None for an atom over file columns.


def _in_truth(v, values):
    # IN never yields null (pyarrow's is_in): a null matches only a listed null
    return (None in values) if v is None else v in values


def _cmp(v, op, c):
    return None if v is None else {"=": v == c, "<>": v != c, "<": v < c, "<=": v <= c, ">": v > c, ">=": v >= c}[op]


TYPES = {"day": pa.int32(), "sym": pa.string(), "s": pa.string()}
PA_OP = {"=": "__eq__", "<>": "__ne__", "<": "__lt__", "<=": "__le__", ">": "__gt__", ">=": "__ge__"}


def _sql_lit(v):
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    return repr(v)


def _cmp_atom(name, op, v, key):
    sql = f"{name} {op} {_sql_lit(v)}"
    expr = getattr(pc.field(name), PA_OP[op])(pa.scalar(v, pa.timestamp("us")) if isinstance(v, dt.datetime) else v)
    return ("atom", sql, sql, expr, (lambda d, s: _cmp(d if name == "day" else s, op, v)) if key else None)


def _in_atom(name, values, negated, key):
    listed = ", ".join("NULL" if v is None else _sql_lit(v) for v in values)
    sql = f"{name} {'NOT ' if negated else ''}IN ({listed})"
    # DuckDB's IN is null for a null value; qdbpm's (pyarrow's) never is
    duck = f"coalesce({name} {'NOT ' if negated else ''}IN ({listed}), {'TRUE' if negated else 'FALSE'})"
    if None in values:
        duck = f"({name} IS {'NOT ' if negated else ''}NULL {'AND' if negated else 'OR'} {duck})"
    expr = pc.field(name).isin(pa.array([v for v in values if v is not None], TYPES[name]))
    if None in values:
        expr = expr | pc.field(name).is_null()
    truth = None
    if key:
        def truth(d, s):
            r = _in_truth(d if name == "day" else s, values)
            return not r if negated else r
    return ("atom", sql, duck, ~expr if negated else expr, truth)


def _null_atom(name, negated, key):
    sql = f"{name} IS {'NOT ' if negated else ''}NULL"
    expr = pc.field(name).is_valid() if negated else pc.field(name).is_null()
    truth = (lambda d, s: ((d if name == "day" else s) is None) != negated) if key else None
    return ("atom", sql, sql, expr, truth)


def _between_atom(name, lo, hi, key):
    sql = f"{name} BETWEEN {_sql_lit(lo)} AND {_sql_lit(hi)}"
    f = pc.field(name)
    expr = (f >= lo) & (f <= hi)
    truth = None
    if key:
        def truth(d, s):
            v = d if name == "day" else s
            return None if v is None else lo <= v <= hi
    return ("atom", sql, sql, expr, truth)


def _atom(rng):
    kind = rng.random()
    if kind < 0.3:  # day (int32 key)
        r = rng.random()
        if r < 0.5:
            return _cmp_atom("day", rng.choice(list(PA_OP)), rng.choice([0, 1, 2, 3, 5, 12, 13]), True)
        if r < 0.7:
            return _in_atom("day", rng.sample([1, 2, 3, 7, 12, None], rng.randint(1, 3)), rng.random() < 0.4, True)
        if r < 0.85:
            lo = rng.choice([0, 1, 2, 3])
            return _between_atom("day", lo, lo + rng.choice([0, 1, 9]), True)
        return _null_atom("day", rng.random() < 0.5, True)
    if kind < 0.55:  # sym (string key with a null)
        r = rng.random()
        if r < 0.45:
            return _cmp_atom("sym", rng.choice(["=", "<>", "<", ">="]), rng.choice(["a", "b c", "b", "zz"]), True)
        if r < 0.75:
            return _in_atom("sym", rng.sample(["a", "b c", "q", None], rng.randint(1, 3)), rng.random() < 0.4, True)
        return _null_atom("sym", rng.random() < 0.5, True)
    r = rng.random()  # file columns
    if r < 0.08:  # a key against a file column: decided by neither keys nor statistics alone
        op = rng.choice(["<", ">=", "="])
        sql = f"day {op} qty"
        return ("atom", sql, sql, getattr(pc.field("day"), PA_OP[op])(pc.field("qty")), None)
    if r < 0.3:
        return _cmp_atom("px", rng.choice(list(PA_OP)), rng.choice([85.0, 95.5, 100.0, 104.25, 120.0]), False)
    if r < 0.5:
        return _cmp_atom("qty", rng.choice(list(PA_OP)), rng.randint(-15, 25), False)
    if r < 0.65:
        lo = rng.randint(-10, 15)
        return _between_atom("qty", lo, lo + rng.randint(0, 10), False)
    if r < 0.8:
        return _cmp_atom("ts", rng.choice([">=", "<"]), BASE + dt.timedelta(hours=rng.randint(0, 24 * 12)), False)
    if r < 0.9:
        return _in_atom("s", rng.sample(["x1", "x5", "x9", None], rng.randint(1, 2)), rng.random() < 0.4, False)
    return _null_atom("s", rng.random() < 0.5, False)


def _tree(rng, depth=0):
    r = rng.random()
    if depth >= 3 or r < 0.35:
        return _atom(rng)
    if r < 0.5:
        return ("not", _tree(rng, depth + 1))
    return (rng.choice(["and", "or"]), [_tree(rng, depth + 1) for _ in range(rng.randint(2, 3))])


def _render(node, which):
    """which: 1 qdbpm SQL, 2 DuckDB SQL, 3 pyarrow Expression."""
    if node[0] == "atom":
        return node[which]
    if node[0] == "not":
        inner = _render(node[1], which)
        return ~inner if which == 3 else f"NOT ({inner})"
    kids = [_render(k, which) for k in node[1]]
    if which == 3:
        out = kids[0]
        for k in kids[1:]:
            out = (out & k) if node[0] == "and" else (out | k)
        return out
    return "(" + f" {node[0].upper()} ".join(kids) + ")"


def _kleene(node, env):
    """The node's value, atoms' values from env (id(atom) -> True / False / None)."""
    if node[0] == "atom":
        return env[id(node)]
    if node[0] == "not":
        v = _kleene(node[1], env)
        return None if v is None else not v
    vals = [_kleene(k, env) for k in node[1]]
    if node[0] == "and":
        return False if False in vals else None if None in vals else True
    return True if True in vals else None if None in vals else False


def _atoms(node):
    if node[0] == "atom":
        return [node]
    if node[0] == "not":
        return _atoms(node[1])
    return [a for k in node[1] for a in _atoms(k)]


def _may_be_true(node, d, s) -> bool:
    """Brute force: some value of every non-key atom (TRUE, FALSE or NULL, each on its own) makes
    the predicate TRUE in partition (d, s)."""
    atoms = _atoms(node)
    env = {id(a): a[4](d, s) for a in atoms if a[4] is not None}
    free = [a for a in atoms if a[4] is None]
    for vals in itertools.product([True, False, None], repeat=len(free)):
        env.update({id(a): v for a, v in zip(free, vals)})
        if _kleene(node, env) is True:
            return True
    return False


def _duck_rids(root, where):
    con = duckdb.connect()
    try:
        src = f"read_parquet('{root}/**/data.parquet', hive_partitioning=true, hive_types={{'day': 'INTEGER'}})"
        return sorted(r[0] for r in con.execute(f"SELECT rid FROM {src} WHERE {where}").fetchall())
    finally:
        con.close()


def _rows(t):
    return t.sort_by("rid").to_pylist()


# --- tests ------------------------------------------------------------------------------------------


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
        assert got.schema == want.schema and _rows(got) == _rows(want)
        # columns= may name keys, in any order
        got = table.scan("qty > 0", ["sym", "rid", "day"]).to_table()
        assert got.schema.names == ["sym", "rid", "day"]
        assert _rows(got) == _rows(ref.to_table(columns=["sym", "rid", "day"], filter=pc.field("qty") > 0))
        # schema= of the file columns: they are cast, the keys keep their types
        cast = pa.schema([pa.field("rid", pa.float64()), pa.field("ts", pa.timestamp("ms")),
                          pa.field("px", pa.float32()), pa.field("qty", pa.int32()), pa.field("s", pa.large_string())])
        got = table.scan("day = 2 AND qty > 0", schema=cast).to_table()
        want = ref.to_table(filter=(pc.field("day") == 2) & (pc.field("qty") > 0))
        assert got.schema == pa.schema(list(cast) + [want.schema.field("day"), want.schema.field("sym")])
        assert _rows(got) == _rows(want.cast(got.schema))
        # footer-less strict mode: same rows, key columns too
        strict = table.scan("day = 2 AND qty > 0", footer=False).to_table()
        assert strict.schema.names == want.schema.names and strict.column("rid").to_pylist() == \
            table.scan("day = 2 AND qty > 0").to_table().column("rid").to_pylist()
    with qdbpm.open_table(hive_root, partitioning=None) as table:
        assert table.partition_keys.num_columns == 0
        assert table.scan().schema == pq.read_schema(os.path.join(hive_root, "day=1", "sym=a", "data.parquet"))
        with pytest.raises(PredicateError, match="day"):
            table.scan("day = 1")


def test_random_predicates_equal_pyarrow_and_duckdb_and_open_only_surviving_pm(hive_root):
    rng = random.Random(1515)
    ref = pads.dataset(hive_root, partitioning="hive")
    parts = {_partition_name(d, s): (d, s) for d, s in _parts()}
    seen_pruned = seen_mixed = 0
    for i in range(N_PREDICATES):
        node = _tree(rng)
        sql, duck, expr = _render(node, 1), _render(node, 2), _render(node, 3)
        want = ref.to_table(filter=expr)
        rec = RecordingFS(fsspec.filesystem("file"))
        with qdbpm.open_table(hive_root, rec) as table:
            scan = table.scan(sql)
            got = scan.to_table()
            what = f"case {i}: {sql}"
            assert got.schema == want.schema, what
            assert _rows(got) == _rows(want), what
            assert sorted(got.column("rid").to_pylist()) == _duck_rids(hive_root, duck), what
            assert scan.count() == want.num_rows, what
            # the _pm opened: those of the partitions the keys leave (the first one's when none)
            expect = {p for p, (d, s) in parts.items() if _may_be_true(node, d, s)}
            opened = rec.pm_partitions(table.root)
            assert opened == (expect or {table.partitions[0]}), what
            seen_pruned += len(expect) < len(parts)
            seen_mixed += len(expect) > 0 and any(a[4] is None for a in _atoms(node)) and \
                any(a[4] is not None for a in _atoms(node))
            # no row group with a match is skipped; a full one holds no non-match
            rgs = scan.row_groups().to_pylist()
            kept = {(r["partition"], r["row_group"]): r for r in rgs}
            hits = {}  # (partition, row group) -> matching rows, from the row ids
            for rid in got.column("rid").to_pylist():
                k, j = divmod(rid, 10_000)
                key = (_partition_name(*_parts()[k]), j // RG)
                hits[key] = hits.get(key, 0) + 1
            assert set(hits) <= set(kept), what
            for key, r in kept.items():
                if r["full"]:
                    assert hits.get(key, 0) == r["num_rows"], (what, key)
            assert {r["partition"] for r in rgs} <= expect, what
    # the generator exercised what it should
    assert seen_pruned >= N_PREDICATES // 4 and seen_mixed >= 20, (seen_pruned, seen_mixed)


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
        assert _rows(ds.to_table(filter=expr, columns=["rid", "qty", "day"])) == \
            _rows(ref.to_table(filter=expr, columns=["rid", "qty", "day"])) == _rows(scan.to_table())
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
        _write(str(d / "data.parquet"), n)
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
            assert got.schema == want.schema and _rows(got) == _rows(want), where
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
        _write(str(d / "data.parquet"), day)
        files.append(str(d / "data.parquet"))
    ref = pads.dataset(files)
    with qdbpm.open_table(str(tmp_path / "t")) as table:
        assert table.partition_keys.schema == pa.schema([("ts", pa.string())])
        cases = [("ts >= TIMESTAMP '2024-03-02 12:00:00'", pc.field("ts") >= pa.scalar(BASE.replace(day=2, hour=12))),
                 ("ts < '2024-03-03'", pc.field("ts") < pa.scalar(BASE.replace(day=3)))]
        for where, expr in cases:
            got = table.scan(where).to_table()
            want = ref.to_table(filter=expr)
            assert got.schema == want.schema and want.num_rows and _rows(got) == _rows(want), where


def test_a_key_named_like_a_file_column_stays_the_files(tmp_path):
    # qty=<n> directories over files that have a qty column: the file's values win, the key is
    # not a column and prunes nothing; the other key still does
    files = []
    for n, part in enumerate(["qty=1/sym=a", "qty=2/sym=b", "qty=3/sym=a"]):
        d = tmp_path.joinpath("t", *part.split("/"))
        d.mkdir(parents=True)
        _write(str(d / "data.parquet"), n)
        files.append(str(d / "data.parquet"))
    root = str(tmp_path / "t")
    rec = RecordingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(root, rec) as table:
        scan = table.scan("qty = 1 AND sym = 'a'")
        assert scan.schema.names == pq.read_schema(files[0]).names + ["sym"]
        want = pads.dataset([files[0], files[2]]).to_table(filter=pc.field("qty") == 1)  # sym = 'a'
        assert want.num_rows and _rows(scan.to_table().drop(["sym"])) == _rows(want)
        assert rec.pm_partitions(table.root) == {"qty=1/sym=a", "qty=3/sym=a"}


def test_s3_fetches_only_the_pm_of_partitions_the_keys_leave(s3_server, s3_bucket, s3_proxy, hive_root):
    upload(s3_server.filesystem(), hive_root, f"{s3_bucket}/t")
    rng = random.Random(15)
    parts = {_partition_name(d, s): (d, s) for d, s in _parts()}
    # predicates whose keys leave some partitions but not all, and one that leaves none
    left = [(c, sum(_may_be_true(c, d, s) for d, s in parts.values())) for c in (_tree(rng) for _ in range(60))]
    cases = [c for c, n in left if 0 < n < len(parts)][:5] + [c for c, n in left if n == 0][:1]
    assert len(cases) == 6
    opts = s3_proxy.storage_options(s3_server)
    prefix = f"/{s3_bucket}/t/"
    for node in cases:
        sql = _render(node, 1)
        s3_proxy.reset()
        with qdbpm.open_table(f"s3://{s3_bucket}/t", storage_options=opts) as table:
            got = table.scan(sql).to_table()
        fetched = {urllib.parse.unquote(urllib.parse.urlsplit(path).path)[len(prefix):-len("/_pm")]
                   for kind, path, _, _ in s3_proxy.requests if kind == "GET" and path.split("?")[0].endswith("/_pm")}
        expect = {p for p, (d, s) in parts.items() if _may_be_true(node, d, s)}
        assert fetched == (expect or {min(parts)}), sql
        with qdbpm.open_table(hive_root) as local:
            want = local.scan(sql).to_table()
        assert got.schema == want.schema and _rows(got) == _rows(want), sql


def test_many_key_atoms_and_constant_predicates(hive_root):
    ref = pads.dataset(hive_root, partitioning="hive")
    # 45 key atoms: past the 39 whose patterns fit one integer
    where = " OR ".join([f"(day = {d} AND sym <> 'x{d}')" for d in range(4, 48)] + ["sym IS NULL AND qty > 5"])
    expr = (pc.field("day").isin(pa.array(range(4, 48), pa.int32())) & pc.field("sym").is_valid()) | \
        (pc.field("sym").is_null() & (pc.field("qty") > 5))
    rec = RecordingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(hive_root, rec) as table:
        got = table.scan(where).to_table()
        assert _rows(got) == _rows(ref.to_table(filter=expr))
        assert rec.pm_partitions(table.root) == {_partition_name(d, s) for d, s in _parts() if d == 12 or s is None}
        assert table.scan("TRUE").count() == len(table.partitions) * ROWS
        assert table.scan("FALSE").count() == 0
