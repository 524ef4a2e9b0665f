"""One Parquet file's successive states as `_pm` Descriptions: what the update, MVCC and crash
tests write snapshot after snapshot."""

import numpy as np

from qdbpm.pm import layout as L
from qdbpm.pm.description import Column, Description

COLS = [Column("ts", type=L.QDB_TIMESTAMP, physical_type=L.PT_INT64), Column("s", type=L.QDB_VARCHAR, physical_type=L.PT_BYTE_ARRAY)]


def table_state(n_rg, version, changed=()):
    """Description of a Parquet file with n_rg row groups; row groups in `changed` moved."""
    rgs = []
    for r in range(n_rg):
        ch = np.zeros(2, L.CHUNK_DTYPE)
        start = 4 + r * 1000 + (500_000 * version if r in changed else 0)
        ch["byte_range_start"] = [start, start + 400]
        ch["total_compressed"] = [400, 600]
        ch["num_values"] = 10 + r
        ch["stat_flags"] = L.STAT_NULL_COUNT_PRESENT
        rgs.append({"num_rows": 10 + r, "chunks": ch,
                    "mins": [np.int64(r * 100).tobytes(), f"min-{r}-{version}-long-string".encode()],
                    "maxs": [np.int64(r * 100 + 99).tobytes(), b"z"],
                    "blooms": {1: bytes([r, version]) * 16}})
    return Description.from_row_groups(COLS, rgs, parquet_footer_offset=10_000 + 100 * version,
                                       parquet_footer_length=50 + version, bloom_columns=[1])
