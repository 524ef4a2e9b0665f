"""Descriptions behind the golden `_pm` files: one per layout feature.

The files in tests/golden/ were written once from these (tests/golden/make_golden.py) and are
checked forever: the writer must keep producing them byte for byte and the reader must keep
reading them field by field.
"""

import binascii
import dataclasses

import numpy as np

from qdbpm.pm import layout as L
from qdbpm.pm.description import Column, Description

# The two example files of docs/format.md#example-files, byte for byte.
EXAMPLE_A = binascii.unhexlify(
    "c4000000000000000000000000000000ffffffff00000000010000000000000040000000000000000000000005000000"
    "00000000000000000500000000000000636f6c5f30000000640000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000100000000000000000000000000000000000000000000000000000009000000f82c404d"
    "30000000"
)
EXAMPLE_B = binascii.unhexlify(
    "48010000000000000000000000000000ffffffff00000000010000000000000040000000000000000000000005000000"
    "00000000000000000500000000000000636f6c5f30000000640000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000100000000000000000000000000000000000000000000000000000009000000f82c404d"
    "300000000000000032000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000c8000000000000005000000002000000"
    "0000000000000000c4000000000000000000000000000000090000001900000004af699f34000000"
)


def example_a() -> Description:
    return Description(
        columns=[Column("col_0", type=5, id=0, physical_type=L.PT_BOOLEAN, max_def_level=0)],
        num_rows=np.array([100], np.uint64),
        chunks=np.zeros((1, 1), L.CHUNK_DTYPE),
    )


def example_b() -> Description:
    return dataclasses.replace(
        example_a(),
        num_rows=np.array([100, 50], np.uint64),
        chunks=np.zeros((2, 1), L.CHUNK_DTYPE),
        parquet_footer_offset=200,
        parquet_footer_length=80,
    )


def _chunk(codec, start, size, nvals, nulls, flags=L.STAT_MIN_EXACT | L.STAT_MAX_EXACT | L.STAT_NULL_COUNT_PRESENT):
    c = np.zeros((), L.CHUNK_DTYPE)
    c["codec"], c["encodings"], c["stat_flags"] = codec, L.ENC_PLAIN | L.ENC_RLE_DICTIONARY, flags
    c["num_values"], c["byte_range_start"], c["total_compressed"], c["null_count"] = nvals, start, size, nulls
    return c


def _columns():
    return [
        Column("ts", type=L.QDB_TIMESTAMP | L.QDB_FLAG_DESIGNATED_TIMESTAMP, id=0, physical_type=L.PT_INT64,
               flags=L.column_flags(repetition=L.REPETITION_REQUIRED), max_def_level=0),
        Column("id", type=L.QDB_UUID, id=1, physical_type=L.PT_FIXED_LEN_BYTE_ARRAY, fixed_byte_len=16),
        Column("sym", type=L.QDB_SYMBOL, id=2, physical_type=L.PT_BYTE_ARRAY,
               flags=L.column_flags(local_key_is_global=True)),
        Column("név", type=L.QDB_VARCHAR, id=3, physical_type=L.PT_BYTE_ARRAY, flags=L.column_flags(ascii=False)),
    ]


def _row_groups(n=3):
    rgs, pos = [], 4
    for r in range(n):
        chunks = np.zeros(4, L.CHUNK_DTYPE)
        for c in range(4):
            chunks[c] = _chunk(L.CODEC_ZSTD, pos, 1000 + 10 * c + r, 100, c * r)
            pos += 1000 + 10 * c + r
        rgs.append({
            "num_rows": 100,
            "chunks": chunks,
            "mins": [np.int64(1_700_000_000_000_000 + r * 1000).tobytes(), bytes(range(16)), b"AAPL",
                     "árvíztűrő tükörfúrógép".encode()],
            "maxs": [np.int64(1_700_000_000_000_999 + r * 1000).tobytes(), bytes(range(100, 116)), b"TSLA",
                     b"z" * (9 + r)],
        })
    return rgs, pos


def _bitset(seed, n=64):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def ool_stats() -> Description:
    rgs, pos = _row_groups()
    return Description.from_row_groups(_columns(), rgs, designated_timestamp=0, sorting_columns=[0],
                                       parquet_footer_offset=pos, parquet_footer_length=321)


def inline_bloom() -> Description:
    rgs, pos = _row_groups()
    for r, rg in enumerate(rgs):
        rg["blooms"] = {2: _bitset(r, 32)} if r != 1 else {2: _bitset(r, 32), 3: _bitset(10 + r, 64)}
    rgs[2]["blooms"][3] = _bitset(99, 96)
    return Description.from_row_groups(_columns(), rgs, designated_timestamp=0, sorting_columns=[0],
                                       parquet_footer_offset=pos, parquet_footer_length=321)


def external_bloom() -> Description:
    rgs, pos = _row_groups()
    for r, rg in enumerate(rgs):
        rg["blooms"] = {2: (5000 + 100 * r, 32)} if r != 1 else {}
    return Description.from_row_groups(_columns(), rgs, designated_timestamp=0, sorting_columns=[0],
                                       parquet_footer_offset=pos, parquet_footer_length=321,
                                       bloom_external=True, bloom_columns=[2, 3])


def dts_asc() -> Description:
    rgs, pos = _row_groups(2)
    return Description.from_row_groups(_columns(), rgs, designated_timestamp=0, sorting_is_dts_asc=True,
                                       parquet_footer_offset=pos, parquet_footer_length=99, unused_bytes=77)


def squash_tracker() -> Description:
    return dataclasses.replace(dts_asc(), squash_tracker=-42)


def seq_txn() -> Description:
    return dataclasses.replace(dts_asc(), seq_txn=123456789)


def scratchpad() -> Description:
    return dataclasses.replace(dts_asc(), seq_txn=7, scratchpad=[(1, b"hello"), (0xBEEF, b""), (2, bytes(range(13)))])


CASES = {
    "ool_stats": ool_stats,
    "inline_bloom": inline_bloom,
    "external_bloom": external_bloom,
    "dts_asc": dts_asc,
    "squash_tracker": squash_tracker,
    "seq_txn": seq_txn,
    "scratchpad": scratchpad,
}
