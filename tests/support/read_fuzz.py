"""Differential fuzzing of reads: random Parquet writer settings x random WHERE clauses, with
`read_table` held to DuckDB for which rows match and to pyarrow.dataset for their values, types
and order. Shared by scripts/fuzz_reads.py (long runs on every core) and
tests/table/test_read_fuzz.py (a few fixed seeds in CI).

A case (one seed) writes 2-3 partitions of support.residual_cases' clustered rows (nulls, NaN,
strings, dates, timestamps, decimals), each with its own writer settings: row group and data page
sizes (several pages per chunk), dictionaries on, off or per column, a dictionary page limit small
enough that a chunk falls back to PLAIN mid-way, every codec pyarrow writes, data pages v1 and v2,
statistics for some columns only, decimals as integers or fixed-length arrays, strings as
large_string, timestamps in another unit; a later partition may be DuckDB's writer's. Each query picks columns (or all) and a clause of
support.residual_cases' generator; its answer must be, exactly, pyarrow's read of the whole files
filtered to the ids DuckDB's SELECT returns, and `count()` must be their number.
"""

from __future__ import annotations

import math
import os
import random

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from qdbpm.sync.generate import generate
from qdbpm.table.read import read_table
from qdbpm.table.table import open_table

from .residual_cases import duckdb_source, partition_table, random_predicate

COLUMNS = ["id", "a", "b", "f", "s", "d", "ts", "dec", "flag"]
_PLAIN = partition_table(0, 1).schema  # the types DuckDB's writer gives back as they are


def writer_options(rng) -> dict:
    """pq.write_table settings for one partition."""
    opts = {
        "row_group_size": rng.choice([7, 30, 64, 250, 1000]),
        "data_page_size": rng.choice([64, 700, 4096, 1 << 20]),
        "use_dictionary": rng.choice([True, False, ["s", "b"], ["a", "d", "dec", "ts", "f"]]),
        "dictionary_pagesize_limit": rng.choice([64, 512, 1 << 20]),  # small: PLAIN pages after a dictionary
        "compression": rng.choice(["none", "snappy", "zstd", "gzip", "lz4", "brotli"]),
        "data_page_version": rng.choice(["1.0", "2.0"]),
        "write_statistics": rng.choice([True, True, ["id", "a", "d", "s"]]),
        "store_decimal_as_integer": rng.choice([True, False]),
    }
    return opts


def _table(rng, part) -> pa.Table:
    t = partition_table(part, rgs=rng.choice([3, 8, 16]))
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
        if part and t.schema != _first_schema(files):
            t = t.cast(_first_schema(files))  # one logical schema per table: the first partition's
        if part and rng.random() < 0.35 and t.schema == _PLAIN:
            opts = _duckdb_write(t, f, rng)  # DuckDB's writer reads back as these plain types
        else:
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


def _first_schema(files):
    return pq.read_schema(files[0]) if files else None


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


def run_case(root, seed, queries=40) -> dict:
    """Write case `seed` under `root` and check `queries` random queries. Returns a tally:
    "queries", "rows" (queries with matches), "empty", and "failures": [(seed, what, detail)]."""
    files, settings = write_case(root, seed)
    rng = random.Random(f"read-fuzz-queries-{seed}")
    con, src = duckdb_source(files)
    whole = ds.dataset(sorted(files), format="parquet").to_table()  # pyarrow's types and order
    tally = {"queries": 0, "rows": 0, "empty": 0, "failures": []}
    with open_table(root) as table:
        for _ in range(queries):
            q, d = random_predicate(rng)
            columns = None if rng.random() < 0.25 else rng.sample(COLUMNS, rng.randint(1, 4))
            ids = [r[0] for r in con.execute(f"select id from {src} where {d}").fetchall()]
            want = whole.filter(pc.is_in(whole["id"], pa.array(ids, pa.int64())))
            want = want.select(columns) if columns is not None else want
            what = f"read_table(columns={columns}, where={q!r})"
            try:
                got = read_table(root, columns, q)
                bad = differ(got, want)
                n = table.scan(q).count()
                if bad is None and n != len(ids):
                    bad = f"count() {n}, DuckDB {len(ids)}"
            except Exception as e:  # noqa: BLE001 - every failure is reported with its case
                bad = f"raised {type(e).__name__}: {e}"
            tally["queries"] += 1
            tally["rows" if ids else "empty"] += 1
            if bad is not None:
                tally["failures"].append((seed, what, f"{bad}; writer settings {settings}"))
    con.close()
    return tally
