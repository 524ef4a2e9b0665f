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
from .reader import ParquetMeta, open
from .desc import ByteRefs, Column, Description
from .writer import write_new, write_update
from .api import compact

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

from .expr import col, parse  # noqa: E402
from .table import Table, open_table  # noqa: E402
from .read import read_table  # noqa: E402
from .generate import generate, update  # noqa: E402
from .append import append, recover  # noqa: E402
