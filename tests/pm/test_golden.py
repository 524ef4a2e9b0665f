"""Golden files: written once by tests/golden/make_golden.py, checked forever."""

import os
import zlib

import numpy as np
import pytest

import qdbpm
from qdbpm.pm import layout as L
from qdbpm.pm.encoder import encode_file

from conftest import GOLDEN, golden, read_bytes
from support.golden_cases import CASES, EXAMPLE_A, EXAMPLE_B, example_a, example_b


def test_example_files_are_the_notes_bytes():
    assert golden("example_a.pm") == EXAMPLE_A and len(EXAMPLE_A) == 196
    assert golden("example_b.pm") == EXAMPLE_B and len(EXAMPLE_B) == 328


def test_example_a_fields():
    with qdbpm.open(os.path.join(GOLDEN, "example_a.pm")) as pm:
        assert (pm.pm_size, pm.parquet_size, pm.row_group_count, pm.column_count) == (196, 8, 1, 1)
        assert pm.designated_timestamp == -1 and pm.feature_flags == 0 and pm.footer_feature_flags == 0
        assert pm.column_names == ["col_0"]
        c = pm.columns[0]
        assert (int(c["name_offset"]), int(c["id"]), int(c["type"]), int(c["flags"])) == (64, 0, 5, 0)
        assert (int(c["name_length"]), int(c["physical_type"]), int(c["max_def_level"])) == (5, 0, 0)
        assert pm.num_rows.tolist() == [100]
        assert pm.chunks.shape == (1, 1) and pm.chunks.tobytes() == bytes(64)
        assert pm.block_offsets.tolist() == [72] and pm.footer_offset == 144
        assert pm.stored_crc == 0x4D402CF8 == zlib.crc32(EXAMPLE_A[8:188])
        assert pm.snapshots() == [8] and pm.unused_bytes == 0 and pm.prev_pm_size == 0


def test_example_b_fields_and_snapshots():
    path = os.path.join(GOLDEN, "example_b.pm")
    with qdbpm.open(path) as pm:
        assert (pm.pm_size, pm.parquet_size, pm.row_group_count) == (328, 288, 2)
        assert pm.snapshots() == [288, 8]
        assert pm.num_rows.tolist() == [100, 50]
        assert pm.block_offsets.tolist() == [72, 200] and pm.footer_offset == 272
        assert pm.prev_pm_size == 196
        assert (pm.parquet_footer_offset, pm.parquet_footer_length) == (200, 80)
    with qdbpm.open(path, parquet_size=8) as old:
        assert old.snapshot_pm_size == 196 and old.row_group_count == 1 and old.num_rows.tolist() == [100]
    # The CRC is both a fresh CRC over [8, 320) and A's CRC resumed over [188, 320).
    stored = int.from_bytes(EXAMPLE_B[320:324], "little")
    assert stored == zlib.crc32(EXAMPLE_B[8:320]) == zlib.crc32(EXAMPLE_B[188:320], 0x4D402CF8)


def test_examples_written_byte_identically(pm_path):
    assert encode_file(example_a()) == EXAMPLE_A
    qdbpm.write_new(pm_path, example_a())
    assert read_bytes(pm_path) == EXAMPLE_A
    assert qdbpm.write_update(pm_path, example_b()) == 328
    assert read_bytes(pm_path) == EXAMPLE_B


@pytest.mark.parametrize("name", sorted(CASES))
def test_feature_golden_written_byte_identically(name):
    assert encode_file(CASES[name]()) == golden(f"{name}.pm")


@pytest.mark.parametrize("name", sorted(CASES))
def test_feature_golden_reads_back_the_description(name):
    d = CASES[name]()
    with qdbpm.open(os.path.join(GOLDEN, f"{name}.pm")) as pm:
        assert pm.column_names == [c.name for c in d.columns]
        assert pm.num_rows.tolist() == d.num_rows.tolist()
        for f in ("codec", "encodings", "num_values", "byte_range_start", "total_compressed", "null_count"):
            np.testing.assert_array_equal(pm.chunks[f], d.chunks[f])
        for r in range(d.row_group_count):
            for c in range(len(d.columns)):
                assert pm.stat_bytes(r, c) == (d.stats.get((r, c, 0)), d.stats.get((r, c, 1)))
                if d.blooms is not None and not d.bloom_external and c in pm.bloom_columns:
                    assert pm.bloom_filter(r, c) == d.blooms.get((r, c))
                if d.bloom_external and c in pm.bloom_columns:
                    want = None if d.blooms.length[r, c] < 0 else (int(d.blooms.start[r, c]), int(d.blooms.length[r, c]))
                    assert pm.bloom_ref(r, c) == want
        assert pm.squash_tracker == d.squash_tracker
        assert pm.seq_txn == d.seq_txn
        assert pm.scratchpad == d.scratchpad
        assert pm.designated_timestamp == d.designated_timestamp
        assert pm.unused_bytes == d.unused_bytes
        assert pm.parquet_size == d.parquet_size


def test_golden_layout_details():
    with qdbpm.open(os.path.join(GOLDEN, "inline_bloom.pm")) as pm:
        assert pm.feature_flags == L.FEATURE_BLOOM_FILTERS
        assert pm.bloom_columns.tolist() == [2, 3]
        # Row group 1: UUID min/max out of line at the start of the OOL region, then the
        # 8-aligned bitset of column 2 (i32 length + 32 bytes), then column 3's OOL min/max.
        ool = int(pm.block_offsets[1]) + 8 + 64 * 4
        ch = pm.chunks[1]
        assert int(ch[1]["min_stat"]) == (0 << 16) | 16 and int(ch[1]["max_stat"]) == (16 << 16) | 16
        assert int(pm.bloom_table[1, 0]) << 3 == ool + 32
        assert int(ch[3]["min_stat"]) >> 16 == 32 + 4 + 32
        assert all(int(e) << 3 & 7 == 0 for e in pm.bloom_table.reshape(-1))
    with qdbpm.open(os.path.join(GOLDEN, "dts_asc.pm")) as dts, qdbpm.open(os.path.join(GOLDEN, "ool_stats.pm")) as srt:
        assert dts.feature_flags == L.FEATURE_SORTING_IS_DTS_ASC
        assert dts.sorting_columns == srt.sorting_columns == [(0, False)]
        assert dts.sorting_column_indices.size == 0 and srt.sorting_column_indices.tolist() == [0]
