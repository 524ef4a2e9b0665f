"""The one errors module. Every bad-input error is a PmError, and so also a ValueError."""

__all__ = [
    "PmError",
    "CorruptFileError",
    "ChecksumError",
    "UnsupportedFeatureError",
    "SnapshotNotFoundError",
    "ParquetFormatError",
    "StorageError",
    "VanishedError",
    "PredicateError",
    "EvaluationError",
]


class PmError(ValueError):
    """Base of every bad-input error raised by qdbpm."""


class CorruptFileError(PmError):
    """A `_pm` structural violation: size, offset or section out of range, truncated, invalid value."""


class ChecksumError(CorruptFileError):
    """The footer CRC does not match the bytes it covers."""


class UnsupportedFeatureError(PmError):
    """An unknown required feature bit (32..63) is set."""


class SnapshotNotFoundError(PmError):
    """No footer reachable through the PREV chain matches the pinned Parquet size."""


class ParquetFormatError(PmError):
    """The Parquet input is unusable: magic, truncated or corrupt footer, chunks with file_path."""


class StorageError(PmError, OSError):
    """Object-store or file bytes do not match what the `_pm` says (past the end, short read)."""


class VanishedError(StorageError, FileNotFoundError):
    """A file or object that a `_pm` snapshot describes is gone (QuestDB purges a partition
    version it replaced; read_table re-reads `_txn` and reads again)."""


class PredicateError(PmError):
    """A predicate that cannot be parsed or bound: syntax, unknown column, literal of the wrong type."""


class EvaluationError(PredicateError):
    """A predicate that cannot be computed over the values read: an integer overflow, a value
    outside a CAST's type (where DuckDB raises too). Names the partition and the Arrow error."""
