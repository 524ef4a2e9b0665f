"""Seeded benchmark datasets, built once per machine in a cache directory (never committed)."""

import os
import statistics
import sys
import time

import numpy as np

from qdbpm.pm import layout as L
from qdbpm.pm.description import Column, Description
from qdbpm.pm.writer import write_new

CACHE = os.environ.get("QDBPM_BENCH_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "qdbpm-bench"))


def median_seconds(fn, repeat):
    """Median wall time of fn() over `repeat` calls after one warm-up call."""
    fn()  # warm caches and lazy imports
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def cache_path(*parts):
    path = os.path.join(CACHE, *parts)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def synthetic_description(row_groups: int, columns: int, rows: int = 100, seed: int = 0) -> Description:
    """ts ascending + int64/double columns with exact inline stats, as QuestDB writes them."""
    rng = np.random.default_rng(seed)
    cols = [Column("ts", type=L.QDB_TIMESTAMP | L.QDB_FLAG_DESIGNATED_TIMESTAMP, id=0, physical_type=L.PT_INT64,
                   flags=L.column_flags(repetition=L.REPETITION_REQUIRED), max_def_level=0)]
    for c in range(1, columns):
        pt = L.PT_INT64 if c % 2 else L.PT_DOUBLE
        cols.append(Column(f"c{c}", type=L.QDB_LONG if pt == L.PT_INT64 else L.QDB_DOUBLE, id=c, physical_type=pt))
    ch = np.zeros((row_groups, columns), L.CHUNK_DTYPE)
    ch["codec"] = L.CODEC_ZSTD
    ch["encodings"] = L.ENC_PLAIN
    ch["stat_flags"] = L.STAT_MIN_EXACT | L.STAT_MAX_EXACT | L.STAT_NULL_COUNT_PRESENT
    ch["num_values"] = rows
    sizes = rng.integers(200, 900, (row_groups, columns))
    ch["total_compressed"] = sizes
    ch["byte_range_start"] = 4 + np.concatenate([[0], np.cumsum(sizes.reshape(-1))[:-1]]).reshape(row_groups, columns)
    lo = np.arange(row_groups, dtype=np.int64) * rows * 1000
    vals = np.empty((row_groups, columns, 2), np.int64)
    vals[:, 0, 0], vals[:, 0, 1] = lo, lo + (rows - 1) * 1000
    a = rng.integers(-(10 ** 9), 10 ** 9, (row_groups, columns - 1, 2))
    a.sort(axis=2)
    vals[:, 1:] = a
    for c in range(2, columns, 2):
        vals[:, c] = vals[:, c].astype(np.float64).view(np.int64)
    from qdbpm.pm.description import ByteRefs

    data = vals.reshape(-1).view(np.uint8)
    start = (np.arange(vals.size, dtype=np.int64) * 8).reshape(vals.shape)
    stats = ByteRefs(data, start, np.full(vals.shape, 8, np.int64))
    return Description(columns=cols, num_rows=np.full(row_groups, rows, np.uint64), chunks=ch, stats=stats,
                       designated_timestamp=0, sorting_is_dts_asc=True,
                       parquet_footer_offset=int(ch["byte_range_start"][-1, -1] + sizes[-1, -1]),
                       parquet_footer_length=1000)


def synthetic_pm(row_groups: int, columns: int) -> str:
    path = cache_path("pm", f"synthetic_{row_groups}x{columns}", "_pm")
    if not os.path.exists(path):
        write_new(path, synthetic_description(row_groups, columns))
    return path


# --- Parquet files and tables for pruning and the peer comparison ----------------------------
#
# Schema: `ts` (timestamp[us], ascending, declared as the sorting column, not null), then columns
# cycling int64 / double / string: `x`, `d`, `s`, then `i4`, `d5`, `s6`, ... Row group r holds
# rows [r*rows, (r+1)*rows); ts advances one second per row from TS0. Every int64 column of row
# group r draws from its own band [b*1000, b*1000+999] (b random in 0..99), so `x > 98999`
# keeps about 1 % of the row groups; doubles are uniform in [0, 1); strings are 'sym-NNNNNN'
# (10 bytes: out-of-line stats in the `_pm`). Written once per machine, atomically.

TS0 = 1_704_067_200_000_000  # 2024-01-01T00:00:00 in microseconds
X_BANDS = 100


def column_names(columns: int) -> list:
    names = ["ts"]
    for k in range(1, columns):
        kind = "xds"[(k - 1) % 3]
        names.append(kind if k <= 3 else f"{'ids'[(k - 1) % 3]}{k}")
    return names


def _table(row_groups, columns, rows, seed, first_row=0):
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    n = row_groups * rows
    ts = TS0 + (first_row + np.arange(n, dtype=np.int64)) * 1_000_000
    arrays = {"ts": pa.array(ts, pa.timestamp("us"))}
    # A few distinct arrays per kind, reused (rolled) across columns: 1,000 columns stay cheap.
    ints = [(np.repeat(rng.integers(0, X_BANDS, row_groups), rows) * 1000 + rng.integers(0, 1000, n)).astype(np.int64)
            for _ in range(4)]
    dbls = [rng.random(n) for _ in range(4)]
    strs = [pa.array(np.char.add("sym-", np.char.zfill(rng.integers(0, 10**6, n).astype(str), 6)).astype(object),
                     pa.string()) for _ in range(4)]
    for k, name in enumerate(column_names(columns)[1:], start=1):
        kind, j = (k - 1) % 3, ((k - 1) // 3) % 4
        arrays[name] = [ints, dbls, strs][kind][j]
    fields = [pa.field("ts", pa.timestamp("us"), nullable=False)] + \
        [pa.field(nm, arrays[nm].type if hasattr(arrays[nm], "type") else pa.from_numpy_dtype(arrays[nm].dtype))
         for nm in list(arrays)[1:]]
    return pa.table(arrays, schema=pa.schema(fields))


def _write_parquet(path, table, rows):
    import pyarrow.parquet as pq

    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    pq.write_table(table, tmp, row_group_size=rows, sorting_columns=[pq.SortingColumn(0)])
    os.replace(tmp, path)


def _generate_pm(parquet, pm):
    from qdbpm.sync.generate import generate

    tmp = f"{pm}.{os.getpid()}.tmp"
    generate(parquet, tmp, bloom=None)
    os.replace(tmp, pm)


def parquet_and_pm(row_groups: int, columns: int, rows: int = 100, seed: int = 1) -> tuple:
    """(data.parquet, _pm) of an R x C file written by pyarrow, its `_pm` by qdbpm.generate."""
    d = os.path.join(CACHE, "compare", f"rg{row_groups}x{columns}_{rows}_s{seed}")
    parquet, pm = os.path.join(d, "data.parquet"), os.path.join(d, "_pm")
    if not os.path.exists(parquet):
        _write_parquet(parquet, _table(row_groups, columns, rows, seed), rows)
    if not os.path.exists(pm):
        _generate_pm(parquet, pm)
    return parquet, pm


def table_dir(partitions: int = 1000, row_groups: int = 10, columns: int = 8, rows: int = 100, seed: int = 2,
              jobs: int = 1) -> str:
    """A table root of `partitions` day directories (2024-01-01, ...), each data.parquet + _pm of
    R x C; ts continues across partitions. Built once (by `jobs` processes); `.complete` marks a
    finished build."""
    root = os.path.join(CACHE, "tables", f"p{partitions}_rg{row_groups}x{columns}_{rows}_s{seed}")
    if os.path.exists(os.path.join(root, ".complete")):
        return root
    if partitions >= 2000:  # minutes, not seconds: say why the run is quiet
        print(f"building {root}: {partitions:,} partitions, once (~12 ms each / {jobs} jobs)",
              file=sys.stderr, flush=True)
    args = (root, row_groups, columns, rows, seed)
    if jobs > 1:
        import concurrent.futures as cf

        with cf.ProcessPoolExecutor(jobs) as ex:
            list(ex.map(_build_partitions, [args + (range(k, partitions, jobs),) for k in range(jobs)]))
    else:
        _build_partitions(args + (range(partitions),))
    with open(os.path.join(root, ".complete"), "w"):
        pass
    return root


def _build_partitions(args):
    import datetime as dt

    root, row_groups, columns, rows, seed, which = args
    day0 = dt.date(2024, 1, 1)
    for p in which:
        d = os.path.join(root, (day0 + dt.timedelta(days=p)).isoformat())
        parquet, pm = os.path.join(d, "data.parquet"), os.path.join(d, "_pm")
        if not os.path.exists(parquet):
            _write_parquet(parquet, _table(row_groups, columns, rows, seed + p, first_row=p * row_groups * rows), rows)
        if not os.path.exists(pm):
            _generate_pm(parquet, pm)


def hive_table_dir(partitions: int = 1000) -> str:
    """table_dir's partitions as hive `day=YYYY-MM-DD` directories (hard links to the same files):
    `day` is a partition key a predicate can prune on before any `_pm` is opened."""
    src = table_dir(partitions)
    root = src + "_hive"
    if os.path.exists(os.path.join(root, ".complete")):
        return root
    for day in sorted(os.listdir(src)):
        if not os.path.isdir(os.path.join(src, day)):
            continue
        d = os.path.join(root, f"day={day}")
        os.makedirs(d, exist_ok=True)
        for name in ("data.parquet", "_pm"):
            if not os.path.exists(os.path.join(d, name)):
                os.link(os.path.join(src, day, name), os.path.join(d, name))
    with open(os.path.join(root, ".complete"), "w"):
        pass
    return root


def ts_literal(micros: int) -> str:
    """SQL TIMESTAMP literal text of a microsecond instant (UTC), e.g. 2024-01-01T00:00:00.000000."""
    import datetime as dt

    t = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(micros))
    return t.isoformat(timespec="microseconds")


def selective_window(row_groups: int, rows: int = 100, first: int | None = None, width: int | None = None) -> tuple:
    """(lo, hi) microseconds covering `width` row groups (default 1 %, at least 2) from `first`
    (default the middle): the ts part of the 'almost nothing survives' predicate."""
    width = width or max(2, row_groups // 100)
    first = row_groups // 2 if first is None else first
    lo = TS0 + first * rows * 1_000_000
    hi = TS0 + ((first + width) * rows - 1) * 1_000_000
    return lo, hi


X_CUT = (X_BANDS - 1) * 1000 - 1  # x > X_CUT keeps the row groups in the top band (~1 %)


def predicate_sql(lo: int, hi: int, x_cut: int = X_CUT) -> str:
    return f"ts BETWEEN TIMESTAMP '{ts_literal(lo)}' AND TIMESTAMP '{ts_literal(hi)}' AND x > {x_cut}"


def arrow_filter(lo: int, hi: int, x_cut: int = X_CUT):
    """predicate_sql as a pyarrow.dataset filter expression."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    t = pa.timestamp("us")
    return (ds.field("ts") >= pa.scalar(lo, t)) & (ds.field("ts") <= pa.scalar(hi, t)) & (ds.field("x") > x_cut)
