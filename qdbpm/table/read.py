"""`read_table`: the matching rows of a table in one pyarrow.Table, through `Table.scan`.

Prune with `_pm`, fetch only the surviving chunks' byte ranges, decode them behind a synthesised
Parquet footer, then filter rows exactly (decode.py). `footer=False` is strict footer-less mode:
no footer byte is read, types come from `_pm` alone (see read_table's docstring for which differ
from pyarrow's), and a column whose values `_pm` cannot give exactly is refused with a PmError
rather than returned different.
"""

from __future__ import annotations

import pyarrow as pa

from ..errors import PmError, StorageError
from .ranges import DEFAULT_MAX_GAP
from .table import RETRIES, Table, open_table


def read_table(root, columns=None, where=None, filesystem=None, *, schema=None, max_gap=DEFAULT_MAX_GAP,
               footer=True, native="error") -> pa.Table:
    """Rows of a partitioned table matching `where`, reading only surviving chunks' byte ranges:
    `open_table(root, filesystem).scan(where, columns, ...).to_table()`.

    root: an open Table, a local directory, a path / URI on the fsspec `filesystem`, or an fsspec
    URL (e.g. s3://bucket/table); a QuestDB table directory is read as its `_txn` commits it
    (open_table), and read again when QuestDB purges a partition version mid-read. native: see
    Table (what a query needing a QuestDB native partition does). columns: names to return (default: all of the first partition).
    where: a predicate or SQL text. schema: optional Arrow schema the result is cast to (with
    footer=False it also gives the type of a refused column, see below).

    footer=True (default): the result equals `pyarrow.dataset.dataset(files).to_table(columns,
    filter)` on the same files: values, types, nullability, field order. Each distinct `_pm`
    column schema costs one range read of its Parquet footer (partitions sharing it share it).

    footer=False: strict footer-less mode, no footer byte is read; types come from `_pm` alone, i.e.
    from the Parquet physical and logical type without the file's ARROW:schema. Values are
    pyarrow's; the types are pyarrow's except exactly here:
    - unsigned 8 / 16-bit integers come back as int32;
    - timestamps of any time zone, or naive (isAdjustedToUTC=false), as tz="UTC" in the stored
      unit (same instants: a naive value is read as UTC);
    - strings (large_string, string_view, dictionary<string>) as string; binary (large_binary,
      binary_view) as binary;
    - duration and date64 (named by ARROW:schema only) and time32 / time64 (no QuestDB type) as
      their Parquet storage: int64, date32, int32 / int64;
    - a column without a QuestDB type whose raw values could mean something else, i.e. an INT64
      (uint64, or a timestamp unit `_pm` cannot name) or a 2-byte fixed-length array (float16),
      is refused (PmError naming it) unless `schema=` names its type: its raw values are then
      reinterpreted (Arrow `view`, same width) as that type, e.g. pa.uint64(). Or use footer=True.
    """
    kw = dict(footer=footer, max_gap=max_gap, schema=schema)
    if isinstance(root, Table):
        if filesystem is not None:
            raise PmError("filesystem= is for a root path; an open Table already has its filesystem")
        return root.scan(where, columns, **kw).to_table()
    for _ in range(RETRIES):
        table = None
        try:
            table = open_table(root, filesystem, native=native)
            with table:
                return table.scan(where, columns, **kw).to_table()
        except FileNotFoundError as e:
            # QuestDB purged a partition version mid-read: its _txn names the new one; read again
            if table is None or table.questdb is None:
                raise
            gone = e
    raise StorageError(f"{root}: files vanished during {RETRIES} reads (QuestDB purges replaced "
                       f"partition versions faster than this table can be read): {gone}") from gone
