"""Differential fuzzing of reads: random Parquet writer settings x random WHERE clauses, with
`read_table` held to DuckDB for which rows match and to pyarrow.dataset for their values, types
and order. Shared by scripts/fuzz_reads.py (long runs on every core) and
tests/table/test_read_fuzz.py (a few fixed seeds in CI).

A case (one seed) writes 2-3 partitions of support.residual_cases' clustered rows (nulls, NaN,
strings, dates, timestamps, decimals; and unsigned, int8, float32 and nanosecond columns,
`_extra`), each with its own writer settings: row group and data page sizes (several pages per
chunk), dictionaries on, off or per column, a dictionary page limit small enough that a chunk
falls back to PLAIN mid-way, every codec pyarrow writes, data pages v1 and v2, statistics for some
columns only, decimals as integers or fixed-length arrays, strings as large_string, timestamps in
another unit; a later partition may be DuckDB's writer's or Polars'. Each query picks columns (or
all) and a clause of support.residual_cases' generator; its answer must be, exactly, pyarrow's read of the whole files
filtered to the ids DuckDB's SELECT returns; `count()` must be their number, a stream of small
batches the same rows, footer=False the same values in the types api.md names, and DuckDB's
SELECT over `Scan.to_dataset()` (the surviving row groups only) the same ids. A clause DuckDB
refuses for a value (a Conversion or Out of Range error) is not judged on its rows, but its read
must answer or raise EvaluationError, nothing else.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import os
import random

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from qdbpm.errors import EvaluationError, PmError
from qdbpm.sync.generate import generate
from qdbpm.table.read import read_table
from qdbpm.table.table import open_table

from .residual_cases import OPS, RG_ROWS, duck_in, duckdb_source, nan_cmp, partition_table, random_predicate, same_text

COLUMNS = ["id", "a", "b", "f", "s", "d", "ts", "dec", "flag", "u32", "u64", "i8", "f32", "ns"]


def writer_options(rng) -> dict:
    """pq.write_table settings for one partition."""
    return {
        "row_group_size": rng.choice([7, 30, 64, 250, 1000]),
        "data_page_size": rng.choice([64, 700, 4096, 1 << 20]),
        "use_dictionary": rng.choice([True, False, ["s", "b"], ["a", "d", "dec", "ts", "f"]]),
        "dictionary_pagesize_limit": rng.choice([64, 512, 1 << 20]),  # small: PLAIN pages after a dictionary
        "compression": rng.choice(["none", "snappy", "zstd", "gzip", "lz4", "brotli"]),
        "data_page_version": rng.choice(["1.0", "2.0"]),
        "write_statistics": rng.choice([True, True, ["id", "a", "d", "s"]]),
        "store_decimal_as_integer": rng.choice([True, False]),
    }


U32_AT, U64_AT = 2 ** 31, 2 ** 63  # the unsigned columns straddle where a signed view would turn negative
NS_BASE = 1_704_067_200_000_000_000  # 2024-01-01 in ns


def _extra(t, part) -> pa.Table:
    """Columns of the types residual_cases leaves out, clustered by row group as its columns are:
    u32 (uint32) and u64 (uint64) across 2^31 and 2^63, i8 (int8, nulls), f32 (float32, NaN) and
    ns (naive timestamp[ns], sub-microsecond values)."""
    n = t.num_rows
    rng = np.random.default_rng(200 + part)
    rg = np.arange(n) // RG_ROWS
    f32 = (rg * 1.5 + rng.normal(0, 1, n)).astype(np.float32)
    f32[rng.random(n) < 0.05] = np.nan
    cols = {
        "u32": pa.array((U32_AT - 4000 + rg * 500 + rng.integers(0, 900, n)).astype(np.uint32)),
        "u64": pa.array((np.uint64(U64_AT) - np.uint64(8_000_000) + (rg * 1_000_000 + rng.integers(0, 1_800_000, n))
                         .astype(np.uint64)), mask=rng.random(n) < 0.05),
        "i8": pa.array((rg * 15 - 120 + rng.integers(0, 20, n)).clip(-128, 127).astype(np.int8), mask=rng.random(n) < 0.1),
        "f32": pa.array(f32),
        "ns": pa.array(NS_BASE + rg * 3_600_000_000_000 + rng.integers(0, 5_000_000_000_000, n), pa.timestamp("ns")),
    }
    for name, col in cols.items():
        t = t.append_column(name, col)
    return t


def extra_leaf(rng):
    """(qdbpm text, DuckDB text) of a clause over `_extra`'s columns."""
    op = rng.choice(OPS)
    k32 = U32_AT + rng.randint(-4500, 4500)
    k64 = U64_AT + rng.randint(-9_000_000, 9_000_000)
    x = round(rng.uniform(-3, 26), rng.choice([0, 1, 3]))
    ts = dt.datetime(2024, 1, 1) + dt.timedelta(hours=rng.randint(-2, 18), microseconds=rng.randint(0, 10 ** 6))
    forms = [
        lambda: same_text(f"u32 {op} {k32}"),
        lambda: same_text(f"u64 {op} {k64}"),
        lambda: same_text(f"u64 IS {rng.choice(['', 'NOT '])}NULL"),
        lambda: same_text(f"i8 {op} {rng.randint(-130, 130)}"),
        lambda: (f"f32 {op} {x}", nan_cmp("f32", op, x)),
        lambda: same_text(f"ns {op} TIMESTAMP '{ts}'"),
        lambda: same_text(f"u32 BETWEEN {k32} AND {k32 + rng.randint(0, 2000)}"),
        lambda: same_text(f"u64 - b {op} {k64}"),
        lambda: same_text(f"u64 - a * 1000 {op} {k64 - 1000 * rng.randint(0, 170)}"),
        lambda: same_text(f"coalesce(u64, {k64}) {op} {k64}"),
        lambda: same_text(f"u64 IS DISTINCT FROM {k64}"),
        lambda: same_text(f"-i8 {op} {rng.randint(-130, 130)}"),
        lambda: same_text(f"i8 + a {op} {rng.randint(-100, 400)}"),
        lambda: same_text(f"CAST(u64 AS DOUBLE) {op} {float(k64)}"),
        lambda: (f"coalesce(u64, f) {op} {float(k64)}", nan_cmp("coalesce(u64, f)", op, float(k64))),
        lambda: same_text(f"CASE WHEN a > {rng.randint(0, 170)} THEN u64 ELSE b END {op} {k64}"),
        lambda: (f"u32 IN ({k32}, {k32 + 1}, {U32_AT})", duck_in("u32", f"{k32}, {k32 + 1}, {U32_AT}")),
        lambda: same_text(f"u32 - b {op} {k32}"),
        lambda: same_text(f"CAST(u32 AS BIGINT) + a {op} {k32}"),
        lambda: same_text(f"CAST(i8 AS SMALLINT) * 2 {op} {rng.randint(-260, 260)}"),
        lambda: same_text(f"CAST(a AS {rng.choice(['TINYINT', 'INTEGER', 'INT2'])}) {op} {rng.randint(0, 170)}"),
        # a guarded CAST (DuckDB computes a CASE branch, an OR's later part, only where reached): answered
        lambda: same_text(f"CASE WHEN a > {rng.randint(100, 127)} THEN {rng.randint(-5, 5)} "
                          f"ELSE CAST(a AS TINYINT) END {op} {rng.randint(-5, 130)}"),
        lambda: same_text(f"(a > {rng.randint(100, 127)} OR CAST(a AS TINYINT) {op} {rng.randint(0, 130)})"),
    ]
    return rng.choice(forms)()


def predicate(rng):
    """A clause of residual_cases' generator, or one over `_extra`'s columns, alone or joined to one."""
    r = rng.random()
    if r < 0.6:
        return random_predicate(rng)
    leaf = extra_leaf(rng)
    if r < 0.8:
        return leaf
    other = random_predicate(rng, depth=1)
    op = rng.choice([" AND ", " OR "])
    return f"({leaf[0]}{op}{other[0]})", f"({leaf[1]}{op}{other[1]})"


def _table(rng, part) -> pa.Table:
    t = _extra(partition_table(part, rgs=rng.choice([3, 8, 16])), part)
    if rng.random() < 0.3:
        t = t.set_column(t.schema.get_field_index("s"), "s", t["s"].cast(pa.large_string()))
    if rng.random() < 0.3:
        unit = rng.choice(["ms", "ns"])
        t = t.set_column(t.schema.get_field_index("ts"), "ts", t["ts"].cast(pa.timestamp(unit, "UTC")))
    return t


def write_case(root, seed):
    """The partitions of case `seed` under `root` (a directory), each with its `_pm`: (files,
    the settings each was written with)."""
    rng = random.Random(f"read-fuzz-{seed}")
    files, settings = [], []
    for part in range(rng.choice([2, 3])):
        d = os.path.join(root, f"p{part}")
        os.makedirs(d)
        f = os.path.join(d, "data.parquet")
        opts = writer_options(rng)
        t = _table(rng, part)
        if part:
            t = t.cast(pq.read_schema(files[0]))  # one logical schema per table: the first partition's
        r = rng.random()
        if part and r < 0.35 and t.schema == _plain():
            opts = _duckdb_write(t, f, rng)  # DuckDB's writer reads back as these plain types
        else:
            if part and r > 0.7:
                opts = _polars_write(t, f, rng, opts)
            if opts.get("writer") != "polars":
                pq.write_table(t, f, **opts)
        generate(f)
        files.append(f)
        settings.append(opts)
    return files, settings


def _duckdb_write(t, path, rng) -> dict:
    """`t` written by DuckDB's Parquet writer (its own page layout and encodings); its settings."""
    opts = {"writer": "duckdb", "ROW_GROUP_SIZE": rng.choice([30, 100, 2048]),
            "COMPRESSION": rng.choice(["uncompressed", "snappy", "zstd", "gzip"])}
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", t)
    con.execute(f"COPY (SELECT * FROM t) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE {opts['ROW_GROUP_SIZE']}, "
                f"COMPRESSION {opts['COMPRESSION']})")
    con.close()
    return opts


def _polars_write(t, path, rng, opts) -> dict:
    """`t` written by Polars' own (Rust) Parquet writer, when it reads back with t's types (its
    strings come back large_string): its settings; else `opts`, for pyarrow to write."""
    if any(f.type == pa.string() for f in t.schema):
        return opts
    got = {"writer": "polars", "compression": rng.choice(["uncompressed", "snappy", "zstd", "lz4", "gzip"]),
           "row_group_size": rng.choice([7, 30, 250]), "data_page_size": rng.choice([100, 4096, 1 << 20]),
           "statistics": rng.choice([True, False])}
    pl.from_arrow(t).write_parquet(path, **{k: v for k, v in got.items() if k != "writer"})
    if pq.read_schema(path).remove_metadata() != t.schema.remove_metadata():
        return opts  # pyarrow overwrites it
    return got


@functools.cache
def _plain():
    """The types DuckDB's writer gives back as they are."""
    return _extra(partition_table(0, 1), 0).schema


def _rows(col) -> list:
    return ["NaN" if isinstance(v, float) and math.isnan(v) else v for v in col.to_pylist()]


def differ(got: pa.Table, want: pa.Table):
    """None when `got` equals `want` in schema (names, types, nullability) and values (NaN equal
    to NaN) in order; else what differs."""
    if got.schema.remove_metadata() != want.schema.remove_metadata():
        return f"schema {got.schema.remove_metadata()} != {want.schema.remove_metadata()}"
    if got.num_rows != want.num_rows:
        return f"{got.num_rows} rows, want {want.num_rows}"
    for name in want.column_names:
        a, b = _rows(got[name]), _rows(want[name])
        if a != b:
            i = next(k for k, (x, y) in enumerate(zip(a, b)) if x != y)
            return f"column {name} row {i}: {a[i]!r} != {b[i]!r}"
    return None


def _strict_schema(schema):
    """The schema footer=False gives for pyarrow's `schema`: api.md's differences."""
    return pa.schema([f.with_type(_strict_type(f.type)) for f in schema])


def _refused(names, q) -> bool:
    """footer=False must refuse the read: the UINT64 column (no QuestDB type) is read or filtered on."""
    return "u64" in names or "u64" in q


def _strict_type(t):
    """The type footer=False gives for pyarrow's `t`, where api.md says it differs."""
    if t in (pa.uint8(), pa.uint16()):
        return pa.int32()
    if pa.types.is_timestamp(t):
        return pa.timestamp(t.unit, "UTC")
    if t in (pa.large_string(), pa.string_view()):
        return pa.string()
    return t


def _strict(table, q, got):
    """None when footer=False (no footer byte read) gives `got`'s values in the types api.md
    names; a UINT64 column, which the `_pm` cannot type, read or filtered on, must be refused
    with a PmError naming it."""
    names = got.column_names
    try:
        strict = table.scan(q, names, footer=False).to_table()
    except PmError as e:
        return None if "'u64'" in str(e) and _refused(names, q) else f"footer=False raised {e}"
    if _refused(names, q):
        return "footer=False read a UINT64 column the _pm cannot type"
    want = _strict_schema(got.schema)
    if strict.schema.remove_metadata() != want:
        return f"footer=False schema {strict.schema.remove_metadata()}, api.md says {want}"
    bad = differ(strict, got.cast(want))
    return None if bad is None else f"footer=False: {bad}"


def _handed_off(table, q, d, columns, ids, got, rng):
    """None when the other ways out of a scan agree with `got` (read_table's answer) and `ids`
    (DuckDB's rows): count(), a stream of small batches, and the surviving row groups handed to
    DuckDB as a pyarrow dataset with its own WHERE (pruning must not drop a matching row group)."""
    scan = table.scan(q, columns, batch_rows=rng.choice([3, 7, 100, None]))
    n = scan.count()
    if n != len(ids):
        return f"count() {n}, DuckDB {len(ids)}"
    reader = scan.to_reader()
    batches = list(reader)
    bad = differ(pa.Table.from_batches(batches, reader.schema), got)
    if bad is not None:
        return f"to_reader(): {bad}"
    if max((b.num_rows for b in batches), default=0) > (scan.batch_rows or 1 << 62):
        return f"to_reader() gave a batch over batch_rows={scan.batch_rows}"
    bad = _strict(table, q, got)
    if bad is not None:
        return bad
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", table.scan(q, ["id"]).to_dataset())
    handed = sorted(r[0] for r in con.execute(f"select id from t where {d}").fetchall())
    con.close()
    return None if handed == sorted(ids) else f"to_dataset() through DuckDB: {len(handed)} rows, DuckDB {len(ids)}"


def _remote(remote, columns, q, got):
    """None when the table's copy on object storage (`remote`: (fsspec filesystem, URL)) reads as
    the local one, in the default mode and footer-less (no footer byte, only `_pm` and chunks)."""
    fs, url = remote
    bad = differ(read_table(url, columns, q, filesystem=fs), got)
    if bad is not None:
        return f"from object storage: {bad}"
    names = got.column_names
    if _refused(names, q):  # _strict checks how
        return None
    bad = differ(read_table(url, names, q, filesystem=fs, footer=False), got.cast(_strict_schema(got.schema)))
    return None if bad is None else f"from object storage, footer=False: {bad}"


def run_case(root, seed, queries=40, upload=None) -> dict:
    """Write case `seed` under `root` and check `queries` random queries. Returns a tally:
    "queries", "rows" (queries with matches), "empty", "failures": [(seed, what, detail)] and
    "oracle_errors": [(seed, clause, DuckDB's error)] (clauses DuckDB failed on, not judged).
    `upload(root)`, when given, copies the table to object storage and returns (filesystem, URL):
    each query is then read from there too."""
    files, settings = write_case(root, seed)
    remote = None if upload is None else upload(root)
    rng = random.Random(f"read-fuzz-queries-{seed}")
    con, src = duckdb_source(files)
    whole = ds.dataset(sorted(files), format="parquet").to_table()  # pyarrow's types and order
    tally = {"queries": 0, "rows": 0, "empty": 0, "failures": [], "oracle_errors": []}
    with open_table(root) as table:
        for _ in range(queries):
            q, d = predicate(rng)
            columns = None if rng.random() < 0.25 else rng.sample(COLUMNS, rng.randint(1, 4))
            try:
                ids = [r[0] for r in con.execute(f"select id from {src} where {d}").fetchall()]
            except duckdb.Error as e:  # the oracle cannot say (a value it refuses, an error of its own): not judged
                tally["oracle_errors"].append((seed, q, str(e).splitlines()[0]))
                if isinstance(e, (duckdb.ConversionException, duckdb.OutOfRangeException)):
                    # a value DuckDB refuses: qdbpm raises EvaluationError, or answers where an order
                    # of the conjuncts avoids it (prune/staged.py); anything else is a failure
                    try:
                        read_table(root, columns, q)
                    except EvaluationError:
                        pass
                    except Exception as x:  # noqa: BLE001 - reported with its case
                        tally["failures"].append((seed, f"read_table(where={q!r})", f"raised {type(x).__name__}: {x}"))
                continue
            want = whole.filter(pc.is_in(whole["id"], pa.array(ids, pa.int64())))
            want = want.select(columns) if columns is not None else want
            what = f"read_table(columns={columns}, where={q!r})"
            try:
                got = read_table(root, columns, q)
                bad = differ(got, want) or _handed_off(table, q, d, columns, ids, got, rng) or \
                    (remote and _remote(remote, columns, q, got))
            except Exception as e:  # noqa: BLE001 - every failure is reported with its case
                bad = f"raised {type(e).__name__}: {e}"
            tally["queries"] += 1
            tally["rows" if ids else "empty"] += 1
            if bad is not None:
                tally["failures"].append((seed, what, f"{bad}; writer settings {settings}"))
    con.close()
    return tally
