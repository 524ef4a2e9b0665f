"""A SYMBOL column's symbol map header (`<column>.o`, or `<column>.o.<name txn>` after the column was
re-created), read for one fact: whether the table has ever stored a NULL in that column.

QuestDB's partition encoder passes that flag to the `_pm` writer: a symbol column whose map holds
no NULL is described REQUIRED in `_pm`, every other column OPTIONAL (its JNI caller sets bit 31 of
the column type, `PARQUET_SYMBOL_NOT_NULL_HINT`, from `SymbolMapWriter.getNullFlag()`). The flag
is table-wide, so a partition without NULLs in a column that has NULLs elsewhere is still OPTIONAL:
only this file says so, the Parquet file does not.
"""

from __future__ import annotations

import os
import re

from ..errors import CorruptFileError

NULL_FLAG_OFFSET = 8  # u8 after the i32 capacity and the cache flag (padded to 8)
HEADER_MIN = NULL_FLAG_OFFSET + 1


def symbol_map_files(root, columns) -> dict:
    """{column: path} of the one symbol map header of each of `columns` in the table at `root`.
    A column with none, or with several versions (`.o` beside `.o.N`: which one is live is in
    `_cv`, not read here), is left out."""
    try:
        names = os.listdir(os.fspath(root))
    except OSError:
        return {}
    found = {}
    for n in names:
        m = _MAP_FILE.fullmatch(n)
        if m:
            found.setdefault(m.group(1), []).append(n)
    return {c: os.path.join(os.fspath(root), found[c][0]) for c in columns if len(found.get(c, ())) == 1}


_MAP_FILE = re.compile(r"(.+)\.o(?:\.\d+)?")


def has_null(path) -> bool:
    """The symbol map's NULL flag: the table has stored a NULL in the column."""
    with open(path, "rb") as f:
        head = f.read(HEADER_MIN)
    if len(head) < HEADER_MIN:
        raise CorruptFileError(f"{path}: symbol map header is {len(head)} bytes, shorter than {HEADER_MIN}")
    flag = head[NULL_FLAG_OFFSET]
    if flag > 1:
        raise CorruptFileError(f"{path}: symbol map NULL flag at offset {NULL_FLAG_OFFSET} is {flag}, not 0 or 1")
    return bool(flag)


def symbol_not_null(root, columns) -> dict:
    """{column name: True when its symbol map holds no NULL} for the `columns` whose single map
    header is found at `root`; columns without one are left out (the caller decides)."""
    return {name: not has_null(path) for name, path in symbol_map_files(root, columns).items()}
