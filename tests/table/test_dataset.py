"""`to_dataset`: qdbpm's surviving row groups as a pyarrow dataset that DuckDB, Polars and pyarrow
scan with their own readers and filters.

Tables written by pyarrow and by DuckDB, several row groups each. For a fixed seeded set of SQL
WHERE clauses (one text for qdbpm, DuckDB and Polars) and random column subsets: the dataset holds
exactly the surviving row groups; DuckDB over the dataset returns what DuckDB over the files
returns; Polars over the dataset the same; pyarrow's to_table with the same filter equals
read_table, row order included. A counting filesystem shows that building reads one footer and a
scan reads footers and surviving row groups' chunks only; a fragment pinned to an older snapshot
reads that snapshot after an in-place append; hive keys come back as pyarrow types them.
"""

import os
import random

import duckdb
import fsspec
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.errors import PmError
from qdbpm.prune.arrow import to_arrow
from qdbpm.table.dataset import to_dataset
from qdbpm.table.listing import keys
from qdbpm.table.partitioning import discover

from support.table_files import CountingFS, upload

RG_ROWS = 2000
N_PREDICATES = 40
HOLE = 8192  # pyarrow's pre-buffer joins chunks less than this apart (CacheOptions.hole_size_limit)


def _pyarrow_partition(path, part, n_rgs=8):
    rng = np.random.default_rng(part)
    n = n_rgs * RG_ROWS
    rg = np.arange(n) // RG_ROWS
    flag = []
    for r in range(n_rgs):  # all TRUE, all FALSE, all NULL or mixed row groups
        mode = (r + part) % 4
        flag += [True] * RG_ROWS if mode == 0 else [False] * RG_ROWS if mode == 1 else [None] * RG_ROWS \
            if mode == 2 else [None if v < 0.2 else bool(v < 0.6) for v in rng.random(RG_ROWS)]
    t = pa.table({
        "rid": pa.array(np.arange(n) + part * 100_000, pa.int64()),
        "x": pa.array(rg * 100 + rng.integers(0, 150, n) + part * 7, pa.int32()),
        "px": pa.array(np.round((rg * 10 + rng.random(n) * 15) * 4) / 4, mask=rng.random(n) < 0.1),
        "qty": pa.array(rng.integers(-10**12, 10**12, n), pa.int64()),  # incompressible: chunks > HOLE
        "sym": pa.array([f"S{(r + part) % 5}" if i % 7 else f"S{i % 6}" for i, r in enumerate(rg)]),
        "flag": pa.array(flag, pa.bool_()),
        "ts": pa.array(np.datetime64("2024-03-01", "us") + (np.arange(n) * 1_000_000 + part * 10**11)
                       .astype("timedelta64[us]"), pa.timestamp("us", tz="UTC")),
    })
    pq.write_table(t, path, row_group_size=RG_ROWS)


def _duckdb_partition(path, part):
    con = duckdb.connect()
    con.execute("SET threads TO 1")  # row groups in order, of exactly ROW_GROUP_SIZE rows
    con.execute(f"""COPY (SELECT
        (i + {part * 100_000})::BIGINT AS rid,
        (i // 2048 * 100 + i * 7919 % 150 + {part * 7})::INTEGER AS x,
        CASE WHEN i % 9 = 0 THEN NULL ELSE ((i // 2048) * 10 + (i % 61) / 4.0)::DOUBLE END AS px,
        (hash(i) % 1000000000000)::BIGINT AS qty,
        'S' || ((i // 2048 + {part} + CASE WHEN i % 7 = 0 THEN i % 6 ELSE 0 END) % 6)::VARCHAR AS sym,
        CASE (i // 2048 + {part}) % 4 WHEN 0 THEN TRUE WHEN 1 THEN FALSE WHEN 2 THEN NULL
             ELSE (CASE WHEN i % 5 = 0 THEN NULL ELSE i % 3 = 0 END) END AS flag,
        TIMESTAMPTZ '2024-03-01 00:00:00+00' + to_seconds(i + {part * 100_000}) AS ts
        FROM range(0, 6 * 2048 + 700) t(i) ORDER BY i)
        TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 2048)""")
    con.close()


def _build(root, write, parts):
    files = []
    for p in parts:
        d = os.path.join(root, f"p{p}")
        os.makedirs(d)
        f = os.path.join(d, "data.parquet")
        write(f, p)
        qdbpm.generate(f)
        files.append(f)
    return files


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    base = tmp_path_factory.mktemp("dataset")
    out = {}
    for label, write, parts in (("pyarrow", _pyarrow_partition, (0, 1, 2)), ("duckdb", _duckdb_partition, (0, 1))):
        root = str(base / label)
        files = _build(root, write, parts)
        assert all(pq.ParquetFile(f).num_row_groups >= 6 for f in files)
        out[label] = (root, files)
    return out


# --- the predicate generator: SQL text whose meaning qdbpm, DuckDB and Polars share ----------------

RANGES = {"rid": (-10, 220_000), "x": (-20, 900), "px": (-5, 90)}


def _leaf(rng):
    name = rng.choice(["rid", "x", "px", "sym", "flag"])
    if name == "flag":  # not IS [NOT] TRUE / FALSE: Polars' SQL reads those differently
        return rng.choice(["flag", "NOT flag", "flag = TRUE", "flag = FALSE", "flag <> TRUE", "flag IS NULL",
                           "flag IS NOT NULL"])
    if name == "sym":
        vals = [f"'S{k}'" for k in range(7)]
        form = rng.randrange(4)
        if form == 0:
            return f"sym {'NOT ' if rng.random() < 0.3 else ''}IN ({', '.join(rng.sample(vals, rng.randint(1, 3)))})"
        return f"sym {rng.choice(['=', '<>', '<', '<=', '>', '>='])} {rng.choice(vals)}"
    lo, hi = RANGES[name]
    form = rng.randrange(5)
    if form == 0:
        a, b = sorted([rng.randint(lo, hi), rng.randint(lo, hi)])
        return f"{name} {'NOT ' if rng.random() < 0.3 else ''}BETWEEN {a} AND {b}"
    if form == 1 and name != "px":  # IN stays off nullable columns (qdbpm's IN never yields null)
        vals = sorted({rng.randint(lo, hi) for _ in range(rng.randint(1, 4))})
        return f"{name} {'NOT ' if rng.random() < 0.3 else ''}IN ({', '.join(map(str, vals))})"
    if form == 2 and name == "px":
        return f"px IS {'NOT ' if rng.random() < 0.5 else ''}NULL"
    v = rng.randint(lo, hi)
    return f"{name} {rng.choice(['=', '<>', '<', '<=', '>', '>='])} {v if rng.random() < 0.7 else f'{v}.5'}"


def _predicate(rng, depth=2):
    r = rng.random()
    if depth == 0 or r < 0.4:
        return _leaf(rng)
    if r < 0.5:
        return f"NOT ({_predicate(rng, depth - 1)})"
    op = " AND " if r < 0.8 else " OR "
    return "(" + op.join(_predicate(rng, depth - 1) for _ in range(rng.randint(2, 3))) + ")"


def _key(row):
    """Sort key of a row with None in it (None first)."""
    return tuple((0, 0) if v is None else (1, v) for v in row)


def _rows(rows):
    return sorted((tuple(r) for r in rows), key=_key)


def _duck():
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    return con


@pytest.mark.parametrize("label", ["pyarrow", "duckdb"])
def test_engines_over_the_dataset_match_duckdb_over_the_files(tables, label):
    root, files = tables[label]
    rng = random.Random(f"qdbpm-dataset-{label}")
    con = _duck()
    src = "read_parquet([" + ", ".join(f"'{f}'" for f in files) + "])"
    names = [d[0] for d in con.execute(f"SELECT * FROM {src} LIMIT 0").description]
    dropped = matched = empty = 0
    with qdbpm.open_table(root) as table:
        for _ in range(N_PREDICATES):
            sql = _predicate(rng)
            cols = rng.sample(names, rng.randint(1, len(names)))
            masks = table.prune_masks(sql)
            ds = to_dataset(table, masks)
            # exactly the surviving row groups, partitions without survivors left out
            got = {os.path.basename(os.path.dirname(f.path)): [rg.id for rg in f.row_groups]
                   for f in ds.get_fragments()}
            assert got == {p: np.nonzero(m)[0].tolist() for p, m in masks.items() if m.any()}, sql
            dropped += sum(int((~m).sum()) for m in masks.values())
            sel = ", ".join(cols)
            want = _rows(con.execute(f"SELECT {sel} FROM {src} WHERE {sql}").fetchall())
            con.register("ds", ds)
            assert _rows(con.execute(f"SELECT {sel} FROM ds WHERE {sql}").fetchall()) == want, sql
            con.unregister("ds")
            ctx = pl.SQLContext(frames={"ds": pl.scan_pyarrow_dataset(ds)})
            assert _rows(ctx.execute(f"SELECT {sel} FROM ds WHERE {sql}").collect().rows()) == want, sql
            # pyarrow with the same filter: read_table's rows, types and order
            pred = qdbpm.parse(sql)
            got_pa = ds.to_table(columns=cols, filter=to_arrow(pred, ds.schema))
            assert got_pa.equals(qdbpm.read_table(root, columns=cols, where=sql)), sql
            matched += bool(want)
            empty += not want
    assert matched > N_PREDICATES // 4 and empty > 3 and dropped > N_PREDICATES, (matched, empty, dropped)


def test_counts_honour_the_row_groups(tables):
    root, files = tables["pyarrow"]
    with qdbpm.open_table(root) as table:
        masks = table.prune_masks("x < 250")
        ds = to_dataset(table, masks)
        want = sum(int(np.asarray(table.meta(p).num_rows)[m].sum()) for p, m in masks.items())
        assert 0 < want < sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    assert ds.to_table().num_rows == want
    assert ds.count_rows(filter=pc.field("x") > -1) == want
    con = _duck()
    con.register("ds", ds)
    assert con.execute("SELECT count(*) FROM ds").fetchall() == [(want,)]
    assert pl.scan_pyarrow_dataset(ds).select(pl.len()).collect().item() == want


# --- what a scan touches -----------------------------------------------------------------------


def _spans(pm, rgs, cols):
    """Byte spans of the chunks of `cols` in row groups `rgs`, joined across gaps < HOLE."""
    ch = pm.chunks[np.ix_(rgs, cols)].ravel()
    spans = sorted((int(s), int(s) + int(n)) for s, n in zip(ch["byte_range_start"], ch["total_compressed"]))
    out = []
    for s, e in spans:
        if out and s - out[-1][1] < HOLE:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _check_requests(requests, table, masks, cols, footers):
    """Every read is a footer read (ends at the pinned size, covers the footer) or lies inside the
    surviving row groups' chunks of `cols`; `footers` footer reads in all."""
    n_footers = 0
    by_path = {table.parquet_path(p): p for p in table.partitions}
    for path, s, e, n in requests:
        pm = table.meta(by_path[path])
        assert n == e - s
        if e == pm.parquet_size and s <= pm.parquet_footer_offset:
            n_footers += 1
            continue
        rgs = np.nonzero(masks[by_path[path]])[0]
        idx = [pm.column_index(c) for c in cols]
        assert any(a <= s and e <= b for a, b in _spans(pm, rgs, idx)), (path, s, e)
    assert n_footers == footers


def test_scans_read_footers_and_surviving_chunks_only(tables):
    root, _ = tables["pyarrow"]
    counting = CountingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(root, counting) as table:
        sql = "x BETWEEN 150 AND 260 OR rid BETWEEN 210000 AND 211000"
        masks = table.prune_masks(sql)
        n = len(counting.requests)
        ds = to_dataset(table, masks)
        build = counting.requests[n:]
        assert len(build) == 1 and build[0][0] == table.parquet_path(table.partitions[0])  # the schema's footer
        survivors = [p for p in table.partitions if masks[p].any()]
        assert survivors[0] == table.partitions[0] and len(survivors) == 3
        assert 0 < sum(int(m.sum()) for m in masks.values()) < sum(len(m) for m in masks.values()) // 2

        n = len(counting.requests)
        t = ds.to_table(columns=["x", "px"])
        assert t.num_rows == sum(int(np.asarray(table.meta(p).num_rows)[masks[p]].sum()) for p in survivors)
        # the first fragment kept the footer read at build: one footer read for each other one
        _check_requests(counting.requests[n:], table, masks, ["x", "px"], footers=len(survivors) - 1)

        con = _duck()
        con.register("ds", ds)
        n = len(counting.requests)
        got = con.execute("SELECT sym, count(*) FROM ds WHERE qty > 0 GROUP BY sym ORDER BY sym").fetchall()
        assert got and sum(c for _, c in got) < t.num_rows
        # the fragments keep the footers the first scan read: a second scan reads chunks only
        _check_requests(counting.requests[n:], table, masks, ["sym", "qty"], footers=0)

        # no survivor in the first partition: its footer is still the schema's (one read)
        masks = table.prune_masks("rid >= 200000")
        n = len(counting.requests)
        ds = to_dataset(table, masks)
        assert [r[0] for r in counting.requests[n:]] == [table.parquet_path(table.partitions[0])]
        n = len(counting.requests)
        assert ds.to_table(columns=["rid"]).num_rows == int(np.asarray(table.meta("p2").num_rows).sum())
        _check_requests(counting.requests[n:], table, masks, ["rid"], footers=1)

        # schema= given: building reads nothing
        n = len(counting.requests)
        assert to_dataset(table, masks, schema=ds.schema).schema == ds.schema
        assert len(counting.requests) == n


def _recorded(name):
    def call(self, path, *args, **kwargs):
        self.other.append((name, path))
        return getattr(self.fs, name)(path, *args, **kwargs)
    return call


class MetadataCountingFS(CountingFS):
    """CountingFS that also records the calls that would cost a HEAD, a listing or a buffered open."""

    def __init__(self, fs):
        super().__init__(fs)
        self.other = []

    info, size, exists, isfile = _recorded("info"), _recorded("size"), _recorded("exists"), _recorded("isfile")
    ls, find, open = _recorded("ls"), _recorded("find"), _recorded("open")


def test_s3_dataset_reads_the_surviving_ranges_without_head_or_listing(s3_server, s3_bucket, tables):
    root, _ = tables["pyarrow"]
    fs = s3_server.filesystem()
    upload(fs, root, f"{s3_bucket}/t")
    sql = "x BETWEEN 150 AND 260 OR rid BETWEEN 210000 AND 211000"
    with qdbpm.open_table(root) as local:
        want = to_dataset(local, local.prune_masks(sql)).to_table(columns=["x", "px"])
    counting = MetadataCountingFS(fs)
    with qdbpm.open_table(f"s3://{s3_bucket}/t", counting) as table:
        masks = table.prune_masks(sql)
        n, m = len(counting.requests), len(counting.other)
        ds = to_dataset(table, masks)
        t = ds.to_table(columns=["x", "px"])
        assert t.equals(want)
        survivors = sum(bool(m.any()) for m in masks.values())
        # every byte came from a range read: one footer per fragment, chunks of survivors
        _check_requests(counting.requests[n:], table, masks, ["x", "px"], footers=survivors)
        assert ("find" in {k for k, _ in counting.other[:m]}) and counting.other[m:] == []  # the table listed
        con = _duck()
        con.register("ds", ds)
        assert con.execute(f"SELECT count(*) FROM ds WHERE {sql}").fetchall() == \
            [(qdbpm.read_table(root, columns=["x"], where=sql).num_rows,)]


# --- pinned snapshots ---------------------------------------------------------------------------


def test_a_fragment_pinned_to_an_older_snapshot_reads_that_snapshot(tmp_path):
    d = tmp_path / "p0"
    d.mkdir()
    f = str(d / "data.parquet")
    _pyarrow_partition(f, 0, n_rgs=4)
    qdbpm.generate(f)
    old = pq.read_table(f)
    old_size = os.path.getsize(f)
    with qdbpm.open_table(str(tmp_path)) as table:
        masks = table.prune_masks("x >= 0")  # opens the _pm: the table keeps this snapshot
        extra = old.slice(0, 3 * RG_ROWS)
        qdbpm.append(f, extra, row_group_size=RG_ROWS)
        assert os.path.getsize(f) > old_size and pq.ParquetFile(f).num_row_groups == 7
        assert table.meta("p0").parquet_size == old_size
        ds = to_dataset(table, masks)
        assert ds.to_table().equals(old)
        # the fragment's footer is the old one: 4 row groups, the old row count
        (frag,) = ds.get_fragments()
        assert frag.metadata.num_row_groups == 4 and frag.metadata.num_rows == old.num_rows
        with pytest.raises(IndexError, match="row group 4 out of range"):
            to_dataset(table, {"p0": np.array([3, 4])})
    with qdbpm.open_table(str(tmp_path)) as table:  # a table opened now sees the append
        ds = to_dataset(table, table.prune_masks("x >= 0"))
        assert ds.to_table().equals(pa.concat_tables([old, extra]).combine_chunks().cast(old.schema))
        assert [rg.id for rg in next(iter(ds.get_fragments())).row_groups] == list(range(7))


# --- survivors in, order out ---------------------------------------------------------------------


def test_row_groups_come_back_ascending_and_in_partition_order(tables):
    root, files = tables["pyarrow"]
    with qdbpm.open_table(root) as table:
        # unsorted, repeated ids and a boolean mask: sorted and de-duplicated
        surv = {"p2": np.array([7, 1, 1, 4]), "p0": np.array([True, False] * 4), "p1": np.array([], np.int64)}
        ds = to_dataset(table, surv)
        assert [f.path for f in ds.get_fragments()] == [os.path.abspath(files[0]), os.path.abspath(files[2])]
        want = pa.concat_tables([pq.ParquetFile(files[0]).read_row_groups([0, 2, 4, 6]),
                                 pq.ParquetFile(files[2]).read_row_groups([1, 4, 7])])
        assert ds.to_table().equals(want)
        empty = to_dataset(table, {})
        assert empty.to_table().num_rows == 0 and empty.schema == pads.dataset(files).schema
        with pytest.raises(PmError, match="does not have"):
            to_dataset(table, {"nope": np.array([0])})
        with pytest.raises(PmError, match="mask"):
            to_dataset(table, {"p0": np.array([True, False])})


def test_row_groups_past_a_small_set_still_come_back_ascending(tmp_path):
    # make_fragment passes row_groups through set(): {2, 9, 17} iterates 9, 2, 17 (hash order)
    assert list({2: 0, 9: 0, 17: 0}) == [2, 9, 17] and list({2, 9, 17}) != [2, 9, 17]
    (tmp_path / "p").mkdir()
    f = str(tmp_path / "p" / "data.parquet")
    pq.write_table(pa.table({"v": pa.array(np.arange(400), pa.int64())}), f, row_group_size=10)
    qdbpm.generate(f)
    with qdbpm.open_table(str(tmp_path)) as table:
        ds = to_dataset(table, {"p": np.array([2, 9, 17, 33, 39])})
        want = [v for r in (2, 9, 17, 33, 39) for v in range(r * 10, r * 10 + 10)]
        assert ds.to_table().column("v").to_pylist() == want


def test_a_file_within_the_footer_read_costs_one_request(tmp_path):
    # pyarrow reads the last 64 KiB for the footer; chunks inside that tail come from it
    for name in ("p", "q"):
        (tmp_path / name).mkdir()
        f = str(tmp_path / name / "data.parquet")
        pq.write_table(pa.table({"v": pa.array(np.arange(400), pa.int64())}), f, row_group_size=10)
        qdbpm.generate(f)
    counting = CountingFS(fsspec.filesystem("file"))
    with qdbpm.open_table(str(tmp_path), counting) as table:
        ds = to_dataset(table, {"q": np.array([3, 30])})
        n = len(counting.requests)
        assert ds.to_table().column("v").to_pylist() == list(range(30, 40)) + list(range(300, 310))
        q = table.meta("q")
        assert q.parquet_size < 65536 and [r[1:3] for r in counting.requests[n:]] == [(0, q.parquet_size)]


# --- hive partitions ------------------------------------------------------------------------------

HIVE = ["day=01/sym=a", "day=01/sym=b%20c", "day=02/sym=a", "day=03/sym=__HIVE_DEFAULT_PARTITION__"]


def test_hive_keys_are_columns_typed_as_pyarrow_types_them(tmp_path):
    for k, part in enumerate(HIVE):
        d = tmp_path.joinpath(*part.split("/"))
        d.mkdir(parents=True)
        f = str(d / "data.parquet")
        pq.write_table(pa.table({"v": pa.array(np.arange(k * 100, k * 100 + 300), pa.int64())}), f,
                       row_group_size=100)
        qdbpm.generate(f)
    ref = pads.dataset(str(tmp_path), format="parquet", partitioning="hive")
    with qdbpm.open_table(str(tmp_path)) as table:
        assert table.partitions == sorted(HIVE)
        ds = to_dataset(table, table.prune_masks("v >= 0"))
        assert ds.schema == ref.schema and ds.schema.names == ["v", "day", "sym"]
        assert ds.schema.field("day").type == pa.int32()
        assert _rows(tuple(r.values()) for r in ds.to_table().to_pylist()) == \
            _rows(tuple(r.values()) for r in ref.to_table().to_pylist())
        got = ds.to_table(filter=(pc.field("day") == 1) & (pc.field("sym") == "b c"), columns=["v"])
        assert got.column("v").to_pylist() == list(range(100, 400))
        assert ds.to_table(filter=pc.field("sym").is_null(), columns=["day"]).column("day").to_pylist() == [3] * 300
        con = _duck()
        con.register("ds", ds)
        assert con.execute("SELECT day, sym, count(*) FROM ds GROUP BY ALL ORDER BY ALL").fetchall() == \
            [(1, "a", 300), (1, "b c", 300), (2, "a", 300), (3, None, 300)]


def test_partition_keys_and_discovery_match_pyarrow(tmp_path):
    assert keys("day=01/sym=a") == {"day": "01", "sym": "a"}
    assert keys("2024-01-01") == {} and keys("") == {}
    assert keys("x/my%20key=a%2Fb/=z/k") == {"my key": "a/b"}
    assert keys("k=__HIVE_DEFAULT_PARTITION__") == {"k": None}
    cases = [["day=01/sym=a", "day=02/sym=b"], ["k=-5", "k=+3"], ["k=007", "k=0x10"], ["k=2147483648"],
             ["k=1.5", "k=2"], ["plain/day=1", "other/day=2"], ["my%20key=a%2Fb"], ["2024-01-01"],
             ["k=__HIVE_DEFAULT_PARTITION__", "k=4"]]
    for i, parts in enumerate(cases):
        root = tmp_path / f"c{i}"
        for part in parts:
            d = root.joinpath(*part.split("/"))
            d.mkdir(parents=True)
            pq.write_table(pa.table({"v": [1]}), str(d / "data.parquet"))
        ref = pads.dataset(str(root), format="parquet", partitioning="hive")
        got = discover(parts)
        assert got.schema == pa.schema([f for f in ref.schema if f.name != "v"]), parts
        by_file = {os.path.relpath(os.path.dirname(f.path), root).replace(os.sep, "/"): f.partition_expression
                   for f in ref.get_fragments()}
        for part in parts:
            assert got.expression(part).equals(by_file[part]), part
    # a key with no non-null value: pyarrow cannot type it; every key is a string then
    only_null = discover(["k=__HIVE_DEFAULT_PARTITION__/j=1"])
    assert only_null.schema == pa.schema([("k", pa.string()), ("j", pa.string())])
    got = only_null.expression("k=__HIVE_DEFAULT_PARTITION__/j=1")
    assert got.equals(pc.field("k").is_null() & (pc.field("j") == "1"))


def test_keys_named_like_columns_and_partitioning_none_add_no_fields(tmp_path):
    # `ts=2024-03-0N` directories over a `ts` column (the demo's layout): pyarrow refuses to merge
    # them; the file's column stands and the key is no partition field
    files = []
    for day in range(2):
        d = tmp_path / "t" / f"ts=2024-03-0{day + 1}" / f"k=K{day}"
        d.mkdir(parents=True)
        f = str(d / "data.parquet")
        _pyarrow_partition(f, day, n_rgs=2)
        qdbpm.generate(f)
        files.append(f)
    file_schema = pq.read_schema(files[0])
    with qdbpm.open_table(str(tmp_path / "t")) as table:
        ds = to_dataset(table, table.prune_masks("x < 120"))
        assert ds.schema == pa.unify_schemas([file_schema, pa.schema([("k", pa.string())])])
        assert ds.schema.field("ts").type == pa.timestamp("us", tz="UTC")
        x120 = pc.field("x") < 120
        got = ds.to_table(columns=["rid"], filter=(pc.field("k") == "K1") & x120)
        assert got.equals(pads.dataset(files[1]).to_table(columns=["rid"], filter=x120))
    with qdbpm.open_table(str(tmp_path / "t"), partitioning=None) as table:
        ds = to_dataset(table, table.prune_masks("x < 120"))
        assert ds.schema == file_schema
        x120 = pc.field("x") < 120
        assert ds.to_table(filter=x120).equals(pads.dataset(files).to_table(filter=x120))


EXIT_SCRIPT = """
import sys
import qdbpm
from qdbpm.table.dataset import to_dataset
table = qdbpm.open_table(sys.argv[1])
for i in range(15):
    to_dataset(table, table.prune_masks(f"x > {i * 50}")).to_table(columns=["x", "px"])
"""


def test_a_process_exits_cleanly_right_after_scans(tables, tmp_path):
    # pyarrow releases pinned files from its I/O threads; one that does so during interpreter
    # finalization aborts the process unless they were let go of before (dataset._drain)
    import subprocess
    import sys

    root, _ = tables["pyarrow"]
    script = tmp_path / "scan_and_exit.py"
    script.write_text(EXIT_SCRIPT)
    for _ in range(3):
        r = subprocess.run([sys.executable, str(script), root], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "terminate" not in r.stderr, (r.returncode, r.stderr[-2000:])
