"""qdbpm: QuestDB Parquet partition metadata (`_pm`) — write, read, verify and prune."""

from .errors import (
    ChecksumError,
    CorruptFileError,
    ParquetFormatError,
    PmError,
    SnapshotNotFoundError,
    StorageError,
    UnsupportedFeatureError,
)
from .pm.reader import ParquetMeta, open
from .pm.description import ByteRefs, Column, Description
from .pm.writer import write_new, write_update
from .pm.compact import compact

__version__ = "0.1.0"

__all__ = [
    "ByteRefs",
    "ChecksumError",
    "Column",
    "CorruptFileError",
    "Description",
    "ParquetFormatError",
    "ParquetMeta",
    "PmError",
    "SnapshotNotFoundError",
    "StorageError",
    "UnsupportedFeatureError",
    "compact",
    "open",
    "write_new",
    "write_update",
]

from .prune.expr import col, parse  # noqa: E402
from .table.table import Table, open_table  # noqa: E402
from .table.read import read_table  # noqa: E402
from .sync.generate import generate, update  # noqa: E402
from .sync.append import append, recover  # noqa: E402
