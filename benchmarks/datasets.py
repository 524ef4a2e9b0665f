"""Seeded benchmark datasets, built once per machine in a cache directory (never committed)."""

import os

import numpy as np

from qdbpm import layout as L
from qdbpm.desc import Column, Description
from qdbpm.writer import write_new

CACHE = os.environ.get("QDBPM_BENCH_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "qdbpm-bench"))


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
    from qdbpm.desc import ByteRefs

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
