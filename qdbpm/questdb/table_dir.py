"""A QuestDB table directory read from its `_txn` and `_meta`: which partition directories are
committed, their rows, whether they are Parquet and the committed Parquet size that pins each
`_pm` snapshot. Stale directories (a lower name suffix) and directories being written (a higher
one) are never named: only `_txn` says which version of a partition is committed."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import CorruptFileError
from .meta import TableMeta, parse_meta
from .names import NONE, partition_ceil, partition_name
from .txn import Txn, parse_txn, read_txn

TXN_FILE, META_FILE = "_txn", "_meta"


@dataclass(frozen=True)
class QuestDbPartition:
    name: str  # the committed directory
    timestamp: int  # in the designated timestamp's unit
    lo: int  # the designated timestamps it may hold: [lo, hi], inclusive
    hi: int
    row_count: int
    parquet: bool
    parquet_size: int  # -1 for native partitions


@dataclass(frozen=True)
class QuestDbTable:
    meta: TableMeta
    txn: Txn
    partitions: tuple  # QuestDbPartition, by timestamp

    @property
    def parquet(self) -> tuple:
        return tuple(p for p in self.partitions if p.parquet)

    @property
    def native(self) -> tuple:
        return tuple(p for p in self.partitions if not p.parquet)


def is_questdb_table(root, filesystem=None) -> bool:
    """`root` holds a `_txn` and a `_meta`."""
    if filesystem is None:
        return all(os.path.isfile(os.path.join(os.fspath(root), f)) for f in (TXN_FILE, META_FILE))
    base = filesystem._strip_protocol(root).rstrip("/")
    return all(filesystem.isfile(f"{base}/{f}") for f in (TXN_FILE, META_FILE))


def read_table_dir(root, filesystem=None, *, deadline: float = 2.0) -> QuestDbTable:
    """The committed partitions of the QuestDB table at `root` (local, or on an fsspec filesystem:
    `_txn` and `_meta` fetched with one request each)."""
    if filesystem is None:
        root = os.fspath(root)
        meta_path, txn_path = os.path.join(root, META_FILE), os.path.join(root, TXN_FILE)
        with open(meta_path, "rb") as f:
            meta = parse_meta(f.read(), meta_path)
        txn = read_txn(txn_path, deadline=deadline)
    else:  # an fsspec filesystem, or what reads through it (storage.s3.S3Direct: paths already bare)
        strip = getattr(filesystem, "_strip_protocol", None)
        base = (strip(root) if strip else root).rstrip("/")
        meta = parse_meta(filesystem.cat_file(f"{base}/{META_FILE}"), f"{base}/{META_FILE}")
        txn = parse_txn(filesystem.cat_file(f"{base}/{TXN_FILE}"), f"{base}/{TXN_FILE}")
    return QuestDbTable(meta, txn, partitions_of(meta, txn))


def partitions_of(meta: TableMeta, txn: Txn) -> tuple:
    """QuestDbPartition per `_txn` entry; PARTITION BY NONE: one `default` partition of the
    transient row count (never Parquet)."""
    unit = meta.timestamp_unit
    if meta.partition_by == NONE:
        return (QuestDbPartition("default", txn.min_timestamp, txn.min_timestamp, txn.max_timestamp,
                                 txn.transient_row_count, False, -1),)
    out, entries = [], txn.partitions
    for k, e in enumerate(entries):
        last = k == len(entries) - 1
        if e.parquet and e.parquet_size < 0:
            raise CorruptFileError(f"_txn: Parquet partition at {e.timestamp} has no committed Parquet size")
        # A partition holds rows up to the next one's start (split partitions end there), the
        # last one up to the table's max timestamp, and never past its own period.
        hi = entries[k + 1].timestamp - 1 if not last else txn.max_timestamp
        hi = min(hi, partition_ceil(e.timestamp, meta.partition_by, unit) - 1)
        out.append(QuestDbPartition(partition_name(e.timestamp, meta.partition_by, e.name_txn, unit), e.timestamp,
                                    e.timestamp, hi, txn.transient_row_count if last else e.row_count, e.parquet,
                                    e.parquet_size if e.parquet else -1))
    return tuple(out)
