"""`_meta`: a QuestDB table's column count, partitioning, designated timestamp, table version and
columns (type codes and names). Only table version 426 (every table with an A/B `_txn`) is read."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import CorruptFileError, UnsupportedFeatureError
from ..pm import layout as L

TABLE_VERSION = 426
COLUMNS_AT = 128
COLUMN_SIZE = 32
MAX_COLUMNS = 1 << 16  # QuestDB's limit is far below; a larger count is corruption, not a table
PARTITION_BY = {0: "DAY", 1: "MONTH", 2: "YEAR", 3: "NONE", 4: "HOUR", 5: "WEEK"}


@dataclass(frozen=True)
class TableMeta:
    column_count: int
    partition_by: int
    timestamp_index: int  # -1: no designated timestamp
    table_version: int
    metadata_version: int
    columns: tuple  # ((name, type code), ...)

    @property
    def partition_by_name(self) -> str:
        return PARTITION_BY[self.partition_by]

    @property
    def timestamp_name(self):
        return None if self.timestamp_index < 0 else self.columns[self.timestamp_index][0]

    @property
    def timestamp_unit(self) -> str:
        """'us' or 'ns': the designated timestamp's unit (partition timestamps in `_txn` use it)."""
        if self.timestamp_index < 0:
            return "us"
        code = self.columns[self.timestamp_index][1]
        return "ns" if code & L.QDB_FLAG_TIMESTAMP_NANOS else "us"


def parse_meta(data: bytes, where: str = "_meta") -> TableMeta:
    data = bytes(data)
    if len(data) < COLUMNS_AT:
        raise CorruptFileError(f"{where}: {len(data)} bytes, shorter than the {COLUMNS_AT}-byte header")
    count, partition_by, ts_index, version = struct.unpack_from("<iiii", data, 0)
    (metadata_version,) = struct.unpack_from("<q", data, 32)
    if version != TABLE_VERSION:
        raise UnsupportedFeatureError(f"{where}: table version {version}; qdbpm reads version {TABLE_VERSION}")
    if not 0 <= count <= MAX_COLUMNS:
        raise CorruptFileError(f"{where}: column count {count}")
    if partition_by not in PARTITION_BY:
        raise CorruptFileError(f"{where}: partitionBy {partition_by} is none of {sorted(PARTITION_BY)}")
    if ts_index < -1 or ts_index >= count:
        raise CorruptFileError(f"{where}: designated timestamp index {ts_index} of {count} columns")
    at = COLUMNS_AT + COLUMN_SIZE * count
    if at > len(data):
        raise CorruptFileError(f"{where}: {count} columns need {at} bytes, the file has {len(data)}")
    types = [struct.unpack_from("<i", data, COLUMNS_AT + COLUMN_SIZE * i)[0] for i in range(count)]
    names = []
    for i in range(count):
        if at + 4 > len(data):
            raise CorruptFileError(f"{where}: name of column {i} runs past the end")
        (n,) = struct.unpack_from("<i", data, at)
        if n < 0 or at + 4 + 2 * n > len(data):
            raise CorruptFileError(f"{where}: name of column {i} has length {n} at {at}, past the end")
        try:
            names.append(data[at + 4 : at + 4 + 2 * n].decode("utf-16-le"))
        except UnicodeDecodeError:
            raise CorruptFileError(f"{where}: name of column {i} is not UTF-16") from None
        at += 4 + 2 * n
    if ts_index >= 0 and L.qdb_type_tag(types[ts_index]) != L.QDB_TIMESTAMP:
        raise CorruptFileError(f"{where}: designated timestamp column {ts_index} has type {types[ts_index]}")
    return TableMeta(count, partition_by, ts_index, version, metadata_version, tuple(zip(names, types)))
