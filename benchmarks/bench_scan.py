"""asv: one query over the 1,000-partition table (datasets.table_dir: 1,000 x 10 row groups x 8
columns), end to end through Table.scan, beside DuckDB on the same files.

A one-shot planner pays for opening the table, so `time_*_cold` open it in the timed call;
`time_*_open` reuse an open Table whose `_pm` files are mapped. benchmarks/compare_scan.py has the
S3 side and the ratios against pyarrow.dataset.
"""

import glob
import os

import duckdb

import qdbpm

from . import datasets as D

TIME_RANGE = "ts BETWEEN TIMESTAMP '{}' AND TIMESTAMP '{}'"


def _queries():
    lo, hi = D.selective_window(10_000)
    return {"selective": D.predicate_sql(lo, hi), "time_range": TIME_RANGE.format(D.ts_literal(lo), D.ts_literal(hi))}


class _Bench:
    """What every class here shares: a timeout that covers building a 1,000-partition dataset, and
    a teardown that closes what setup opened (the attribute `handle` names), also when setup failed
    before opening it."""

    timeout = 600
    handle = "table"

    def teardown(self, *params):
        h = getattr(self, self.handle, None)
        if h is not None:
            h.close()


class _TableQuery(_Bench):
    """The 1,000-partition table under each query. One setup_cache for every subclass: asv keys
    the cache by where setup_cache is defined, so it builds the table once for all of them."""

    params = ["selective", "time_range"]
    param_names = ["query"]

    def setup_cache(self):
        D.table_dir()

    def setup(self, query):
        self.root = D.table_dir()
        self.sql = _queries()[query]


class ScanTable(_TableQuery):
    """Table.scan(...).count() / to_table() / to_dataset() over 1,000 partitions."""

    def setup(self, query):
        super().setup(query)
        self.table = qdbpm.open_table(self.root)
        self.table.scan(self.sql).count()  # map every _pm, decode the stats the query needs

    def time_count_open(self, query):
        self.table.scan(self.sql).count()

    def time_count_cold(self, query):
        with qdbpm.open_table(self.root) as t:
            t.scan(self.sql).count()

    def time_to_table_open(self, query):
        self.table.scan(self.sql, ["ts", "x"]).to_table()

    def time_to_dataset_duckdb(self, query):
        ds = self.table.scan(self.sql, ["ts", "x"]).to_dataset()
        con = duckdb.connect()
        try:
            con.register("ds", ds)
            con.execute(f"SELECT count(*), sum(x) FROM ds WHERE {self.sql}").fetchall()
        finally:
            con.close()


class DuckDBTable(_TableQuery):
    """DuckDB over the same 1,000 files with the same predicate (its metadata cache on, warmed)."""

    handle = "con"

    def setup(self, query):
        super().setup(query)
        files = sorted(glob.glob(os.path.join(self.root, "*", "data.parquet")))
        self.con = duckdb.connect()
        self.con.execute("SET parquet_metadata_cache = true")
        self.src = f"read_parquet({files!r})"
        self.time_count()

    def time_count(self, query=None):
        self.con.execute(f"SELECT count(*) FROM {self.src} WHERE {self.sql}").fetchall()


class PlanFullScan(_Bench):
    """The byte-range plan of a scan with no filter over 1,000 partitions (80,000 chunks, one
    coalesced range per partition), on an open table: the units' sizes and ranges
    (table/_coalesce.pyx decides the coalescing)."""

    def setup_cache(self):
        D.table_dir()

    def setup(self):
        self.table = qdbpm.open_table(D.table_dir())

    def time_byte_ranges(self):
        self.table.scan(None, None).byte_ranges()


class PruneKeys(_Bench):
    """A predicate on a hive key (`day = '...'`) over 1,000 `day=YYYY-MM-DD` partitions, after
    open: the keys decide before any `_pm` is opened (issue goal: under 1 ms). Each call asks for
    another day, so nothing is answered from a previous call's work."""

    def setup_cache(self):
        D.hive_table_dir()

    def setup(self):
        self.table = qdbpm.open_table(D.hive_table_dir())
        self.days = [p.split("=", 1)[1] for p in self.table.partitions]
        self.i = 0

    def time_prune_one_day(self):
        self.i = (self.i + 1) % len(self.days)
        self.table.prune(f"day = '{self.days[self.i]}'")
