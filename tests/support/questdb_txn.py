"""Test-only writers of QuestDB's `_txn` and `_meta` (docs: qdbpm/questdb/txn.py, meta.py), so
tests can build table directories QuestDB would write: either slot current, any partition flags,
symbols, and torn states."""

import struct

from qdbpm.questdb import txn as T

PARQUET, READ_ONLY, BESIDE_NATIVE = T.FLAG_PARQUET, T.FLAG_READ_ONLY, T.FLAG_PARQUET_BESIDE_NATIVE


def entry(ts, rows, name_txn=-1, parquet_size=-1, flags=0, squash=0):
    """One partition-table entry: (timestamp, rows | flags, name txn, parquet size)."""
    word = rows | flags | (squash << T.SQUASH_SHIFT)
    if word >= 1 << 63:
        word -= 1 << 64
    return (ts, word, name_txn, parquet_size)


def txn_bytes(entries, *, version=2, transient=None, fixed=0, min_ts=0, max_ts=None, symbols=(),
              record_txn=None, stale_other=True) -> bytes:
    """A `_txn` whose current slot (version's parity) holds the record; the other slot an older
    one (stale_other) at another offset."""
    sym = b"".join(struct.pack("<ii", c, t) for c, t in symbols)
    table = b"".join(struct.pack("<qqqq", *e) for e in entries)
    transient = entries[-1][1] & T.ROW_COUNT_MASK if transient is None and entries else (transient or 0)
    max_ts = entries[-1][0] if max_ts is None and entries else (max_ts or 0)

    def record(txn):
        head = struct.pack("<q", txn) + struct.pack("<11q", transient, fixed, min_ts, max_ts, 1, 1, 1, 1, 0, 0, 0)
        head = head.ljust(T.SYMBOLS_AT, b"\0")
        return head + struct.pack("<i", len(symbols)) + sym + struct.pack("<i", len(table)) + table

    cur = record(version if record_txn is None else record_txn)
    old = record(version - 1) if stale_other else b"\0" * len(cur)
    size = T.record_size(len(sym), len(table))
    offs = [T.HEADER_SIZE, T.HEADER_SIZE + ((size + 7) & ~7)]
    slot = version & 1
    head = bytearray(T.HEADER_SIZE)
    struct.pack_into("<q", head, 0, version)
    for k in (0, 1):
        struct.pack_into("<iii", head, T.SLOT_AT[k], offs[k], len(sym), len(table))
    body = bytearray(offs[1] + len(cur))
    body[: T.HEADER_SIZE] = head
    body[offs[slot] : offs[slot] + len(cur)] = cur
    body[offs[1 - slot] : offs[1 - slot] + len(old)] = old
    return bytes(body)


def meta_bytes(columns, partition_by, ts_index, *, table_version=426, metadata_version=1) -> bytes:
    """A `_meta`: columns [(name, type code)]."""
    head = bytearray(128)
    struct.pack_into("<iiii", head, 0, len(columns), partition_by, ts_index, table_version)
    struct.pack_into("<q", head, 32, metadata_version)
    cols = b"".join(struct.pack("<i", t).ljust(32, b"\0") for _, t in columns)
    names = b"".join(struct.pack("<i", len(n)) + n.encode("utf-16-le") for n, _ in columns)
    return bytes(head) + cols + names
