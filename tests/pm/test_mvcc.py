"""Update mode and MVCC: every snapshot stays readable; orphaned updates are never reachable."""

import dataclasses
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qdbpm
from qdbpm.pm import layout as L
from qdbpm.pm.description import ByteRefs, Column

from conftest import read_bytes
from support.pm_strategies import assert_matches, descriptions
from support.table_states import COLS, table_state


def test_n_updates_every_snapshot_opens(pm_path):
    states = [table_state(2, 0)]
    written_at = [[0, 0]]  # per snapshot: the version whose block each row group points to
    qdbpm.write_new(pm_path, states[0])
    for v in range(1, 12):
        changed = {v % 3} if v % 4 == 0 else set()
        d = table_state(2 + v, v, changed=changed)
        prev, old = written_at[-1], states[-1].chunks["byte_range_start"][:, 0]
        new = d.chunks["byte_range_start"][:, 0]
        written_at.append([prev[r] if r < len(prev) and new[r] == old[r] else v for r in range(2 + v)])
        states.append(d)
        qdbpm.write_update(pm_path, d)
    with qdbpm.open(pm_path) as pm:
        assert pm.snapshots() == [s.parquet_size for s in reversed(states)]
    for v, d in enumerate(states):
        with qdbpm.open(pm_path, parquet_size=d.parquet_size) as pm:
            assert pm.row_group_count == 2 + v
            assert pm.num_rows.tolist() == d.num_rows.tolist()
            for r in range(pm.row_group_count):
                assert pm.stat_bytes(r, 1)[0] == f"min-{r}-{written_at[v][r]}-long-string".encode()
                assert pm.bloom_filter(r, 1) == bytes([r, written_at[v][r]]) * 16


def test_unchanged_row_groups_keep_their_blocks(pm_path):
    qdbpm.write_new(pm_path, table_state(3, 0))
    with qdbpm.open(pm_path) as pm:
        before = pm.block_offsets.tolist()
        blooms_before = pm.bloom_table.copy()
    qdbpm.write_update(pm_path, table_state(4, 1, changed={1}))
    with qdbpm.open(pm_path) as pm:
        after = pm.block_offsets.tolist()
        assert after[0] == before[0] and after[2] == before[2]
        assert after[1] > before[2] and after[3] > after[1]
        assert pm.bloom_table[0] == blooms_before[0] and pm.bloom_table[2] == blooms_before[2]
        assert pm.bloom_table[1] != blooms_before[1]
        # the moved row group's new block carries the new version's stats and bitset
        assert pm.stat_bytes(1, 1)[0] == b"min-1-1-long-string"
        assert pm.bloom_filter(1, 1) == bytes([1, 1]) * 16
        assert pm.stat_bytes(0, 1)[0] == b"min-0-0-long-string"


def test_crc_covers_whole_physical_file_and_resumes(pm_path):
    import zlib

    qdbpm.write_new(pm_path, table_state(2, 0))
    qdbpm.write_update(pm_path, table_state(3, 1))
    data = read_bytes(pm_path)
    with qdbpm.open(pm_path) as pm:
        assert pm.stored_crc == zlib.crc32(data[8 : pm.crc_offset])


def test_orphaned_update_is_unreachable_and_untouched(pm_path):
    s0, s1, s2 = table_state(2, 0), table_state(3, 1), table_state(4, 2)
    size0 = qdbpm.write_new(pm_path, s0)
    size1 = qdbpm.write_update(pm_path, s1)
    orphan_bytes = read_bytes(pm_path)[size0:size1]
    # The caller published s1 and then rolled back to s0 (its _txn still names s0's Parquet size):
    # the next update chains from s0 and appends past the orphan.
    size2 = qdbpm.write_update(pm_path, s2, anchor_parquet_size=s0.parquet_size)
    data = read_bytes(pm_path)
    assert data[size0:size1] == orphan_bytes
    assert size2 > size1
    with qdbpm.open(pm_path) as pm:
        assert pm.prev_pm_size == size0
        assert pm.snapshots() == [s2.parquet_size, s0.parquet_size]
        with pytest.raises(qdbpm.SnapshotNotFoundError, match=str(s1.parquet_size)):
            qdbpm.open(pm_path, parquet_size=s1.parquet_size)
    # a later update chains past both
    s3 = table_state(5, 3)
    qdbpm.write_update(pm_path, s3)
    with qdbpm.open(pm_path) as pm:
        assert pm.snapshots() == [s3.parquet_size, s2.parquet_size, s0.parquet_size]


def test_unpublished_tail_is_ignored_and_overwritten(pm_path):
    size0 = qdbpm.write_new(pm_path, table_state(2, 0))
    with open(pm_path, "ab") as f:
        f.write(b"\xff" * 1000)  # a crashed writer's unpublished append
    with qdbpm.open(pm_path) as pm:
        assert pm.pm_size == size0 and pm.row_group_count == 2
    size1 = qdbpm.write_update(pm_path, table_state(3, 1))
    assert os.path.getsize(pm_path) == size1
    with qdbpm.open(pm_path) as pm:
        assert pm.snapshots() == [table_state(3, 1).parquet_size, table_state(2, 0).parquet_size]


def test_update_refuses_fewer_row_groups_and_schema_change(pm_path):
    qdbpm.write_new(pm_path, table_state(3, 0))
    with pytest.raises(qdbpm.PmError, match="fewer"):
        qdbpm.write_update(pm_path, table_state(2, 1))
    other = dataclasses.replace(table_state(4, 1), columns=[COLS[0], Column("t", physical_type=L.PT_BYTE_ARRAY)])
    with pytest.raises(qdbpm.PmError, match="schema change"):
        qdbpm.write_update(pm_path, other)


def test_compact_drops_history(pm_path):
    qdbpm.write_new(pm_path, table_state(2, 0))
    for v in range(1, 4):
        qdbpm.write_update(pm_path, table_state(2 + v, v, changed={0}))
    big = os.path.getsize(pm_path)
    with qdbpm.open(pm_path) as pm:
        want = pm.to_description()
    size = qdbpm.compact(pm_path)
    assert size < big
    with qdbpm.open(pm_path) as pm:
        assert pm.snapshots() == [want.parquet_size]
        assert_matches(pm, want)


@st.composite
def update_sequences(draw):
    d0 = draw(descriptions(max_cols=4, max_rgs=4))
    steps = []
    prev = d0
    for k in range(draw(st.integers(1, 4))):
        extra = draw(descriptions(max_cols=0, max_rgs=0))  # only for random footer-level fields
        nrg = prev.row_group_count + draw(st.integers(0, 3))
        ncols = len(prev.columns)
        chunks = np.zeros((nrg, ncols), L.CHUNK_DTYPE)
        chunks[: prev.row_group_count] = prev.chunks
        num_rows = np.zeros(nrg, np.uint64)
        num_rows[: prev.row_group_count] = prev.num_rows
        stats = np.empty((nrg, ncols, 2), object)
        blooms = np.empty((nrg, ncols), object)
        for r in range(nrg):
            moved = r >= prev.row_group_count or (ncols and draw(st.booleans()))
            for c in range(ncols):
                for i in (0, 1):
                    stats[r, c, i] = prev.stats.get((r, c, i)) if (prev.stats is not None and r < prev.row_group_count) else None
                if prev.blooms is not None and r < prev.row_group_count and not prev.bloom_external:
                    blooms[r, c] = prev.blooms.get((r, c))
            if moved and ncols:
                start = draw(st.integers(1 << 41, 1 << 42)) + r
                if r < prev.row_group_count and start == int(prev.chunks[r, 0]["byte_range_start"]):
                    start += 1  # same column-0 start means "unchanged" by definition
                chunks[r]["byte_range_start"] = start
                num_rows[r] = draw(st.integers(0, 1 << 20))
                for c in range(ncols):
                    stats[r, c, 0] = draw(st.one_of(st.none(), st.binary(max_size=20)))
                    if not prev.bloom_external:
                        blooms[r, c] = draw(st.one_of(st.none(), st.binary(min_size=32, max_size=32)))
        if prev.bloom_external and prev.blooms is not None:
            start = np.zeros((nrg, ncols), np.int64)
            length = np.full((nrg, ncols), -1, np.int64)
            start[: prev.row_group_count] = prev.blooms.start
            length[: prev.row_group_count] = prev.blooms.length
            new_blooms = ByteRefs(np.zeros(0, np.uint8), start, length)
        else:
            new_blooms = ByteRefs.from_objects(blooms) if prev.blooms is not None else None
        d = dataclasses.replace(
            prev, chunks=chunks, num_rows=num_rows,
            stats=ByteRefs.from_objects(stats), blooms=new_blooms,
            parquet_footer_offset=prev.parquet_footer_offset + 1 + k, seq_txn=extra.seq_txn,
            scratchpad=extra.scratchpad, unused_bytes=extra.unused_bytes)
        steps.append(d)
        prev = d
    return d0, steps


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seq=update_sequences())
def test_random_update_sequences(tmp_path, seq):
    d0, steps = seq
    path = str(tmp_path / "_pm")
    qdbpm.write_new(path, d0)
    for d in steps:
        qdbpm.write_update(path, d)
    for d in [d0] + steps:
        with qdbpm.open(path, parquet_size=d.parquet_size) as pm:
            assert_matches(pm, d)
    with qdbpm.open(path) as pm:
        assert pm.snapshots() == [d.parquet_size for d in reversed([d0] + steps)]
