"""qdbpm: QuestDB Parquet partition metadata (`_pm`): write, read, verify and prune.

The public names (docs/api.md) are loaded on first use (PEP 562), so `import qdbpm.errors` or
`import qdbpm.pm.layout` does not import numpy-heavy layers it does not need.
"""

import importlib
import sys

# The kernels load little-endian fields with plain loads (pm/_validate, prune/_bounds, ...):
# a big-endian host is refused here rather than given wrong answers.
if sys.byteorder != "little":  # pragma: no cover - no big-endian machine runs the suite
    raise ImportError("qdbpm supports little-endian hosts only")

__version__ = "0.1.0"

# Public name -> the submodule that defines it.
_HOMES = {
    "ChecksumError": "errors",
    "CorruptFileError": "errors",
    "EvaluationError": "errors",
    "ParquetFormatError": "errors",
    "PmError": "errors",
    "PredicateError": "errors",
    "SnapshotNotFoundError": "errors",
    "StorageError": "errors",
    "UnsupportedFeatureError": "errors",
    "VanishedError": "errors",
    "ByteRefs": "pm.description",
    "Column": "pm.description",
    "Description": "pm.description",
    "compact": "pm.writer",
    "write_new": "pm.writer",
    "write_update": "pm.writer",
    "ParquetMeta": "meta",
    "open": "meta",
    "Expr": "prune.expr",
    "col": "prune.expr",
    "parse": "prune.sql",
    "as_predicate": "prune.filters",
    "from_arrow": "prune.filters",
    "from_filters": "prune.filters",
    "Table": "table.table",
    "open_table": "table.table",
    "read_table": "table.read",
    "Scan": "table.scan",
    "generate": "sync.generate",
    "update": "sync.generate",
    "append": "sync.append",
    "recover": "sync.append",
}

__all__ = sorted(_HOMES)


def __getattr__(name):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
