"""Cheap work first (prune.rules.LAZY) changes no mask: a seeded property test.

With laziness on, an AND / OR evaluates a child only where its answer can still count, children
run cheapest first, and a schema group decodes byte-string stats and builds bloom indexes only
for partitions holding a row group that still counts. Every `maybe` and `always` mask must be
exactly the one of the eager walk (every child over every row group, in written order, every
lookup whole), over:

- a hive-partitioned table (tests/support/scan_cases.py's rows plus a typeless uint64 and a
  decimal column; blooms on some partitions, row-group sizes that differ, an empty partition,
  two schema groups) under a few hundred seeded SQL predicates mixing key atoms, column atoms
  and residuals (column pairs, LIKE, functions), through Table.classify_masks, prune_masks
  and ParquetMeta.classify, with caches warm (each lazy call widens them) and cold;
- random tables of every type qdbpm prunes (tests/support/prune_cases.py) split into
  partitions with blooms, under hypothesis-drawn predicates;
- rules.evaluate / classify given an explicit `need`: exact inside it, False outside.

The eager side also opens its table file by file (table.BATCH off), the lazy side as one batch
(pm/batch.py: grouped by the kernel's schema ids, stats gathered from the batch's buffer), so
the same masks also prove the batch open changes nothing.
"""

import decimal
import os
import random
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qdbpm
from qdbpm.prune import rules
from qdbpm.prune.bind import bind
from qdbpm.sync.generate import generate
from qdbpm.table import table as table_mod
from qdbpm.table.table import open_table
from support import scan_cases as S
from support.prune_cases import datasets, predicates

PARTITIONS = 7
N_PREDICATES = 300
BLOOMS = ["sym", "note", "qty", "rid", "u", "dec"]


def write_table(root):
    """scan_cases partitions under day=K/, each with `u` (uint64: no QuestDB type, so read both
    signed and unsigned; the top bit set in odd days) and `dec` (a 16-byte decimal: out-of-line
    bounds); blooms on even days; day 3 also has an `extra` column (a second schema group);
    day 6 is empty."""
    for day in range(PARTITIONS):
        d = os.path.join(root, f"day={day}")
        os.makedirs(d)
        path = os.path.join(d, "data.parquet")
        S.write_partition(path, day % S.DAYS)
        t = pq.read_table(path)
        n = t.num_rows
        high = (1 << 63) if day % 2 else 0
        t = t.append_column("u", pa.array([high + (i // 90 + day) % 5 for i in range(n)], pa.uint64()))
        t = t.append_column("dec", pa.array([None if i % 41 == 3 else decimal.Decimal((i // 120) * 7 + day).scaleb(-2)
                                             for i in range(n)], pa.decimal128(30, 4)))
        if day == 3:
            t = t.append_column("extra", pa.array(np.arange(n), pa.int64()))
        if day == 6:
            t = t.slice(0, 0)
        pq.write_table(t, path, row_group_size=[100, 60, 250][day % 3], sorting_columns=[pq.SortingColumn(1)])
        generate(path, bloom_columns=BLOOMS if day % 2 == 0 else None)


def extra_atom(rng):
    """Atoms scan_cases does not draw: hive keys, typeless integers, decimals, residuals."""
    return rng.choice([
        f"day = {rng.randrange(PARTITIONS)}", f"day >= {rng.randrange(PARTITIONS)}",
        f"day IN ({rng.randrange(PARTITIONS)}, {rng.randrange(PARTITIONS)})",
        f"u = {rng.randrange(6)}", f"u >= {rng.randrange(6)}", f"u < {rng.randrange(6)}",
        f"u = {(1 << 63) + rng.randrange(6)}", f"u IN ({rng.randrange(6)}, {(1 << 63) + rng.randrange(6)})",
        f"dec = {rng.randrange(40) / 100}", f"dec > {rng.randrange(40) / 100}", "dec IS NULL",
        f"dec BETWEEN {rng.randrange(20) / 100} AND {rng.randrange(20, 40) / 100}",
        "qty < grp", "qty >= rid", "sym < note", "sym = note",  # column pairs
        f"sym LIKE 'S{rng.randrange(4)}%'", f"note LIKE 'n{rng.randrange(10)}%'", "length(sym) = 2",
        "year(ts) = 2024", "qty + grp > 10",
    ])


def predicate(rng, depth=0, keys=True):
    r = rng.random()
    if depth >= 3 or r < 0.35:
        a = rng.random()
        if a < 0.5:
            return S.atom(rng)
        atom = extra_atom(rng)
        while not keys and atom.startswith("day"):
            atom = extra_atom(rng)
        return atom
    if r < 0.45:
        return f"NOT ({predicate(rng, depth + 1, keys)})"
    op = "AND" if r < 0.75 else "OR"
    parts = [predicate(rng, depth + 1, keys) for _ in range(rng.choice([2, 2, 3]))]
    return f" {op} ".join(f"({p})" for p in parts)


def cases(n, keys=True, seed=17):
    rng = random.Random(seed)
    return [qdbpm.parse(predicate(rng, keys=keys)) for _ in range(n)]


def one_by_one(root):
    """The reference table: every `_pm` opened alone (no batch), for the eager side."""
    table_mod.BATCH = False
    try:
        return open_table(root)
    finally:
        table_mod.BATCH = True


def lazily(lazy, f, *args):
    saved = rules.LAZY
    rules.LAZY = lazy
    try:
        return f(*args)
    finally:
        rules.LAZY = saved


def assert_same(got, want, pred):
    """partition -> mask, or -> (maybe, always): the same partitions, the same masks."""
    assert sorted(got) == sorted(want), pred
    for p in want:
        g, w = (got[p], want[p]) if isinstance(want[p], tuple) else ((got[p],), (want[p],))
        assert len(g) == len(w) and all(np.array_equal(x, y) for x, y in zip(g, w)), (p, pred, g, w)


@pytest.fixture(scope="module")
def table_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("lazy"))
    write_table(root)
    return root


def test_table_masks_equal_with_laziness_on_and_off(table_root):
    preds = cases(N_PREDICATES)
    fired = {"maybe": 0, "always": 0, "pruned": 0}
    with open_table(table_root) as warm, one_by_one(table_root) as eager:
        assert warm._batch is not None and eager._batch is None
        assert len(warm.schema_groups()) >= 2
        for k, pred in enumerate(preds):
            want = lazily(False, eager.classify_masks, pred)
            assert_same(lazily(True, warm.classify_masks, pred), want, pred)
            assert_same(lazily(True, warm.prune_masks, pred), {p: m for p, (m, _) in want.items()}, pred)
            if k % 10 == 0:  # cold caches: only what this predicate needs is decoded
                with open_table(table_root) as cold:
                    assert_same(lazily(True, cold.classify_masks, pred), want, pred)
            for m, a in want.values():
                fired["maybe"] += int(m.sum())
                fired["always"] += int(a.sum())
                fired["pruned"] += int((~m).sum())
    assert min(fired.values()) > 100, fired  # the predicates prune, and prove whole row groups


def test_file_masks_equal_with_laziness_on_and_off(table_root):
    with open_table(table_root) as table:
        for pred in cases(100, keys=False, seed=18):
            for p in table.partitions:
                pm = table.meta(p)
                if "extra" in pm.column_names:
                    continue
                want = lazily(False, pm.classify, pred)
                got = lazily(True, pm.classify, pred)
                assert all(np.array_equal(g, w) for g, w in zip(got, want)), (p, pred)


def test_explicit_need_is_exact_inside_and_false_outside(table_root):
    rng = np.random.default_rng(5)
    with open_table(table_root) as table, open_table(table_root) as eager:
        g = next(x for x in table.schema_groups() if len(x.members) > 1)
        ge = next(x for x in eager.schema_groups() if x.schema == g.schema)
        for pred in cases(60, keys=False, seed=19):
            b = bind(pred, g.schema)
            full = lazily(False, rules.classify, b, ge.n, ge.stats, ge.blooms)
            need = rng.random(g.n) < rng.choice([0.02, 0.2, 0.8])
            maybe, always = lazily(True, rules.classify, b, g.n, g.stats, g.blooms, need)
            assert np.array_equal(maybe, full[0] & need) and np.array_equal(always, full[1] & need), pred
            assert np.array_equal(lazily(True, rules.evaluate, b, g.n, g.stats, g.blooms, need), full[0] & need)


def test_a_selective_range_decodes_few_partitions(table_root):
    """The point of it: `ts` alone leaves one day, so only that day's strings and blooms are read."""
    with open_table(table_root) as table:
        day = S.iso(S.DAY_US + 10)
        lazily(True, table.classify_masks, f"sym = 'S1' AND ts >= '{day}' AND ts < '{S.iso(S.DAY_US + 20)}'")
        (g,) = [x for x in table.schema_groups() if len(x.members) == PARTITIONS - 1]
        sym = g.schema.column("sym").index
        # day=1 and day=5 (5 % DAYS == 1) hold that instant; day=6's one row group, empty, has no bounds
        decoded = [g.members[k][0] for k in np.flatnonzero(g._stats[sym].done)]
        assert decoded == ["day=1", "day=5", "day=6"]
        assert np.flatnonzero(g._blooms[sym].done).tolist() == np.flatnonzero(g._stats[sym].done).tolist()


@settings(max_examples=40)
@given(datasets(), st.integers(2, 4), st.data())
def test_random_tables_equal_with_laziness_on_and_off(case, parts, data):
    table, rg_size, pools, _ = case
    names = table.column_names
    with tempfile.TemporaryDirectory() as root:
        cut = np.linspace(0, table.num_rows, parts + 1).astype(int)
        for k in range(parts):
            d = os.path.join(root, f"p{k}")
            os.makedirs(d)
            path = os.path.join(d, "data.parquet")
            pq.write_table(table.slice(cut[k], cut[k + 1] - cut[k]), path, row_group_size=rg_size)
            generate(path, bloom_columns=[n for n in names if n != "bool"] if k % 2 == 0 else None)
        with open_table(root) as warm, one_by_one(root) as eager:
            for _ in range(8):
                pred = data.draw(predicates(names, pools))
                want = lazily(False, eager.classify_masks, pred)
                assert_same(lazily(True, warm.classify_masks, pred), want, pred)
