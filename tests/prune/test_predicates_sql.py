"""SQL predicates as users write them: bare BOOLEAN columns, NOT flag, IS [NOT] TRUE / FALSE, and
SQL identifiers (unquoted: case-insensitive when unique, an exact-case match winning; quoted:
exact), against DuckDB evaluating the same WHERE text over the same Parquet files.

Tables written by pyarrow and by DuckDB, several row groups each, BOOLEAN columns with nulls and
row groups that are all TRUE / all FALSE / all NULL, mixed-case names; `_pm` from qdbpm.generate.
For a fixed seeded set of predicates: pruning never drops a row group holding a row DuckDB
returns, and read_table returns exactly DuckDB's rows.
"""

import random

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import col, parse
from qdbpm.errors import PredicateError
from qdbpm.prune.arrow import filter_table
from qdbpm.sync.generate import generate

# Names unique case-insensitively, so DuckDB (which folds even quoted names) is the SQL truth.
KINDS = {"L_OrderKey": "int", "x": "int", "Px": "float", "flag": "bool", "Side": "bool", "Sym": "str"}
NULLABLE = {"Px", "flag", "Side"}  # IN stays off these: qdbpm's IN never yields null (expr docs)
RG_ROWS = 40
BOOL_MODES = ("true", "false", "null", "mixed", "mixed_null")
N_PREDICATES = 300


def _bools(rng, mode, n):
    if mode in ("true", "false"):
        return [mode == "true"] * n
    if mode == "null":
        return [None] * n
    vals = [bool(v) for v in rng.random(n) < 0.5]
    if mode == "mixed_null":
        vals = [None if rng.random() < 0.3 else v for v in vals]
    return vals


def _pyarrow_partition(path, part, n_rgs=12):
    rng = np.random.default_rng(part)
    n = n_rgs * RG_ROWS
    rid = np.arange(n) + part * 10_000
    rg = np.arange(n) // RG_ROWS
    flag, side = [], []
    for r in range(n_rgs):
        flag += _bools(rng, BOOL_MODES[(r + part) % 5], RG_ROWS)
        side += _bools(rng, BOOL_MODES[(2 * r + part) % 5], RG_ROWS)
    px = np.round((rg * 4 + rng.random(n) * 8) * 4) / 4  # quarters: no rounding ties with literals
    t = pa.table({
        "rid": pa.array(rid, pa.int64()),
        "L_OrderKey": pa.array(rng.integers(0, 1000, n) // (rg + 1) * (rg + 1), pa.int64()),
        "x": pa.array(np.arange(n) // 4 - 50 + part * 10, pa.int32()),
        "Px": pa.array(px, mask=rng.random(n) < 0.15),
        "flag": pa.array(flag, pa.bool_()),
        "Side": pa.array(side, pa.bool_()),
        "Sym": pa.array([f"S{(r + part) % 6}" if i % 7 else f"S{i % 6}" for i, r in enumerate(rg)]),
    })
    pq.write_table(t, path, row_group_size=RG_ROWS)


def _duckdb_partition(path, part):
    # DuckDB's row groups are multiples of its 2048-row vectors; one thread keeps them in order.
    con = duckdb.connect()
    con.execute("SET threads TO 1")
    con.execute(f"""copy (select
        (i + {part * 100_000})::bigint as rid,
        (i * 7919 % 1000)::bigint as L_OrderKey,
        (i // 64 - 50)::integer as x,
        case when i % 9 = 0 then null else ((i // 2048) * 10 + (i % 37) / 4.0)::double end as Px,
        case i // 2048 when 0 then true when 1 then false when 2 then null
             else (case when i % 5 = 0 then null else i % 3 = 0 end) end as flag,
        case when (i // 2048 + {part}) % 2 = 0 then (i % 2 = 0) else null end as Side,
        'S' || ((i // 1000 + i % 3) % 6)::varchar as Sym
        from range(0, 5 * 2048 + 700) t(i) order by i)
        to '{path}' (format parquet, row_group_size 2048)""")
    con.close()


def _build(root, write, parts):
    files = []
    for p in parts:
        d = root / f"p{p}"
        d.mkdir(parents=True)
        f = str(d / "data.parquet")
        write(f, p)
        generate(f)
        files.append(f)
    return files


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    base = tmp_path_factory.mktemp("sqlpred")
    out = {}
    for label, write, parts in (("pyarrow", _pyarrow_partition, (0, 1, 2)), ("duckdb", _duckdb_partition, (0, 1))):
        root = base / label
        files = _build(root, write, parts)
        # rid -> (partition, row group), from the files' own row-group layout
        where = {}
        for p, f in zip(parts, files):
            pf = pq.ParquetFile(f)
            assert pf.num_row_groups >= 5, (label, pf.num_row_groups)
            for r in range(pf.num_row_groups):
                for rid in pf.read_row_group(r, columns=["rid"]).column(0).to_pylist():
                    where[rid] = (f"p{p}", r)
        out[label] = (str(root), files, where)
    return out


# --- the predicate generator ----------------------------------------------------------------


def _name(rng, name):
    """The column as SQL text: quoted exactly, or unquoted in a random letter case."""
    if rng.random() < 0.3:
        return f'"{name}"'
    return "".join(ch.upper() if rng.random() < 0.5 else ch.lower() for ch in name)


def _leaf(rng):
    name = rng.choice(sorted(KINDS))
    kind, c = KINDS[name], _name(rng, name)
    if kind == "bool":
        return rng.choice([c, f"NOT {c}", f"{c} = TRUE", f"{c} = FALSE", f"{c} <> TRUE", f"{c} IS TRUE",
                           f"{c} IS NOT TRUE", f"{c} IS FALSE", f"{c} IS NOT FALSE", f"{c} IS NULL",
                           f"{c} IS NOT NULL"])
    if kind == "str":
        vals = [f"'S{k}'" for k in range(7)]
        form = rng.randrange(4)
        if form == 0:
            return f"{c} IN ({', '.join(rng.sample(vals, rng.randint(1, 3)))})"
        if form == 1:
            return f"{c} NOT IN ({', '.join(rng.sample(vals, rng.randint(1, 3)))})"
        return f"{c} {rng.choice(['=', '<>', '<', '<=', '>', '>='])} {rng.choice(vals)}"
    lo_hi = {"L_OrderKey": (-10, 1010), "x": (-60, 120), "Px": (-5, 60)}[name]

    def lit():
        v = rng.randint(*lo_hi)
        return str(v) if rng.random() < 0.7 else f"{v}.5"

    form = rng.randrange(6)
    if form == 0:
        a, b = sorted([rng.randint(*lo_hi), rng.randint(*lo_hi)])  # SQL: reversed bounds match nothing
        return f"{c} {'NOT ' if rng.random() < 0.3 else ''}BETWEEN {a} AND {b}"
    if form == 1 and name not in NULLABLE:
        vals = sorted({rng.randint(*lo_hi) for _ in range(rng.randint(1, 4))})
        return f"{c} {'NOT ' if rng.random() < 0.3 else ''}IN ({', '.join(map(str, vals))})"
    if form == 2:
        return f"{c} IS {'NOT ' if rng.random() < 0.5 else ''}NULL"
    return f"{c} {rng.choice(['=', '<>', '<', '<=', '>', '>='])} {lit()}"


def _predicate(rng, depth=3):
    r = rng.random()
    if depth == 0 or r < 0.35:
        return _leaf(rng)
    if r < 0.5:
        return f"NOT ({_predicate(rng, depth - 1)})"
    op = " AND " if r < 0.75 else " OR "
    return "(" + op.join(_predicate(rng, depth - 1) for _ in range(rng.randint(2, 3))) + ")"


FIXED = ["flag", "NOT flag", "(x > 1 OR px < 20) AND NOT side", "FLAG", '"flag"', "NOT \"Side\" OR FLAG",
         "l_orderkey = 21", "L_ORDERKEY < 100 AND NOT flag", 'flag IS NOT TRUE AND "Px" > 10', "side IS FALSE",
         "Flag = TRUE OR sIDE <> FALSE", "NOT (flag OR side)", "NOT flag AND NOT side", "flag IS NOT FALSE",
         "flag = 1", "flag > 0", "side = 2", "NOT side <> 0", "flag BETWEEN FALSE AND TRUE", "flag <= FALSE"]


def _predicates(label):
    rng = random.Random(f"qdbpm-sql-{label}")
    return FIXED + [_predicate(rng) for _ in range(N_PREDICATES - len(FIXED))]


# --- against DuckDB -------------------------------------------------------------------------


@pytest.mark.parametrize("label", ["pyarrow", "duckdb"])
def test_prune_and_read_table_match_duckdb(tables, label):
    root, files, where = tables[label]
    con = duckdb.connect()
    src = "read_parquet([" + ", ".join(f"'{f}'" for f in files) + "])"
    names = [d[0] for d in con.execute(f"select * from {src} limit 0").description]
    pruned = matched = empty = 0
    with qdbpm.open_table(root) as table:
        for sql in _predicates(label):
            want = sorted(con.execute(f"select * from {src} where {sql}").fetchall())
            masks = table.prune_masks(sql)
            for row in want:
                part, rg = where[row[0]]
                assert masks[part][rg], f"{sql!r}: pruned {part} row group {rg} holding rid {row[0]}"
            pruned += sum(int((~m).sum()) for m in masks.values())
            got = qdbpm.read_table(root, where=sql)
            assert got.column_names == names
            got = sorted(tuple(r[n] for n in names) for r in got.to_pylist())
            assert got == want, f"{sql!r}: read_table {len(got)} rows, DuckDB {len(want)}"
            matched += bool(want)
            empty += not want
    # The set is not vacuous: predicates both select and reject rows, and pruning does prune.
    assert matched > N_PREDICATES // 3 and empty > 10, (matched, empty)
    assert pruned > N_PREDICATES, pruned


def _rg_modes(table, part, column):
    """Per row group of `part`: the set of values of `column` (True / False / None)."""
    pf = pq.ParquetFile(table.parquet_path(part))
    return [set(pf.read_row_group(r, columns=[column]).column(0).to_pylist()) for r in range(pf.num_row_groups)]


@pytest.mark.parametrize("label", ["pyarrow", "duckdb"])
def test_boolean_stats_prune_exactly(tables, label):
    """On BOOLEAN min/max stats, `flag` drops exactly the row groups without a TRUE, NOT flag those
    without a FALSE (a null flag matches neither), IS NOT TRUE only those all TRUE; the Python
    predicate col("flag") == True prunes as the SQL text does."""
    root, _, _ = tables[label]
    with qdbpm.open_table(root) as table:
        for part in table.partitions:
            vals = _rg_modes(table, part, "flag")
            assert {frozenset(v) for v in vals} >= {frozenset({True}), frozenset({False}), frozenset({None})}
            cases = {"flag": [True in v for v in vals], "NOT flag": [False in v for v in vals],
                     "flag IS NOT TRUE": [v != {True} for v in vals],
                     "flag IS FALSE": [False in v for v in vals],
                     "flag IS NOT FALSE": [v != {False} for v in vals]}
            for sql, want in cases.items():
                assert table.prune_masks(sql)[part].tolist() == want, (sql, part)
            assert table.prune_masks(col("flag") == True)[part].tolist() == cases["flag"]  # noqa: E712
            assert table.prune_masks(~(col("flag") == True))[part].tolist() == cases["NOT flag"]  # noqa: E712


# --- identifiers ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clash(tmp_path_factory):
    """Columns "ab" and "AB" (and "Cd"): an unquoted name matching both is ambiguous unless it
    matches one of them exactly."""
    root = tmp_path_factory.mktemp("clash")
    (root / "p").mkdir()
    f = str(root / "p" / "data.parquet")
    n = 400
    t = pa.table({"ab": pa.array(np.arange(n) % 10, pa.int64()), "AB": pa.array(np.arange(n) // 40, pa.int64()),
                  "Cd": pa.array(np.arange(n) % 3 == 0)})
    pq.write_table(t, f, row_group_size=40)
    generate(f)
    return str(root), t


def _brute(t, column, value):
    return t.filter(pc.equal(t[column], value))


@pytest.mark.parametrize("sql,column", [("ab = 3", "ab"), ("AB = 3", "AB"), ('"ab" = 3', "ab"), ('"AB" = 3', "AB")])
def test_exact_case_match_wins(clash, sql, column):
    root, t = clash
    want = _brute(t, column, 3)
    assert qdbpm.read_table(root, where=sql).equals(want)
    with qdbpm.open_table(root) as table:
        mask = table.prune_masks(sql)["p"]
    rgs = np.arange(len(t)) // 40
    held = set(rgs[pc.equal(t[column], 3).to_numpy(zero_copy_only=False)].tolist())
    assert held and all(mask[r] for r in held)
    if column == "AB":
        assert mask.sum() == 1  # AB's row groups are value ranges: the other column would keep all


@pytest.mark.parametrize("sql", ["aB = 3", "Ab IS NULL", "NOT aB", "cd OR aB IN (1, 2)"])
def test_ambiguous_unquoted_name_is_an_error_naming_candidates(clash, sql):
    root, t = clash
    with qdbpm.open_table(root) as table:
        with pytest.raises(PredicateError, match='ambiguous.*"AB", "ab"'):
            table.prune_masks(sql)
    with pytest.raises(PredicateError, match='ambiguous.*"AB", "ab"'):
        qdbpm.read_table(root, where=sql)
    with pytest.raises(PredicateError, match='ambiguous.*"AB", "ab"'):
        filter_table(t, parse(sql))


def test_quoted_and_python_names_are_exact(clash):
    root, t = clash
    # unquoted cd finds "Cd" (unique case-insensitively); quoted or col() spelled otherwise does not
    want = t.filter(t["Cd"])
    assert qdbpm.read_table(root, where="cd").equals(want)
    assert qdbpm.read_table(root, where=col("Cd") == True).equals(want)  # noqa: E712
    for bad in ['"cd"', '"CD" = TRUE', col("cd") == True, col("aB") == 1]:  # noqa: E712
        with pytest.raises(PredicateError, match="no column"):
            qdbpm.read_table(root, where=bad)
        with qdbpm.open_table(root) as table:
            with pytest.raises(PredicateError, match="no column"):
                table.prune_masks(bad)
        with pytest.raises(PredicateError, match="no column"):
            filter_table(t, parse(bad) if isinstance(bad, str) else bad)


def test_bare_non_boolean_column_is_a_predicate_error(clash):
    root, t = clash
    for sql in ["ab", "NOT AB", "Cd AND ab", "ab IS TRUE", "ab IS NOT FALSE", '"AB" = TRUE']:
        with pytest.raises(PredicateError, match="not BOOLEAN"):
            qdbpm.read_table(root, where=sql)
        with pytest.raises(PredicateError, match="not BOOLEAN"):
            filter_table(t, parse(sql))
