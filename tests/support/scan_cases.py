"""The seeded scan table and predicates shared by the scan tests: a partition writer (rows with
nulls, NaN-free doubles, strings, booleans and a `grp` constant per row group so statistics prove
whole row groups) and a fixed list of SQL predicates with column subsets and batch sizes.
"""

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

DAYS, ROWS, RG = 4, 750, 100  # the last row group of each partition holds 50 rows
DAY_US = 86_400_000_000
BASE = np.datetime64("2024-03-01", "us")
COLUMNS = ["rid", "ts", "grp", "px", "sym", "qty", "flag", "note"]
N_PREDICATES = 60


def write_partition(path, day):
    rng = np.random.default_rng(100 + day)
    i = np.arange(ROWS)
    rg = i // RG
    t = pa.table({
        "rid": pa.array(day * 100_000 + i, pa.int64()),
        "ts": pa.array(BASE + (day * DAY_US + i * (DAY_US // ROWS)).astype("timedelta64[us]"), pa.timestamp("us")),
        "grp": pa.array(rg, pa.int32()),
        "px": pa.array(np.round(rng.normal(100, 10, ROWS) * 4) / 4, mask=rng.random(ROWS) < 0.1),
        "sym": pa.array([f"S{(r + day) % 4}" if k % 7 else f"S{k % 4}" for k, r in enumerate(rg)]),
        "qty": pa.array(rng.integers(-50, 50, ROWS), pa.int64()),
        "flag": pa.array([None if v < 0.1 else v < 0.55 for v in rng.random(ROWS)], pa.bool_()),
        "note": pa.array([None] * (ROWS // 2) + [f"n{k}" for k in range(ROWS - ROWS // 2)], pa.string()),
    })
    pq.write_table(t, path, row_group_size=RG, sorting_columns=[pq.SortingColumn(1)])


def iso(us):
    return str(BASE + np.timedelta64(int(us), "us"))


def atom(rng):
    span = DAYS * DAY_US
    kind = rng.choice(["ts", "ts", "rid", "grp", "grp", "sym", "px", "qty", "flag", "note"])
    if kind == "ts":
        a, b = sorted(rng.randrange(-DAY_US // 4, span + DAY_US // 4) for _ in range(2))
        if rng.random() < 0.5:  # on a row-group boundary: statistics then prove whole row groups
            a, b = (x - x % (DAY_US // ROWS * RG) for x in (a, b))
        return rng.choice([f"ts >= '{iso(a)}'", f"ts < '{iso(b)}'", f"ts BETWEEN '{iso(a)}' AND '{iso(b)}'",
                           f"ts > '{iso(a)}' AND ts <= '{iso(b)}'"])
    if kind == "rid":
        k = rng.randrange(DAYS) * 100_000 + rng.randrange(0, ROWS + 1, RG // 2)
        return rng.choice([f"rid < {k}", f"rid >= {k}"])
    if kind == "grp":
        a, b = sorted(rng.randrange(8) for _ in range(2))
        return rng.choice([f"grp = {a}", f"grp BETWEEN {a} AND {b}", f"grp <> {a}", f"grp IN ({a}, {b})",
                           f"grp > {a}"])
    if kind == "sym":
        return rng.choice([f"sym = 'S{rng.randrange(4)}'", "sym IN ('S0', 'S2')", f"sym >= 'S{rng.randrange(4)}'"])
    if kind == "px":
        v = rng.randrange(320, 480) / 4
        return rng.choice([f"px > {v}", f"px <= {v}", "px IS NULL", "px IS NOT NULL"])
    if kind == "qty":
        a, b = sorted(rng.randrange(-60, 60) for _ in range(2))
        return rng.choice([f"qty > {a}", f"qty BETWEEN {a} AND {b}", f"qty IN ({a}, {b}, 0)"])
    if kind == "flag":
        return rng.choice(["flag", "NOT flag", "flag IS NOT TRUE", "flag IS FALSE"])
    return rng.choice(["note IS NULL", "note IS NOT NULL", f"note = 'n{rng.randrange(400)}'", "note > 'n5'"])


def predicate(rng, depth=0):
    r = rng.random()
    if depth >= 2 or r < 0.4:
        return atom(rng)
    if r < 0.55:
        return f"NOT ({predicate(rng, depth + 1)})"
    op = "AND" if r < 0.85 else "OR"
    return f"({predicate(rng, depth + 1)}) {op} ({predicate(rng, depth + 1)})"


def cases():
    rng = random.Random(14)
    return [(predicate(rng), rng.sample(COLUMNS, rng.randint(1, len(COLUMNS))), rng.choice([None, 7, 64]))
            for _ in range(N_PREDICATES)]


def rows_of(t):
    return [tuple(r.values()) for r in t.to_pylist()]
