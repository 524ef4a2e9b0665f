"""Native (non-Parquet) partitions of a QuestDB table: which ones a predicate may touch, decided from
their designated-timestamp ranges alone. They have no `_pm` and qdbpm reads none of their files, so
a scan that may need their rows must say so (or skip them when told to).

Each native partition is evaluated as one row group whose designated timestamp lies in the range
`_txn` gives it and whose other columns are unknown, by the same rules as every row group
(prune.rules.evaluate): a predicate that cannot be TRUE in that range leaves the partition out.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from ..prune.bind import bind
from ..prune.rules import evaluate
from ..prune.stats import KIND_INT, ColumnStats


def may_touch(predicate, schema, ts_col, lo, hi, rows) -> np.ndarray:
    """bool per native partition: `predicate` (bound over `schema`, a Parquet partition's Schema of
    the same table; None: every row) may be TRUE on one of its rows. lo / hi: the inclusive
    designated-timestamp range of each (int64, the column's unit); rows: its row count (a
    partition without rows holds no match)."""
    rows = np.asarray(rows, np.uint64)
    n = len(rows)
    if predicate is None or n == 0:
        return rows > 0
    if schema is None or ts_col is None or ts_col < 0 or schema.types[ts_col].kind != KIND_INT:
        return rows > 0  # no typed timestamp to decide on: every partition with rows may match
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    kind = schema.types[ts_col].kind
    t = np.ones(n, bool)
    # The designated timestamp is never null and lies in [lo, hi]; nothing else is known.
    ts = ColumnStats(kind, lo, hi, t, t, lo == hi, t, np.zeros(n, np.uint64), rows)

    def stats(col, need=None):
        return ts if col == ts_col else ColumnStats.unknown(schema.types[col].kind, n, rows)

    return evaluate(bind(predicate, schema), n, stats) & (rows > 0)


SKIPPED_NATIVE_KEY = b"qdbpm.skipped_native"


def skipped_metadata(table: pa.Table, skipped) -> pa.Table:
    """`table` with the native partitions a query left out (native="skip") named in its schema
    metadata under SKIPPED_NATIVE_KEY (a JSON list), when there are any."""
    if not skipped:
        return table
    return table.replace_schema_metadata({**(table.schema.metadata or {}),
                                          SKIPPED_NATIVE_KEY: json.dumps(list(skipped)).encode()})
