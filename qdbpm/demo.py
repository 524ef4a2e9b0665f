"""`qdbpm demo`: the main job on its embedded default, end to end on local files."""

from __future__ import annotations

import dataclasses
import os
import tempfile

import numpy as np

from . import layout as L
from .desc import Column, Description
from .reader import open as open_pm
from .writer import write_new, write_update

DAY_US = 86_400_000_000


def _trades_description(day: int, row_groups: int, rows_per_group: int = 1000) -> Description:
    """A QuestDB-shaped trades partition: designated ts, symbol, price, qty (stats, no data)."""
    cols = [
        Column("ts", type=L.QDB_TIMESTAMP | L.QDB_FLAG_DESIGNATED_TIMESTAMP, id=0, physical_type=L.PT_INT64,
               flags=L.column_flags(repetition=L.REPETITION_REQUIRED), max_def_level=0),
        Column("sym", type=L.QDB_SYMBOL, id=1, physical_type=L.PT_BYTE_ARRAY),
        Column("price", type=L.QDB_DOUBLE, id=2, physical_type=L.PT_DOUBLE),
        Column("qty", type=L.QDB_LONG, id=3, physical_type=L.PT_INT64),
    ]
    rng = np.random.default_rng(day)
    rgs, pos = [], 4
    step = DAY_US // max(row_groups, 1)
    for r in range(row_groups):
        lo = day * DAY_US + r * step
        chunks = np.zeros(4, L.CHUNK_DTYPE)
        sizes = rng.integers(2000, 8000, 4)
        for c in range(4):
            chunks[c] = (L.CODEC_ZSTD, L.ENC_PLAIN | L.ENC_RLE_DICTIONARY,
                         L.STAT_MIN_EXACT | L.STAT_MAX_EXACT | L.STAT_NULL_COUNT_PRESENT, 0, 0,
                         rows_per_group, pos, sizes[c], 0, 0, 0, 0)
            pos += int(sizes[c])
        px = np.sort(rng.uniform(90, 110, 2))
        rgs.append({
            "num_rows": rows_per_group,
            "chunks": chunks,
            "mins": [np.int64(lo).tobytes(), b"AAPL", px[0].tobytes(), np.int64(1).tobytes()],
            "maxs": [np.int64(lo + step - 1).tobytes(), b"TSLA", px[1].tobytes(), np.int64(500).tobytes()],
        })
    return Description.from_row_groups(cols, rgs, designated_timestamp=0, sorting_is_dts_asc=True,
                                       parquet_footer_offset=pos, parquet_footer_length=600)


def run_demo(args) -> int:
    root = args.dir or tempfile.mkdtemp(prefix="qdbpm-demo-")
    os.makedirs(root, exist_ok=True)
    print(f"building 3 daily partitions of a trades table in {root}")
    for day in range(3):
        part = os.path.join(root, f"2024-01-0{day + 1}")
        os.makedirs(part, exist_ok=True)
        size = write_new(os.path.join(part, "_pm"), _trades_description(19723 + day, 8))
        print(f"  {part}/_pm: {size} bytes, 8 row groups")
    pm_path = os.path.join(root, "2024-01-03", "_pm")
    grown = _trades_description(19725, 10)
    with open_pm(pm_path) as pm:
        old = pm.to_description()
    # Same first 8 row groups (same chunk starts), two appended: an update-mode commit.
    grown.chunks[:8] = old.chunks
    grown = dataclasses.replace(grown, unused_bytes=old.parquet_footer_length + 8)
    new_size = write_update(pm_path, grown)
    with open_pm(pm_path) as pm:
        print(f"update: {pm_path} grew to {new_size} bytes; snapshots (Parquet sizes) {pm.snapshots()}")
        for size in pm.snapshots():
            with open_pm(pm_path, parquet_size=size) as snap:
                print(f"  snapshot {size}: {snap.row_group_count} row groups, {int(snap.num_rows.sum())} rows, CRC ok")
    return 0
