"""Random descriptions: write -> read -> identical; re-encoding what was read is byte-identical."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import qdbpm
from qdbpm.pm import layout as L
from qdbpm.pm.writer import encode_file

from conftest import read_bytes
from pm_strategies import descriptions, expected_stats

PASS_THROUGH = ("codec", "encodings", "num_values", "byte_range_start", "total_compressed", "null_count",
                "distinct_count")


def assert_matches(pm, d):
    assert pm.column_names == [c.name for c in d.columns]
    for i, c in enumerate(d.columns):
        got = pm.columns[i]
        assert (int(got["type"]), int(got["id"]), int(got["flags"]), int(got["physical_type"]),
                int(got["fixed_byte_len"]), int(got["max_rep_level"]), int(got["max_def_level"])) == \
            (c.type, c.id, c.flags, c.physical_type, c.fixed_byte_len, c.max_rep_level, c.max_def_level)
    assert pm.row_group_count == d.row_group_count
    assert pm.num_rows.tolist() == d.num_rows.tolist()
    for f in PASS_THROUGH:
        np.testing.assert_array_equal(pm.chunks[f], d.chunks[f])
    want = expected_stats(d)
    for (r, c), (mn, mx) in want.items():
        assert pm.stat_bytes(r, c) == (mn, mx)
        flags = int(pm.chunks[r, c]["stat_flags"])
        given_flags = int(d.chunks[r, c]["stat_flags"])
        assert bool(flags & L.STAT_MIN_EXACT) == (mn is not None and bool(given_flags & L.STAT_MIN_EXACT))
        assert bool(flags & L.STAT_MAX_EXACT) == (mx is not None and bool(given_flags & L.STAT_MAX_EXACT))
        assert flags & L.STAT_NULL_COUNT_PRESENT == given_flags & L.STAT_NULL_COUNT_PRESENT
    assert pm.designated_timestamp == d.designated_timestamp
    expect_sort = [(d.designated_timestamp, False)] if d.sorting_is_dts_asc else \
        [(s, bool(d.columns[s].flags & L.COLUMN_FLAG_DESCENDING)) for s in d.sorting_columns]
    assert pm.sorting_columns == expect_sort
    assert (pm.parquet_footer_offset, pm.parquet_footer_length, pm.unused_bytes) == \
        (d.parquet_footer_offset, d.parquet_footer_length, d.unused_bytes)
    assert (pm.squash_tracker, pm.seq_txn) == (d.squash_tracker, d.seq_txn)
    assert pm.scratchpad == (None if d.scratchpad is None else [(c, bytes(v)) for c, v in d.scratchpad])
    bc = d.bloom_columns or []
    assert pm.bloom_columns.tolist() == bc
    for r in range(d.row_group_count):
        for c in range(len(d.columns)):
            present = c in bc and d.blooms is not None and d.blooms.length[r, c] >= 0
            if d.bloom_external:
                want_ref = (int(d.blooms.start[r, c]), int(d.blooms.length[r, c])) if present else None
                assert pm.bloom_ref(r, c) == want_ref and pm.bloom_filter(r, c) is None
            else:
                assert pm.bloom_filter(r, c) == (d.blooms.get((r, c)) if present else None)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(d=descriptions())
def test_random_description_round_trip(tmp_path, d):
    path = str(tmp_path / "_pm")
    size = qdbpm.write_new(path, d)
    data = read_bytes(path)
    assert size == len(data) == int.from_bytes(data[:8], "little")
    with qdbpm.open(path) as pm:
        assert_matches(pm, d)
        assert pm.snapshots() == [d.parquet_size]
        again = pm.to_description()
    assert encode_file(again) == data


def test_external_bloom_length_must_be_whole_blocks(tmp_path):
    """Readers refuse an external bitset whose length is not whole 32-byte blocks, so the writer
    never writes one."""
    import dataclasses

    from golden_cases import external_bloom
    from qdbpm.pm.description import ByteRefs
    from qdbpm.errors import PmError

    d = external_bloom()
    length = d.blooms.length.copy()
    length[0, 2] = 33
    d = dataclasses.replace(d, blooms=ByteRefs(d.blooms.data, d.blooms.start, length))
    with pytest.raises(PmError, match="multiple of 32"):
        qdbpm.write_new(str(tmp_path / "_pm"), d)
    assert not (tmp_path / "_pm").exists()
