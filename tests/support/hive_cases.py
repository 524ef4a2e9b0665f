"""A hive-partitioned test table and random predicates over its keys and file columns, shared by
tests/table/test_partition_keys*.py.

pyarrow-written files laid out as `day=<int>/sym=<string>` directories (a URL-encoded value and
`__HIVE_DEFAULT_PARTITION__`, a null, among them), each with its `_pm`. A predicate is one tree
mixing key and file columns under AND / OR / NOT, rendered for qdbpm (SQL), DuckDB (SQL) and
pyarrow (Expression); `may_be_true` decides by brute force, over every value the non-key atoms
could take, which partitions the keys leave.
"""

import datetime as dt
import itertools
import urllib.parse

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import qdbpm

DAYS = [1, 2, 3, 12]
SYMS = ["a", "b c", None]  # "b c" is the directory sym=b%20c, None is __HIVE_DEFAULT_PARTITION__
ROWS, RG = 240, 50  # five row groups per file, the last of 40 rows
N_PREDICATES = 150
BASE = dt.datetime(2024, 3, 1)


def _segment(v):
    return "__HIVE_DEFAULT_PARTITION__" if v is None else urllib.parse.quote(str(v))


def hive_parts():
    """The (day, sym) of every partition, in file-number order."""
    # not the full cross product: (12, None) and (3, "a") are missing, so no key value is a
    # rectangle of the others
    return [(d, s) for d in DAYS for s in SYMS if (d, s) not in ((12, None), (3, "a"))]


def write_data_file(path, k):
    """File number k (row ids k * 10_000 + i), with its `_pm`."""
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


def write_hive_table(root):
    """Every partition of hive_parts() under `root` (a pathlib.Path): str(root)."""
    for k, (d, s) in enumerate(hive_parts()):
        part = root / f"day={d}" / f"sym={_segment(s)}"
        part.mkdir(parents=True)
        write_data_file(str(part / "data.parquet"), k)
    return str(root)


def partition_name(d, s):
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


def random_tree(rng, depth=0):
    r = rng.random()
    if depth >= 3 or r < 0.35:
        return _atom(rng)
    if r < 0.5:
        return ("not", random_tree(rng, depth + 1))
    return (rng.choice(["and", "or"]), [random_tree(rng, depth + 1) for _ in range(rng.randint(2, 3))])


def render(node, which):
    """which: 1 qdbpm SQL, 2 DuckDB SQL, 3 pyarrow Expression."""
    if node[0] == "atom":
        return node[which]
    if node[0] == "not":
        inner = render(node[1], which)
        return ~inner if which == 3 else f"NOT ({inner})"
    kids = [render(k, which) for k in node[1]]
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


def atoms_of(node):
    if node[0] == "atom":
        return [node]
    if node[0] == "not":
        return atoms_of(node[1])
    return [a for k in node[1] for a in atoms_of(k)]


def may_be_true(node, d, s) -> bool:
    """Brute force: some value of every non-key atom (TRUE, FALSE or NULL, each on its own) makes
    the predicate TRUE in partition (d, s)."""
    atoms = atoms_of(node)
    env = {id(a): a[4](d, s) for a in atoms if a[4] is not None}
    free = [a for a in atoms if a[4] is None]
    for vals in itertools.product([True, False, None], repeat=len(free)):
        env.update({id(a): v for a, v in zip(free, vals)})
        if _kleene(node, env) is True:
            return True
    return False


def duck_rids(root, where):
    """DuckDB's sorted row ids under `where` over the hive table at `root`."""
    con = duckdb.connect()
    try:
        src = f"read_parquet('{root}/**/data.parquet', hive_partitioning=true, hive_types={{'day': 'INTEGER'}})"
        return sorted(r[0] for r in con.execute(f"SELECT rid FROM {src} WHERE {where}").fetchall())
    finally:
        con.close()


def sorted_rows(t):
    """A table's rows by row id, to compare with another reader's."""
    return t.sort_by("rid").to_pylist()
