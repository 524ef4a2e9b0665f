"""asv: typed stats decode, single-file pruning, table pruning over 1,000 partitions, byte-range
planning. Datasets (benchmarks/datasets.py) are pyarrow-written Parquet files and their `_pm`
(qdbpm.generate), built once per machine in $QDBPM_BENCH_CACHE (default ~/.cache/qdbpm-bench).

asv re-runs `setup` before every timed call, so setups only open cached files (cheap) and put
the object in the state the benchmark names: stats decoded ("cached") or not ("first").
"""

import qdbpm
from qdbpm.prune import stats as S
from qdbpm.prune.sql import parse

from . import datasets as D

SHAPES = ([200, 10_000], [8, 1_000])
SHAPE_NAMES = ["row_groups", "columns"]


def _shape_files(row_groups, columns):
    if row_groups * columns > 1_000_000:
        raise NotImplementedError("10,000 x 1,000 is not built (640 MB of chunk records)")  # asv: skipped
    return D.parquet_and_pm(row_groups, columns)


def _close(obj, attr):
    # teardown runs after a skipped (NotImplementedError) setup too
    x = getattr(obj, attr, None)
    if x is not None:
        x.close()


def _build_shapes():
    for r in SHAPES[0]:
        for c in SHAPES[1]:
            try:
                _shape_files(r, c)
            except NotImplementedError:
                pass


def predicates(row_groups):
    """The three pruning scenarios on the R x C files (all on ts and x)."""
    lo, hi = D.selective_window(row_groups)
    before = D.ts_literal(D.TS0 - 10 * 86_400_000_000)
    return {
        # ts window before the data: the first leaf prunes everything, AND stops there.
        "all_pruned": f"ts < TIMESTAMP '{before}' AND x > 5",
        # both leaves keep every row group: the whole tree is evaluated.
        "none_pruned": f"ts >= TIMESTAMP '{D.ts_literal(D.TS0)}' AND x >= 0",
        # 1 % ts window AND x in its top band: ~0.01 % of the row groups survive.
        "selective": D.predicate_sql(lo, hi),
        # byte-string bounds (the _prune kernels): random strings, so nothing is pruned.
        "string": "s BETWEEN 'sym-100000' AND 'sym-100100' OR s = 'sym-000042'",
    }


class StatsDecode:
    """column_stats: chunk records -> typed min/max/null arrays of one column (no cache)."""

    params = ([200, 10_000], ["ts", "x", "d", "s"])
    param_names = ["row_groups", "column"]

    def setup_cache(self):
        _build_shapes()

    def setup(self, row_groups, column):
        self.pm = qdbpm.open(_shape_files(row_groups, 8)[1])
        self.ct = self.pm.schema.column(column)

    def teardown(self, row_groups, column):
        _close(self, "pm")

    def time_column_stats(self, row_groups, column):
        S.column_stats(self.pm, self.ct.index, self.ct)


class Prune:
    """ParquetMeta.prune after open: stats cached (steady state) and first time (decode included)."""

    params = SHAPES + (["all_pruned", "none_pruned", "selective", "string"],)
    param_names = SHAPE_NAMES + ["scenario"]

    def setup_cache(self):
        _build_shapes()

    def setup(self, row_groups, columns, scenario):
        self.pm = qdbpm.open(_shape_files(row_groups, columns)[1])
        self.expr = parse(predicates(row_groups)[scenario])
        self.pm.prune(self.expr)  # schema and the stats of ts and x decoded

    def teardown(self, row_groups, columns, scenario):
        _close(self, "pm")

    def time_prune_cached(self, row_groups, columns, scenario):
        self.pm.prune(self.expr)

    def time_prune_first(self, row_groups, columns, scenario):
        self.pm._cache.clear()  # as just opened: schema, typed stats and bloom indexes not decoded
        self.pm.prune(self.expr)

    def time_prune_sql_text(self, row_groups, columns, scenario):
        self.pm.prune(predicates(row_groups)[scenario])  # parse + bind + evaluate


class OpenReal:
    """open + verify (CRC) and the chunk view of a generated `_pm`."""

    params = SHAPES
    param_names = SHAPE_NAMES

    def setup_cache(self):
        _build_shapes()

    def setup(self, row_groups, columns):
        self.path = _shape_files(row_groups, columns)[1]

    def time_open_verify(self, row_groups, columns):
        qdbpm.open(self.path).close()

    def time_open_chunks_view(self, row_groups, columns):
        with qdbpm.open(self.path, verify=False) as pm:
            pm.chunks["byte_range_start"][:, 0].max()


def _open_table_all():
    import numpy as np
    import pyarrow as pa

    from qdbpm.table.table import open_table

    # Process-level one-time costs (pyarrow's first string-array conversion) are not pruning.
    pa.table({"partition": pa.array(np.array(["x"], dtype=object), pa.string()),
              "row_group": pa.array(np.zeros(1, np.int32), pa.int32())})
    table = open_table(D.table_dir())
    for p in table.partitions:
        table.meta(p)  # open (map + CRC verify) every partition's _pm
    return table


class TablePruneFirst:
    """Table.prune over 1,000 partitions x 10 row groups x 8 columns (10,000 row groups), every
    partition's `_pm` already open: the first call groups schemas, decodes and concatenates the
    stats of ts and x, evaluates, and builds the pyarrow result."""

    timeout = 300

    def setup_cache(self):
        D.table_dir()

    def setup(self):
        self.table = _open_table_all()
        self.expr = parse(D.predicate_sql(*D.selective_window(10_000)))

    def teardown(self):
        _close(self, "table")

    def time_table_prune_first(self):
        self.table.prune(self.expr)


class TablePruneCached:
    """The same table and predicate, stats already decoded (a second query on the open table)."""

    timeout = 300

    def setup_cache(self):
        D.table_dir()

    def setup(self):
        self.table = _open_table_all()
        self.expr = parse(D.predicate_sql(*D.selective_window(10_000)))
        self.table.prune(self.expr)

    def teardown(self):
        _close(self, "table")

    def time_table_prune_cached(self):
        self.table.prune(self.expr)


class Plan:
    """qdbpm.io.plan: byte ranges of the surviving (or all) row groups, from chunk records."""

    params = ([200, 10_000], ["selective", "all"])
    param_names = ["row_groups", "row_groups_kept"]

    def setup_cache(self):
        _build_shapes()

    def setup(self, row_groups, kept):
        import numpy as np

        self.pm = qdbpm.open(_shape_files(row_groups, 8)[1])
        if kept == "all":
            self.rgs = None
        else:
            lo, hi = D.selective_window(row_groups)
            self.rgs = np.nonzero(self.pm.prune(f"ts BETWEEN TIMESTAMP '{D.ts_literal(lo)}' AND "
                                                f"TIMESTAMP '{D.ts_literal(hi)}'"))[0]

    def teardown(self, row_groups, kept):
        _close(self, "pm")

    def time_plan(self, row_groups, kept):
        from qdbpm.table.ranges import plan

        plan(self.pm, self.rgs, ["ts", "x", "s"])
