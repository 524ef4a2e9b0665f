"""The filter pass decided per distinct value (qdbpm.table.direct.distinct_rows with
qdbpm.prune.rows.by_column): where a residual is an AND of one-column conjuncts, each column's
conjuncts are evaluated once per dictionary entry (plain pages: per row) and looked up per row.
Reads and counts must equal pyarrow's filter over every writer, nulls, NaN, all-null chunks,
dictionaries that fall back to plain pages, and units of several row groups."""

import os

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.parquet import pages
from qdbpm.prune import expr as E
from qdbpm.prune.arrow import to_arrow
from qdbpm.prune.filters import where_text
from qdbpm.prune.rows import by_column
from qdbpm.table import direct, scan
from qdbpm.table import decider
from qdbpm.table.decider import Decider
from qdbpm.table.read import read_table

from test_direct import _reference, _sorted, roots, same, source  # noqa: F401 (roots: a fixture)

SPLIT = ["s = 'w07' AND i32 > 0", "s IN ('w01', 'w02', 'w29') AND f64 < 0.5 AND d >= DATE '2024-01-20'",
         "s LIKE 'w1%' AND gone IS NULL", "s IS NULL AND k < 2000", "dec9 BETWEEN 10 AND 500000.255",
         "f64 > 0.25 AND f64 < 0.75 AND u32 > 1000", "bin IS NOT NULL AND s <> 'w03'",
         "dec * 2 > 100 AND dec9 < 100000", "NOT (s = 'w05') AND ts_us > TIMESTAMP '2026-01-01 00:00:00'"]


@pytest.fixture(autouse=True)
def fresh_deciders(monkeypatch):
    """Each test starts with no Decider kept for the process (decider._kept): what one test
    decided never turns another's evaluation into a lookup."""
    monkeypatch.setattr(decider, "_kept", {})


@pytest.fixture
def spy(monkeypatch):
    """Counts of per-value passes and of chunks decided on their dictionaries."""
    seen = {"passes": 0, "dictionaries": 0}
    real_rows, real_idx = direct.distinct_rows, pages.dictionary_entries

    def rows(*a, **k):
        seen["passes"] += 1
        return real_rows(*a, **k)

    def idx(split):
        got = real_idx(split)
        seen["dictionaries"] += got is not None
        return got

    monkeypatch.setattr(direct, "distinct_rows", rows)
    monkeypatch.setattr(pages, "dictionary_entries", idx)
    return seen


@pytest.mark.parametrize("lanes", [1, 2])
@pytest.mark.parametrize("where", SPLIT)
def test_per_value_filter_reads_and_counts_equal_pyarrow(roots, spy, monkeypatch, where, lanes):
    """lanes 2: every chunk split on the pool and in this thread at once (PARALLEL_BYTES 0)."""
    monkeypatch.setattr(direct, "LANES", lanes)
    monkeypatch.setattr(direct, "PARALLEL_BYTES", 0 if lanes > 1 else direct.PARALLEL_BYTES)
    for name, root in roots.items():
        path = os.path.join(root, "part=0", "data.parquet")
        dataset = ds.dataset(path)
        try:
            flt = to_arrow(where_text(where), dataset.schema)
        except qdbpm.PredicateError:  # a column this writer's file lacks
            continue
        want = dataset.to_table(filter=flt)
        got = read_table(root, want.column_names, where)
        assert same(_sorted(got), _sorted(want)), (name, where)
        assert same(_sorted(got), _sorted(_reference(root, want.column_names, where))), (name, where)
        assert qdbpm.open_table(root).scan(where).count() == want.num_rows, (name, where)
    assert spy["passes"] and spy["dictionaries"]  # the per-value pass ran, on dictionaries too


def test_units_of_several_row_groups_renumber_their_dictionaries(tmp_path, spy):
    """Row groups of one unit each have their own dictionary (other entries, other order) and
    some chunk all null: the lookups must land on each row group's own entries."""
    rng = np.random.default_rng(5)
    parts = []
    for g in range(6):
        n = 500
        words = np.array([f"g{g}-{i}" for i in range(7)] + ["same"])
        s = pa.array(words[rng.integers(0, 8, n)], mask=rng.random(n) < 0.1)
        if g == 3:
            s = pa.nulls(n, pa.string())
        parts.append(pa.table({"k": pa.array(np.arange(g * n, (g + 1) * n)), "s": s.cast(pa.string()),
                               "v": pa.array(rng.integers(0, 5, n))}))
    t = pa.concat_tables(parts)
    d = tmp_path / "t" / "part=0"
    d.mkdir(parents=True)
    pq.write_table(t, d / "data.parquet", row_group_size=500)
    qdbpm.generate(str(d / "data.parquet"))
    root = str(tmp_path / "t")
    for where in ["s = 'same' AND v < 3", "s IN ('g2-1', 'g5-6') OR s IS NULL", "s IS NULL AND v = 2",
                  "s >= 'g4' AND v <> 1"]:
        flt = to_arrow(where_text(where), t.schema)
        want = t.filter(flt)
        got = read_table(root, None, where)
        assert same(_sorted(got.select(want.column_names)), _sorted(want)), where
        assert qdbpm.open_table(root).scan(where).count() == want.num_rows, where
    assert spy["passes"] and spy["dictionaries"] >= 6


def test_an_unused_dictionary_entry_the_filter_cannot_evaluate_falls_back(tmp_path, monkeypatch):
    """A dictionary may hold entries no row uses (pyarrow writes an Arrow dictionary as it is); a
    conjunct that fails on one (a CAST of 'abc' to DATE) must not fail the read or the count: the
    whole filter decides instead, over the rows' values only."""
    failed = []
    real = decider.truths

    def truths(d, exprs):
        try:
            return real(d, exprs)
        except pa.ArrowInvalid:
            failed.append(1)
            raise

    monkeypatch.setattr(decider, "truths", truths)
    v = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0, 1, 1, 0], pa.int32()),
                                       pa.array(["2024-01-01", "2024-02-01", "abc"]))
    t = pa.table({"k": pa.array(np.arange(6), pa.int64()), "v": v})
    d = tmp_path / "t" / "part=0"
    d.mkdir(parents=True)
    pq.write_table(t, d / "data.parquet", store_schema=False)  # the dictionary as given, 'abc' too
    qdbpm.generate(str(d / "data.parquet"))
    root = str(tmp_path / "t")
    where = "CAST(v AS DATE) > DATE '2024-01-15' AND k < 5"
    got = read_table(root, None, where)
    assert got.select(["k", "v"]).to_pydict() == {"k": [1, 3, 4], "v": ["2024-02-01"] * 3}
    assert qdbpm.open_table(root).scan(where).count() == 3
    assert len(failed) == 2  # the per-value pass was tried (read, count) and gave way


def test_by_column_groups_one_column_conjuncts_only():
    names = ["a", "B", "c"]
    e = where_text("a > 1 AND b < 2 AND a < 9")
    groups = by_column(e, names)
    assert set(groups) == {"a", "B"} and isinstance(groups["a"], E.And) and len(groups["a"].children) == 2
    assert by_column(where_text("a > c"), names) is None  # two columns in one conjunct
    assert by_column(where_text("a > 1 OR c < 2"), names) is None
    assert by_column(where_text("a > 1 AND key = 3"), names) is None  # not a column of the file
    assert set(by_column(where_text("c IS NULL"), names)) == {"c"}


def test_a_literal_that_cannot_be_hashed_reads_and_counts(tmp_path, spy):
    """The groups are kept per scan by the residual's identity: an unhashable literal (a
    bytearray) must not break the per-value pass."""
    d = tmp_path / "t" / "part=0"
    d.mkdir(parents=True)
    pq.write_table(pa.table({"k": list(range(10)), "b": [b"a", b"b"] * 5}), d / "data.parquet")
    qdbpm.generate(str(d / "data.parquet"))
    e = (qdbpm.col("b") == bytearray(b"a")) & (qdbpm.col("k") < 5)
    with pytest.raises(TypeError):
        hash(e)
    root = str(tmp_path / "t")
    assert read_table(root, ["k", "b"], e).to_pydict() == {"k": [0, 2, 4], "b": [b"a"] * 3}
    assert qdbpm.open_table(root).scan(e).count() == 3
    assert spy["passes"] == 2


def test_dictionaries_decided_before_are_looked_up_across_partitions(tmp_path, monkeypatch):
    """Partitions' dictionaries hold the same values in other orders, fewer or more of them (and
    NaN, -0.0 / 0.0, nulls): a value decided in one partition is looked up in the next
    (Decider's memo, matched by bits), a new one is evaluated; reads and counts equal
    pyarrow's filter either way."""
    seen = {"hit": 0, "miss": 0}
    real = Decider.lookup

    def lookup(self, key, values):
        got = real(self, key, values)
        seen["hit" if got is not None else "miss"] += 1
        return got

    monkeypatch.setattr(Decider, "lookup", lookup)
    rng = np.random.default_rng(11)
    floats = np.array([0.0, -0.0, 0.5, 1.5, np.nan, -2.0, 7.25])
    tables = []
    for i in range(6):
        n = 400
        pool = rng.permutation(np.arange(10 + 3 * i))  # each partition: a new order, some new values
        ints = pa.array(pool[rng.integers(0, len(pool), n)].astype(np.int64), mask=rng.random(n) < 0.05)
        fl = pa.array(rng.permutation(floats)[rng.integers(0, 4 + i % 4, n)])
        dec = pa.array([None if x % 17 == 0 else __import__("decimal").Decimal(int(x)).scaleb(-2)
                        for x in pool[rng.integers(0, len(pool), n)]], pa.decimal128(9, 2))
        t = pa.table({"k": pa.array(np.arange(i * n, (i + 1) * n)), "i": ints, "f": fl, "d": dec})
        tables.append(t)
        d = tmp_path / "t" / f"p={i}"
        d.mkdir(parents=True)
        pq.write_table(t, d / "data.parquet", row_group_size=200)
        qdbpm.generate(str(d / "data.parquet"))
    root = str(tmp_path / "t")
    whole = pa.concat_tables(tables)
    for where in ["i < 12 AND f >= 0.0", "i IN (3, 14, 25) AND d > 0.05", "f = 0.0 AND d IS NOT NULL",
                  "i IS NULL AND f <> 1.5", "NOT (f > -1.0) AND i >= 0", "d BETWEEN 0.04 AND 0.2 AND f < 7"]:
        want = whole.filter(to_arrow(where_text(where), whole.schema))
        got = read_table(root, whole.column_names, where)
        assert same(_sorted(got), _sorted(want)), where
        assert qdbpm.open_table(root).scan(where).count() == want.num_rows, where
    assert seen["hit"] and seen["miss"]


@pytest.mark.parametrize("where", ["d >= 0.05", "d >= 0.05 OR k < 0", "unhashable"])  # per value; row filter
def test_partitions_whose_decimal_scales_differ_are_each_filtered_at_their_own_scale(tmp_path, where):
    """The same unscaled values at scale 2 and at scale 3 (0.05 and 0.005 are both 5): a scan held
    the filter pass's answers (Decider's memo) and compiled filters (prune.compiled, the table's
    and the scan's caches) by pyarrow's Field / Schema equality, which ignores the metadata that
    holds the scale, so the scale-3 partition was read with the scale-2 answers. Reads and counts
    equal pyarrow's filter over each file."""
    import decimal

    import pyarrow.compute as pc

    rng = np.random.default_rng(3)
    want = 0
    for i, s in enumerate([2, 3, 2]):
        ints = rng.integers(0, 120, 600)  # 0..1.19 at scale 2, 0..0.119 at scale 3: neither pruned whole
        t = pa.table({"k": np.arange(i * 600, (i + 1) * 600), "b": [b"x", b"y"] * 300,
                      "d": pa.array([decimal.Decimal(int(x)).scaleb(-s) for x in ints], pa.decimal128(9, s))})
        d = tmp_path / "t" / f"p={i}"
        d.mkdir(parents=True)
        pq.write_table(t, d / "data.parquet", store_decimal_as_integer=True, row_group_size=300)
        qdbpm.generate(str(d / "data.parquet"))
        want += pc.sum(pc.greater_equal(t["d"], pa.scalar(decimal.Decimal("0.05")))).as_py()
    root = str(tmp_path / "t")
    assert 0 < want < 1800
    if where == "unhashable":  # the row filter compiled in the scan's own cache (a bytearray literal)
        where = (qdbpm.col("d") >= decimal.Decimal("0.05")) | (qdbpm.col("b") == bytearray(b"zz"))
    assert read_table(root, ["k"], where).num_rows == want
    with qdbpm.open_table(root) as t:
        assert t.scan(where).count() == want


@pytest.mark.parametrize("small", [0, Decider.SMALL])  # lookups through numpy, and through a dict
def test_decider_memo_matches_values_by_bits(monkeypatch, small):
    """The memo answers only for values it holds bit for bit; a new value, or another NaN or
    zero, is left to the filter."""
    monkeypatch.setattr(Decider, "SMALL", small)
    d = Decider(lambda t: {})
    f = pa.field("f", pa.float64())
    got = [pages.Fixed(np.array([0.0, 1.5, np.nan]), None)]
    key, values = d.key(f, "view", got)
    d.remember(key, values, np.array([1, 0, 0, 1], np.uint8))
    assert d.lookup(key, np.array([1.5, 0.0])).tolist() == [0, 1, 1]
    assert d.lookup(key, np.array([np.nan])).tolist() == [0, 1]
    assert d.lookup(key, np.array([-0.0])) is None
    assert d.lookup(key, np.array([2.0, 0.0])) is None
    assert d.lookup(key, None).tolist() == [1]  # every chunk all null: the null's answer
    assert d.key(pa.field("s", pa.string()), "binary", [pages.Binary(np.zeros(1, np.int64), np.zeros(0, np.uint8), None)]) == (None, None)


def test_decider_refuses_a_column_whose_values_outgrow_the_memo():
    """Past MEMO_VALUES distinct values a column is refused for good: its dictionaries are
    neither concatenated, looked up nor sorted into the memo again; a small column still is."""
    d = Decider(lambda t: {})
    big, small = pa.field("p", pa.float64()), pa.field("q", pa.int64())
    n = Decider.MEMO_VALUES
    first = [pages.Fixed(np.arange(n, dtype=np.float64), None)]
    key, values = d.key(big, "view", first)
    d.remember(key, values, np.zeros(n + 1, np.uint8))
    assert d.lookup(key, values[:3]).tolist() == [0, 0, 0, 0]  # n values: still kept
    more = [pages.Fixed(np.arange(n, n + 2, dtype=np.float64), None)]
    key2, values2 = d.key(big, "view", more)
    d.remember(key2, values2, np.zeros(3, np.uint8))  # the union is over MEMO_VALUES: refused
    assert key in d.refused and key not in d.memo
    assert d.key(big, "view", first) == (None, None)
    k, v = d.key(small, "view", [pages.Fixed(np.array([1, 2]), None)])
    d.remember(k, v, np.array([1, 0, 0], np.uint8))
    assert d.lookup(k, np.array([2, 1])).tolist() == [0, 1, 0]


def test_a_column_read_for_the_filter_only_is_not_gathered(tmp_path, monkeypatch):
    """Columns the filter reads but the caller does not ask for are decided on and dropped:
    never gathered at the kept rows (TPC-H Q6's quantity)."""
    gathered = []
    real = direct._column

    def column(pm, rgs, c, f, *a):
        gathered.append(f.name)
        return real(pm, rgs, c, f, *a)

    monkeypatch.setattr(direct, "_column", column)
    rng = np.random.default_rng(2)
    n = 3000
    t = pa.table({"k": pa.array(np.arange(n)), "q": pa.array(rng.integers(0, 50, n)),
                  "s": pa.array(rng.choice(["a", "b", "c"], n))})
    d = tmp_path / "t" / "part=0"
    d.mkdir(parents=True)
    pq.write_table(t, d / "data.parquet")
    qdbpm.generate(str(d / "data.parquet"))
    where = "q < 24 AND s = 'b'"
    want = t.filter(to_arrow(where_text(where), t.schema))
    got = read_table(str(tmp_path / "t"), ["k", "s"], where)
    assert got.column_names == ["k", "s"] and got.equals(want.select(["k", "s"]))
    assert "q" not in gathered and {"k", "s"} <= set(gathered)


@pytest.mark.parametrize("how", ["read_table", "count", "to_reader"])
def test_a_scan_leaves_no_reference_cycle(roots, spy, how):
    """A scan's Decider keeps its filter function; were that the scan's bound method, the scan,
    its parts and their open `_pm` would form a cycle freed only by the cycle collector (a TPC-H
    Q6 one shot left 246 objects to it, ~3 % of its time in collections). Everything a scan
    makes is freed when it is dropped."""
    import gc

    root = roots["pyarrow-snappy-v1-dict"]
    where = SPLIT[1]

    def run():
        if how == "read_table":
            return read_table(root, None, where).num_rows
        with qdbpm.open_table(root) as t:
            s = t.scan(where)
            return s.count() if how == "count" else s.to_reader().read_all().num_rows

    def ours(o):  # qdbpm's objects and functions: other tests' garbage (S3 sessions) may be freed meanwhile
        return str(getattr(o, "__module__", None) or type(o).__module__).startswith("qdbpm")

    run()
    gc.collect()
    old = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        assert run() > 0
        gc.collect()
        left = sorted({getattr(o, "__qualname__", type(o).__qualname__) for o in gc.garbage if ours(o)})
        assert not left
    finally:
        gc.set_debug(old)
        gc.garbage.clear()
    assert spy["passes"] > 0  # the per-value pass ran (its Decider was made and kept)


def test_a_later_scan_of_the_same_question_looks_up_what_an_earlier_one_decided(tmp_path, monkeypatch):
    """The process keeps a Decider per question (decider._kept): a second one-shot read, its table
    opened afresh, evaluates no dictionary value decided before, reads the same rows, and keeps
    no reference to the first read's table; a new value is still evaluated."""
    import gc
    import weakref

    evaluated = []
    real = decider.truths

    def truths(t, exprs):
        evaluated.append(t.num_rows)
        return real(t, exprs)

    monkeypatch.setattr(decider, "truths", truths)
    root = tmp_path / "t"
    for i, top in enumerate([20, 20, 30]):  # the third partition adds values 20..29
        d = root / f"p={i}"
        d.mkdir(parents=True)
        t = pa.table({"k": np.arange(i * 500, (i + 1) * 500), "q": np.arange(500) % top})
        pq.write_table(t, d / "data.parquet")
        qdbpm.generate(str(d / "data.parquet"))
    where = "q < 7 AND k >= 0"
    want = sum(min(7, top) * (500 // top) + min(7, 500 % top) for top in (20, 20, 30))
    t = qdbpm.open_table(str(root))
    assert t.scan(where, ["k"]).to_table().num_rows == want
    first = len(evaluated)
    assert first >= 2  # p=0's values, then p=2's new ones
    gone = weakref.ref(t)
    t.close()
    del t
    gc.collect()
    assert gone() is None  # the kept Decider holds no table
    assert read_table(str(root), ["k"], where).num_rows == want
    assert len(evaluated) == first  # every value looked up
    assert read_table(str(root), ["k"], "q < 8 AND k >= 0").num_rows > want  # another question: evaluated
    assert len(evaluated) > first


def test_the_process_keeps_a_bounded_number_of_decided_values(monkeypatch):
    """Past KEPT_VALUES values in the kept Deciders' memos (or KEPT Deciders) the process's cache
    starts over, checked at every scan: a long-lived process asked many questions over
    high-cardinality columns does not grow without bound."""
    monkeypatch.setattr(decider, "KEPT_VALUES", 100)
    names = ["q"]
    first = decider.decider_for({}, E.Cmp("q", "<", 5), names, None)
    assert decider.decider_for({}, E.Cmp("q", "<", 5), names, None) is first  # kept
    f = pa.field("q", pa.int64())
    key, values = first.key(f, "view", [pages.Fixed(np.arange(150), None)])
    first.remember(key, values, np.zeros(151, np.uint8))
    assert first.size() == 150
    again = decider.decider_for({}, E.Cmp("q", "<", 5), names, None)
    assert again is not first and again.size() == 0  # over the bound: started over
    for i in range(decider.KEPT):
        decider.decider_for({}, E.Cmp("q", "<", i), names, None)
    assert len(decider._kept) <= decider.KEPT


def test_scans_in_threads_share_the_process_deciders_and_read_right(tmp_path):
    """Threads reading two tables whose dictionaries differ (each adding values the other's memo
    lacks) through one kept Decider: every read equals pyarrow's filter, whatever the
    interleaving of their lookups and remembers."""
    from concurrent.futures import ThreadPoolExecutor

    roots, want = [], []
    where = "q < 23 AND k >= 0"
    for j, (lo, top) in enumerate([(0, 40), (15, 60)]):
        for i in range(3):
            d = tmp_path / f"t{j}" / f"p={i}"
            d.mkdir(parents=True)
            q = lo + (np.arange(900) * (7 + i)) % (top - lo + i)
            pq.write_table(pa.table({"k": np.arange(900), "q": q}), d / "data.parquet", row_group_size=300)
            qdbpm.generate(str(d / "data.parquet"))
        roots.append(str(tmp_path / f"t{j}"))
        whole = ds.dataset(roots[-1], format="parquet").to_table()
        want.append(whole.filter(to_arrow(where_text(where), whole.schema)).num_rows)
    assert want[0] != want[1]
    jobs = [(r % 2) for r in range(24)]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda j: read_table(roots[j], ["k"], where).num_rows, jobs))
    assert got == [want[j] for j in jobs]
    assert len(decider._kept) == 1
