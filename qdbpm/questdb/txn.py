"""`_txn`: QuestDB's commit record, double-buffered (slots A and B), read consistently.

Header (64 bytes): the version (even: slot A is current, odd: slot B), then per slot its record
offset, symbol-section bytes and partition-table bytes (i32 x 3, at 8 and 32); the rest is zero
padding. The record starts with the txn (equal to the version once written), row counts,
timestamps and versions, the symbol counts, and the partition table: 4 longs per partition
(timestamp; row count with flags above bit 44; name txn; committed Parquet size). See
docs/questdb.md.

`read_txn` follows QuestDB's own reader: read the version, the slot, re-check the version, check
the record's txn, read it, re-check; any change means a writer was there, so read again until a
deadline. `parse_txn` reads bytes fetched whole (an object store replaces an object atomically):
the same checks, no retry.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass

from ..errors import CorruptFileError, StorageError

HEADER_SIZE = 64
SLOT_AT = (8, 32)  # slot A, slot B: (record offset, symbol bytes, partition-table bytes) as i32 x 3
PADDING = ((20, 32), (44, 64))  # header bytes that are always zero
RECORD_FIXED = 128  # txn .. lag fields; the symbol count follows
SYMBOLS_AT = 128
ENTRY_SIZE = 32  # one partition: 4 x i64
ROW_COUNT_BITS = 44
ROW_COUNT_MASK = (1 << ROW_COUNT_BITS) - 1
FLAG_PARQUET_BESIDE_NATIVE = 1 << 60
FLAG_PARQUET = 1 << 61
FLAG_READ_ONLY = 1 << 62
SQUASH_SHIFT, SQUASH_MASK = 44, 0xFFFF  # bits 44-59
RETRY_PAUSE = 0.001  # seconds between attempts while a writer is busy


@dataclass(frozen=True)
class TxnPartition:
    """One partition-table entry."""

    timestamp: int  # the partition's timestamp, in the designated timestamp's unit
    row_count: int  # stored count (the last partition's is stale: Txn.transient_row_count)
    name_txn: int  # the directory suffix, -1 for none
    parquet_size: int  # committed data.parquet size, -1 for none
    parquet: bool
    read_only: bool
    parquet_beside_native: bool
    squash_count: int


@dataclass(frozen=True)
class Txn:
    """A consistent `_txn` record."""

    version: int
    txn: int
    transient_row_count: int
    fixed_row_count: int
    min_timestamp: int
    max_timestamp: int
    structure_version: int
    data_version: int
    partition_table_version: int
    column_version: int
    truncate_version: int
    seq_txn: int
    symbols: tuple  # ((committed, transient), ...) per symbol column
    partitions: tuple  # TxnPartition, by timestamp


class _Torn(Exception):
    """A writer changed the file while it was read: read again (`short`: the record ran past the
    end, which is corruption unless the version moved meanwhile)."""

    def __init__(self, msg, short=False):
        super().__init__(msg)
        self.short = short


def _header(head: bytes, where: str):
    """(version, record offset, symbol bytes, partition bytes) of a 64-byte header."""
    if len(head) < HEADER_SIZE:
        raise CorruptFileError(f"{where}: {len(head)} bytes, shorter than the {HEADER_SIZE}-byte header")
    for a, b in PADDING:
        if any(head[a:b]):
            raise CorruptFileError(f"{where}: non-zero header padding at [{a}, {b})")
    version = struct.unpack_from("<q", head, 0)[0]
    off, sym, part = struct.unpack_from("<iii", head, SLOT_AT[version & 1])
    if version < 0:
        raise CorruptFileError(f"{where}: negative version {version}")
    if off < HEADER_SIZE or sym < 0 or part < 0:
        raise CorruptFileError(f"{where}: slot {'AB'[version & 1]} has record offset {off}, symbol bytes {sym}, "
                               f"partition bytes {part}")
    if sym % 8:
        raise CorruptFileError(f"{where}: symbol section of {sym} bytes is not a multiple of 8")
    if part % ENTRY_SIZE:
        raise CorruptFileError(f"{where}: partition table of {part} bytes is not a multiple of {ENTRY_SIZE}")
    return version, off, sym, part


def record_size(sym: int, part: int) -> int:
    return RECORD_FIXED + 4 + sym + 4 + part


def _record(version, rec: bytes, sym: int, part: int, where: str) -> Txn:
    """The Txn of a record (its bytes from the slot's offset) whose header said `version`."""
    if len(rec) < record_size(sym, part):
        raise _Torn(f"{where}: the record ({record_size(sym, part)} bytes) runs past the end of the file", True)
    txn = struct.unpack_from("<q", rec, 0)[0]
    if txn != version:
        raise _Torn(f"{where}: record txn {txn} != header version {version}")
    f = struct.unpack_from("<11q", rec, 8)
    (transient, fixed, min_ts, max_ts, structure, data, part_ver, column, truncate, seq, _) = f
    n_sym = struct.unpack_from("<i", rec, SYMBOLS_AT)[0]
    if n_sym * 8 != sym:
        raise CorruptFileError(f"{where}: {n_sym} symbol columns in a {sym}-byte symbol section")
    symbols = tuple(struct.iter_unpack("<ii", rec[SYMBOLS_AT + 4 : SYMBOLS_AT + 4 + sym]))
    at = SYMBOLS_AT + 4 + sym
    n_part = struct.unpack_from("<i", rec, at)[0]
    if n_part != part:
        raise CorruptFileError(f"{where}: partition table of {n_part} bytes where the header says {part}")
    if min(transient, fixed) < 0:
        raise CorruptFileError(f"{where}: negative row count (transient {transient}, fixed {fixed})")
    parts = []
    for ts, rows, name_txn, size in struct.iter_unpack("<qqqq", rec[at + 4 : at + 4 + part]):
        u = rows & 0xFFFFFFFFFFFFFFFF
        parts.append(TxnPartition(ts, u & ROW_COUNT_MASK, name_txn, size, bool(u & FLAG_PARQUET),
                                  bool(u & FLAG_READ_ONLY), bool(u & FLAG_PARQUET_BESIDE_NATIVE),
                                  (u >> SQUASH_SHIFT) & SQUASH_MASK))
    for a, b in zip(parts, parts[1:]):
        if b.timestamp <= a.timestamp:
            raise CorruptFileError(f"{where}: partition table not sorted by timestamp ({a.timestamp}, {b.timestamp})")
    return Txn(version, txn, transient, fixed, min_ts, max_ts, structure, data, part_ver, column, truncate, seq,
               symbols, tuple(parts))


def parse_txn(data: bytes, where: str = "_txn") -> Txn:
    """The Txn of `_txn` bytes fetched whole (no writer can be mid-way: no retry)."""
    data = bytes(data)
    version, off, sym, part = _header(data[:HEADER_SIZE], where)
    try:
        return _record(version, data[off : off + record_size(sym, part)], sym, part, where)
    except _Torn as e:
        raise CorruptFileError(f"{e}: not a committed record") from None


def _version(path) -> bytes:
    with open(path, "rb") as f:
        return os.pread(f.fileno(), 8, 0)


def read_txn(path, *, deadline: float = 2.0) -> Txn:
    """The Txn of a local `_txn`, read consistently while QuestDB may be writing it: retried
    until `deadline` seconds have passed, then a StorageError."""
    path = os.fspath(path)
    end = time.monotonic() + deadline
    attempts, last = 0, None
    while True:
        attempts += 1
        try:
            with open(path, "rb") as f:
                fd = f.fileno()
                head = os.pread(fd, HEADER_SIZE, 0)
                version, off, sym, part = _header(head, path)
                if os.pread(fd, 8, 0) != head[:8]:
                    raise _Torn("version moved while the header was read")
                rec = os.pread(fd, record_size(sym, part), off)
                txn = _record(version, rec, sym, part, path)
                if os.pread(fd, 8, 0) != head[:8]:
                    raise _Torn("version moved while the record was read")
                return txn
        except _Torn as e:
            last = e
            if e.short and _version(path) == head[:8]:
                raise CorruptFileError(str(e)) from None
        except FileNotFoundError:
            raise
        except OSError as e:
            raise StorageError(f"{path}: cannot read: {e}") from e
        if time.monotonic() > end:
            raise StorageError(f"{path}: no consistent read in {attempts} attempts over {deadline} s "
                               f"(a writer kept changing it; last: {last})")
        time.sleep(RETRY_PAUSE)
